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
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// The tests here pin issue 8 item 12: clocks (leases, minimum ages, timeouts) may make
// things faster or tidier, never safe. Each pauses a process past the clock and shows
// that a commit point, not the clock, decides.

// TestPausedCompactionRolledBackByRecoveryCannotCommit: a compaction in another process is
// paused (SIGSTOP) just before its manifest put; its hold's lease runs out and recovery
// (its minimum age passed) rolls the operation back: it fences the transaction with an
// abort version and deletes the attempt's files. Resumed, the compaction must fail at
// its commit instead of publishing a version naming the deleted files.
func TestPausedCompactionRolledBackByRecoveryCannotCommit(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t)
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 3; i++ { // small fragments to compact
		rec := batch(100*i, 100*i+10)
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	before := enginetest.Rows(t, checkSound(t, s, db, "t"))
	gate := filepath.Join(t.TempDir(), "go")
	c := startChild(t, s, "compact", "t", failpoint.EnvVar+"=manifest.before_version_put=block("+gate+")")
	// The attempt's transaction record is written just before the manifest put.
	waitFor(t, 30*time.Second, "the compaction's transaction record", func() bool {
		keys, _ := recovery.Pending(ctx, s, "t")
		recs, _ := s.List(ctx, manifest.TxnDir("t"), 0)
		for _, k := range keys {
			b, err := s.Get(ctx, k)
			if err != nil {
				continue
			}
			sc, err := recovery.Decode(b)
			if err != nil {
				continue
			}
			for _, o := range recs {
				if strings.HasSuffix(o.Key, "-"+sc.Attempts[len(sc.Attempts)-1].TxnID+".txn") {
					return true
				}
			}
		}
		return false
	})
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	enginetest.ExpireHolds(t, db, "t")
	rep, err := recovery.Recover(ctx, s, db.Catalog(), "t", recovery.Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != recovery.RolledBack || rep.Outcomes[0].Fence == 0 || len(rep.Outcomes[0].DeletedFiles) == 0 {
		t.Fatalf("recover: %+v %v; want the paused compaction rolled back behind a fence", rep, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := c.wait(t)
	if r.Outcome != engine.Rejected.String() || !r.Aborted {
		t.Fatalf("resumed compaction: %+v; want it rejected with ErrTxnAborted", r)
	}
	after := enginetest.Rows(t, checkSound(t, s, db, "t"))
	if !slices.Equal(after, before) {
		t.Fatalf("rows changed: %d before, %d after", len(before), len(after))
	}
}

// TestPausedGroupAbortedByTimeoutCannotCommit: a multi-table transaction in another
// process has prepared its versions of t and u and is paused before the etcd transaction
// that commits the group. A writer that meets the pending group waits its GroupTimeout and
// aborts it. Resumed, the group's commit must fail (its compare on the group key finds it
// aborted): neither table shows its rows, and the other writer's rows are there.
func TestPausedGroupAbortedByTimeoutCannotCommit(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t)
	u, err := db.CreateTable(ctx, "u", schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch(0, 5)
	if _, err := u.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	gate := filepath.Join(t.TempDir(), "go")
	c := startChild(t, s, "group", "t", failpoint.EnvVar+"=engine.group_prepared=block("+gate+")")
	waitFor(t, 30*time.Second, "the group's prepared version of u", func() bool {
		h, err := manifest.Head(ctx, s, "u")
		return err == nil && h == u.Version()+1
	})
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A writer with a short group timeout meets the pending group and aborts it.
	impatient := enginetest.OpenDB(t, s, engine.Options{GroupTimeout: 200 * time.Millisecond})
	w, err := impatient.OpenTable(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	rec = batch(3000, 3001)
	if _, err := w.AppendRecord(ctx, rec); err != nil {
		t.Fatalf("writer meeting the pending group: %v", err)
	}
	rec.Release()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := c.wait(t)
	if r.Outcome != engine.Rejected.String() {
		t.Fatalf("resumed group: %+v; want rejected", r)
	}
	for _, name := range []string{"t", "u"} {
		rows := strings.Join(enginetest.Rows(t, checkSound(t, s, db, name)), "\n")
		if strings.Contains(rows, "2000|") {
			t.Fatalf("table %s shows the aborted group's rows", name)
		}
		if name == "u" && !strings.Contains(rows, "3000|") {
			t.Fatalf("table u lost the impatient writer's row")
		}
	}
}

// TestPausedWriteWithoutHoldCannotCommit: the write hold is armed by a timer
// (Options.WriteHoldAfter, 30 s by default); a write paused before it fires, or that never
// takes one (negative, as here), has nothing in etcd protecting its objects. Paused with
// SIGSTOP after writing them, it has them collected by garbage collection with no grace
// period; resumed, it must fail at its commit with manifest.ErrTxnAborted: the timer only
// spares a long write from being aborted, it never decides what is kept.
func TestPausedWriteWithoutHoldCannotCommit(t *testing.T) {
	for _, mode := range []string{"append", "delete"} {
		t.Run(mode, func(t *testing.T) { pausedWriteCollected(t, mode, holdNone) })
	}
}
