package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A hold is a running operation's low watermark on a table, kept in etcd under a lease at
// <prefix>/holds/<table>/<id> (DESIGN §12): while it exists, garbage collection in any
// process keeps every version at or above Hold.Version, and recovery treats the
// operation as alive. A hold whose process dies disappears when its lease expires
// (its TTL after the last keep-alive), so a crashed operation never pins history for
// longer than that.
//
// Holds are advisory to GC and recovery only; writers ignore them.

// DefaultHoldTTL is the lease TTL AcquireHold uses when given 0.
const DefaultHoldTTL = 15 * time.Second

// Hold is the stored form of one hold (JSON).
type Hold struct {
	ID      string    `json:"id"`      // the operation id (a compaction's sidecar operation id, a reader's pin id)
	Table   string    `json:"table"`   // the table held
	Kind    string    `json:"kind"`    // "compaction", "pin", … (informational)
	Version uint64    `json:"version"` // the low watermark: versions >= Version must stay readable
	Started time.Time `json:"started"` // when the hold was acquired
	Holder  string    `json:"holder"`  // host:pid of the holding process (informational)
}

// ErrHoldLost: the hold's lease expired or was revoked (etcd unreachable for longer than
// its TTL); the watermark no longer protects anything.
var ErrHoldLost = errors.New("hold lease lost")

// HoldKey returns the etcd key of hold id on table.
func (c *Catalog) HoldKey(table, id string) string { return c.holdsPrefix(table) + id }

func (c *Catalog) holdsPrefix(table string) string {
	if table == "" {
		return c.prefix + "/holds/"
	}
	return c.prefix + "/holds/" + table + "/"
}

// Holding is an acquired hold, kept alive until Release. Safe for concurrent use.
type Holding struct {
	c      *Catalog
	key    string
	lease  clientv3.LeaseID
	cancel context.CancelFunc
	lost   chan struct{}

	mu   sync.Mutex
	hold Hold
}

// AcquireHold stores h (ID, Table and Version required; Started and Holder are filled in
// when empty) under a new lease of ttl (0: DefaultHoldTTL; rounded up to whole seconds)
// and keeps the lease alive in the background until Release.
// Errors (as *Error): ErrInvalid (missing fields, or a hold with that id exists), ErrEtcd.
func (c *Catalog) AcquireHold(ctx context.Context, h Hold, ttl time.Duration) (*Holding, error) {
	key := c.HoldKey(h.Table, h.ID)
	if h.ID == "" || h.Table == "" || strings.Contains(h.ID, "/") {
		return nil, &Error{"acquire hold", h.Table, key, fmt.Errorf("%w: hold needs an id without '/' and a table", ErrInvalid)}
	}
	if ttl <= 0 {
		ttl = DefaultHoldTTL
	}
	if h.Started.IsZero() {
		h.Started = time.Now().UTC()
	}
	if h.Holder == "" {
		host, _ := os.Hostname()
		h.Holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	lease, err := c.cli.Grant(ctx, secs)
	if err != nil {
		return nil, &Error{"acquire hold", h.Table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	body, _ := json.Marshal(h)
	r, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(body), clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		_, _ = c.cli.Revoke(context.WithoutCancel(ctx), lease.ID)
		return nil, &Error{"acquire hold", h.Table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	if !r.Succeeded {
		_, _ = c.cli.Revoke(context.WithoutCancel(ctx), lease.ID)
		return nil, &Error{"acquire hold", h.Table, key, fmt.Errorf("%w: hold %s exists", ErrInvalid, h.ID)}
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch, err := c.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		cancel()
		_, _ = c.cli.Revoke(context.WithoutCancel(ctx), lease.ID)
		return nil, &Error{"acquire hold", h.Table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	hd := &Holding{c: c, key: key, lease: lease.ID, cancel: cancel, lost: make(chan struct{}), hold: h}
	go func() {
		for range ch {
		}
		close(hd.lost) // the keep-alive channel closes on Release or when the lease is gone
	}()
	return hd, nil
}

// Hold returns the hold as last stored.
func (h *Holding) Hold() Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hold
}

// Lost is closed when the lease is no longer kept alive (after Release, or when etcd
// expired it).
func (h *Holding) Lost() <-chan struct{} { return h.lost }

// Move sets the hold's watermark to version (a compaction that replans on a newer
// version moves it up). Errors (as *Error): ErrHoldLost when the lease is gone, ErrEtcd.
func (h *Holding) Move(ctx context.Context, version uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := h.hold
	next.Version = version
	body, _ := json.Marshal(next)
	// Guarded on the key still existing, so a lost lease is not silently re-created
	// without one.
	r, err := h.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(h.key), ">", 0)).
		Then(clientv3.OpPut(h.key, string(body), clientv3.WithLease(h.lease))).Commit()
	if err != nil {
		return &Error{"move hold", next.Table, h.key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	if !r.Succeeded {
		return &Error{"move hold", next.Table, h.key, ErrHoldLost}
	}
	h.hold = next
	return nil
}

// Release revokes the hold's lease, which deletes its key. Releasing twice is harmless.
// Errors (as *Error): ErrEtcd (the lease then expires on its own within its TTL).
func (h *Holding) Release(ctx context.Context) error {
	h.cancel()
	if _, err := h.c.cli.Revoke(ctx, h.lease); err != nil && !isLeaseNotFound(err) {
		return &Error{"release hold", h.hold.Table, h.key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	return nil
}

func isLeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

// Holds returns the live holds on table ("" = every table), in key order.
// Errors (as *Error): ErrEtcd, ErrCorrupt (a hold that does not decode; its key is named).
func (c *Catalog) Holds(ctx context.Context, table string) ([]Hold, error) {
	prefix := c.holdsPrefix(table)
	r, err := c.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, &Error{"holds", table, prefix, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	out := make([]Hold, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		var h Hold
		if err := json.Unmarshal(kv.Value, &h); err != nil {
			return nil, &Error{"holds", table, string(kv.Key), fmt.Errorf("%w: %v", ErrCorrupt, err)}
		}
		out = append(out, h)
	}
	return out, nil
}

// HoldExists reports whether hold id on table is live.
// Errors (as *Error): ErrEtcd.
func (c *Catalog) HoldExists(ctx context.Context, table, id string) (bool, error) {
	key := c.HoldKey(table, id)
	r, err := c.cli.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return false, &Error{"hold exists", table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	return r.Count > 0, nil
}

// LowWatermark returns the lowest Version among holds (ok false when there are none).
// Pure.
func LowWatermark(holds []Hold) (v uint64, ok bool) {
	for _, h := range holds {
		if !ok || h.Version < v {
			v, ok = h.Version, true
		}
	}
	return v, ok
}
