package servetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/wal"
)

// appendGens appends gens flushed generations of n rows each to table's shard 0 from the
// parent, ids from, from+1, …, and records them in l.
func appendGens(t *testing.T, db *engine.DB, table string, from int64, n, gens int, l *ledger) {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.OpenTable(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for g := range gens {
		first := from + int64(g*n)
		rec := batch(first, n, "parent")
		_, err := w.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		l.add(first, int64(n))
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// mergedWatermark is the published merged watermark of table's shard 0.
func mergedWatermark(t *testing.T, db *engine.DB, table string) uint64 {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Manifest().WALMerged[wal.ShardID(0)]
}

// TestPausedExecutorCannotCommitStale: an executor SIGSTOPped mid-merge (its sidecar
// armed, its files written, right before its manifest version put) past its lease; another executor takes over, recovers the
// sidecar and merges; SIGCONT: the paused one goes on to its commit, which must not land
// anything stale: rows exactly once, no generation merged twice, the published pointer
// never moves back, verify passes.
func TestPausedExecutorCannotCommitStale(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	createTable(t, e, "w", 1, false)
	l := &ledger{attempted: map[int64]bool{}, acked: map[int64]bool{}}
	l.add(-1, 1)
	appendGens(t, e.db, "w", 0, 5, 3, l)
	ptr := watchPointer(t, e.db, "w")

	cfg := e.serveChild("pA", nil)
	cfg.IdleTimeout = time.Minute // the watchdog must not cancel the held execution
	// pA is held right before its merge's manifest version put, its sidecar armed and its
	// files written, and paused there.
	cfg.HoldAt = "manifest.before_version_put"
	pA := start(t, e.s, cfg, "")
	waitFor(t, 30*time.Second, "pA's merge to reach its version put", func() bool {
		_, err := os.Stat(filepath.Join(e.dir, "held"))
		return err == nil
	})
	if n := pendingSidecars(t, e.db, "w"); n != 1 {
		t.Fatalf("%d sidecars pending while pA's merge is held, want 1", n)
	}
	pA.signal(t, 19) // SIGSTOP
	stopped := time.Now()
	headBefore, err := manifest.Head(ctx, e.db.Store(), "w")
	if err != nil {
		t.Fatal(err)
	}

	cfgB := e.serveChild("pB", nil)
	cfgB.IdleTimeout = time.Minute
	pB := start(t, e.s, cfgB, "")
	// pA's lease expires; pB leads, recovers pA's sidecar and merges the backlog.
	waitFor(t, 60*time.Second, "pB to merge the backlog", func() bool { return mergedWatermark(t, e.db, "w") == 3 })
	t.Logf("pB merged %s after pA stopped", time.Since(stopped).Round(time.Millisecond))
	// pA's sidecar may still be pending (recovery leaves it while pA's hold lives): the
	// merge needs no recovery first, the commit point decides.
	t.Logf("%d sidecars pending when pB's merge was published", pendingSidecars(t, e.db, "w"))
	snap, err := serve.StateOf(e.db).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range snap.Executors {
		if x.ID == "pA" {
			t.Fatalf("pA's executor key outlived its lease: %+v", x)
		}
	}
	merges := checkWatermarks(t, e.db, "w")

	// Let pA go on to its commit.
	touch(t, filepath.Join(e.dir, "go"))
	pA.signal(t, 18) // SIGCONT
	var mine execution
	waitFor(t, 60*time.Second, "pA's execution to end", func() bool {
		es, _, err := readExecutions(e.dir, "pA", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range es {
			if x.Kind == plan.KindMergeWAL && !x.End.IsZero() {
				mine = x
				return true
			}
		}
		return false
	})
	t.Logf("pA's merge after SIGCONT: phase %s, error %q", mine.Phase, mine.Err)
	headAfter, err := manifest.Head(ctx, e.db.Store(), "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HEAD v%d when pA stopped, v%d after it resumed", headBefore, headAfter)

	// More work after the resume is still done once.
	appendGens(t, e.db, "w", 1000, 5, 2, l)
	waitFor(t, 60*time.Second, "the new backlog merged", func() bool { return mergedWatermark(t, e.db, "w") == 5 })
	waitFor(t, 60*time.Second, "w quiet", func() bool { _, ok := quiet(ctx, e.db, "w"); return ok })
	touch(t, filepath.Join(e.dir, "stop-serve"))
	pA.waitOK(t, time.Minute)
	pB.waitOK(t, time.Minute)

	checkOnce(t, e.db, "w", l)
	if n := checkWatermarks(t, e.db, "w"); n < merges {
		t.Fatalf("%d merge commits, fewer than %d before the resume", n, merges)
	}
	ptr.check(t, "w")
	checkVerify(t, e.db, "w")
	t.Logf("published pointer versions: %v", ptr.vs)
}
