package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
)

// TestCompactKilledThenRecover: a compaction killed (SIGKILL) after its commit and before
// its publish leaves drift covered by its sidecar; `shale recover` reports it running
// while its hold's lease lives, then (the lease expired) rolls it forward; verify finds
// no fault, and a second recover has nothing to do.
func TestCompactKilledThenRecover(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("rec")
	for i := 0; i < 3; i++ {
		e.ok("import", e.file("r.csv", "a,b\n1,x\n2,y\n"), "--table", tbl, "--idempotency-key", fmt.Sprint(i))
	}
	want := e.ok("query", tbl, "--format", "csv")
	cmd := exec.Command(shaleBin, "compact", tbl)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s", "SHALE_FAILPOINTS=compaction.before_publish=kill")
	if err := cmd.Run(); err == nil {
		t.Fatal("compaction was not killed at its seam")
	}
	if out := e.ok("status"); !strings.Contains(out, "1 unpublished") {
		t.Fatalf("status after the kill:\n%s", out)
	}
	// The killed compaction's hold lives until its lease expires (15 s after its last
	// keep-alive): until then recover reports the operation as running.
	if out := e.ok("recover", "--min-age", "0"); !strings.Contains(out, "still running") {
		t.Fatalf("recover right after the kill: %s", out)
	}
	e.expireHolds(tbl) // what the lease expiry does (recovery's own tests wait for the real one)
	out := e.ok("recover", "--min-age", "0")
	if !strings.Contains(out, "rolled forward") {
		t.Fatalf("recover: %s", out)
	}
	e.ok("verify", tbl)
	if got := e.ok("query", tbl, "--format", "csv"); got != want {
		t.Fatalf("rows changed:\n%s\nwant\n%s", got, want)
	}
	if out := e.ok("recover", "--min-age", "0"); !strings.Contains(out, "No recovery sidecars") {
		t.Fatalf("second recover: %s", out)
	}
}

// expireHolds revokes the leases of the catalog holds on table in the env's etcd, as
// their expiry one TTL after a killed holder's last keep-alive would.
func (e *env) expireHolds(table string) {
	e.t.Helper()
	ctx := context.Background()
	c, err := coord.Connect(ctx, coord.Config{StateDir: e.home})
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Etcd().Get(ctx, "/shale/", clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, kv := range r.Kvs {
		if strings.Contains(string(kv.Key), "/holds/"+table+"/") && kv.Lease != 0 {
			if _, err := c.Etcd().Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				e.t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		e.t.Fatalf("no hold on %s to expire", table)
	}
}
