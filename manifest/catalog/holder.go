package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// HolderExited reports whether a hold's holder (Hold.Holder, "host:pid") is a process of
// this host that has exited: the host is this machine's name (os.Hostname) and no process
// has the pid. Its hold then still shows until its lease expires (its TTL after the last
// keep-alive), but the operation is not running. A holder on another host, a holder
// that does not parse, and this process are never reported exited; a pid reused since
// by another process reads as running, which only delays what waits for the hold.
func HolderExited(holder string) bool {
	host, p, ok := strings.Cut(holder, ":")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	me, err := os.Hostname()
	if err != nil || host != me {
		return false
	}
	return processGone(pid)
}

// ReleaseExited revokes the lease of hold h when it is still stored as h and its holder
// has exited (HolderExited), deleting it now rather than when the lease expires. It
// reports whether it did. A hold stored under the same key by another holder since is
// left alone. Errors (as *Error): ErrEtcd.
func (c *Catalog) ReleaseExited(ctx context.Context, h Hold) (bool, error) {
	if !HolderExited(h.Holder) {
		return false, nil
	}
	key := c.HoldKey(h.Table, h.ID)
	r, err := c.cli.Get(ctx, key)
	if err != nil {
		return false, &Error{"release exited hold", h.Table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	if len(r.Kvs) == 0 {
		return false, nil // expired meanwhile
	}
	var cur Hold
	if json.Unmarshal(r.Kvs[0].Value, &cur) != nil || cur.Holder != h.Holder || !cur.Started.Equal(h.Started) || r.Kvs[0].Lease == 0 {
		return false, nil
	}
	if _, err := c.cli.Revoke(ctx, clientv3.LeaseID(r.Kvs[0].Lease)); err != nil && !isLeaseNotFound(err) {
		return false, &Error{"release exited hold", h.Table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	return true, nil
}
