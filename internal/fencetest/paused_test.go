package fencetest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
)

// setup creates table t with ids 0..49 in a local store and returns the store and a DB.
func setup(t *testing.T) (store.Store, *engine.DB) {
	t.Helper()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	tbl, err := db.CreateTable(context.Background(), "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch(0, 50)
	defer rec.Release()
	if _, err := tbl.AppendRecord(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return s, db
}

// unreferenced lists the objects under table/prefix that no version references.
func unreferenced(t *testing.T, s store.Store, table, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	refs := map[string]bool{}
	vs, err := manifest.Versions(ctx, s, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		m, err := manifest.Load(ctx, s, table, v)
		if err != nil {
			continue // expired
		}
		for _, f := range m.Fragments {
			for _, df := range f.Files {
				refs[df.Key] = true
			}
			if f.Deletion != nil {
				refs[f.Deletion.Key] = true
			}
		}
	}
	objs, err := s.List(ctx, table+"/"+prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if !refs[o.Key] {
			out = append(out, o.Key)
		}
	}
	return out
}

// checkSound asserts that verify finds no fault at any version and that the published
// version reads (no published version names a missing object).
func checkSound(t *testing.T, s store.Store, db *engine.DB, table string) *engine.Table {
	t.Helper()
	ctx := context.Background()
	vr, err := verify.Table(ctx, s, db.Catalog(), table, verify.Options{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify: %v", vr.Err())
	}
	tbl, err := db.OpenTable(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Rows(t, tbl)
	return tbl
}

// TestPausedWriterCannotPublishCollectedFiles (issue 8 item 1): a writer in another
// process writes its data files (append) or deletion vector (delete), is paused with
// SIGSTOP before its commit, and its hold's lease runs out: revoked here, as etcd does one
// TTL after the last keep-alive, and in the lease-expires case for real, the pause
// outlasting the lease (catalog.DefaultHoldTTL) with nothing revoked. Garbage collection
// with no grace period deletes what it wrote; then SIGCONT. The write must fail at its
// commit point with manifest.ErrTxnAborted (Rejected) instead of publishing a version
// whose objects are gone; the table stays fully readable and verifies.
func TestPausedWriterCannotPublishCollectedFiles(t *testing.T) {
	for _, c := range []struct{ mode, hold string }{{"append", holdRevoked}, {"delete", holdRevoked}, {"append", holdExpires}} {
		t.Run(c.mode+"/"+c.hold, func(t *testing.T) { pausedWriteCollected(t, c.mode, c.hold) })
	}
}

// How a paused writer's hold ends (pausedWriteCollected).
const (
	holdRevoked = "lease-revoked" // its lease is revoked while it is paused
	holdExpires = "lease-expires" // the pause outlasts its lease; etcd expires it
	holdNone    = "no-hold"       // the write never takes a hold (WriteHoldAfter negative)
)

// pausedWriteCollected runs a write (mode "append" or "delete") of table t in another
// process, paused with SIGSTOP after it wrote its objects and before its commit; its
// hold ends as hold says; garbage collection with no grace period then collects the
// objects, and the writer is resumed with SIGCONT. It must be rejected with
// manifest.ErrTxnAborted, saying so, and the table must read as before and verify.
func pausedWriteCollected(t *testing.T, mode, hold string) {
	ctx := context.Background()
	s, db := setup(t)
	before := enginetest.Rows(t, checkSound(t, s, db, "t"))
	gate := filepath.Join(t.TempDir(), "go")
	env := []string{failpoint.EnvVar + "=manifest.before_txn_put=block(" + gate + ")"}
	if hold == holdNone {
		env = append(env, "HOLD_AFTER=-1ns")
	}
	c := startChild(t, s, mode, "t", env...)
	prefix := map[string]string{"append": "data/", "delete": "_deletions/"}[mode]
	waitFor(t, 30*time.Second, "the child's "+prefix+" object", func() bool {
		return len(unreferenced(t, s, "t", prefix)) > 0
	})
	written := unreferenced(t, s, "t", prefix)
	holds := func() []catalog.Hold {
		hs, err := db.Catalog().Holds(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	if hold != holdNone {
		// The write takes its hold 1 ms after it starts: pause it once the hold is there.
		waitFor(t, 30*time.Second, "the writer's hold", func() bool { return len(holds()) > 0 })
	}
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	switch hold {
	case holdRevoked:
		enginetest.ExpireHolds(t, db, "t") // the paused writer's lease runs out
	case holdExpires:
		paused := time.Now()
		waitFor(t, catalog.DefaultHoldTTL+30*time.Second, "the paused writer's lease to expire", func() bool { return len(holds()) == 0 })
		t.Logf("the paused writer's hold expired %s after the pause (lease TTL %s)", time.Since(paused).Round(time.Millisecond), catalog.DefaultHoldTTL)
	case holdNone:
		if hs := holds(); len(hs) > 0 {
			t.Fatalf("a write with WriteHoldAfter negative took holds %+v", hs)
		}
	}
	rep, err := gc.Run(ctx, s, db.Catalog(), "t", gc.Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	t.Logf("%s: gc fenced %d transaction(s) at v%d, deleted %d objects; the writer had written %v", mode, tr.FencedTxns, tr.Fence, len(tr.Deleted), written)
	for _, k := range written {
		if _, err := s.Head(ctx, k); err == nil {
			t.Fatalf("gc kept %s (the test needs it collected)", k)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := c.wait(t)
	if r.Outcome != engine.Rejected.String() || !r.Aborted {
		t.Fatalf("paused %s after gc collected its objects: %+v; want rejected with ErrTxnAborted", mode, r)
	}
	if !strings.Contains(r.Err, "garbage collection or recovery") {
		t.Fatalf("error does not say what happened: %s", r.Err)
	}
	after := enginetest.Rows(t, checkSound(t, s, db, "t"))
	if !slices.Equal(after, before) {
		t.Fatalf("rows changed: %d before, %d after", len(before), len(after))
	}
}
