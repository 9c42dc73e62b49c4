package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// idleTable is a table of 12 batches in 3 fragments, opened with a short index idle
// timeout.
func idleTable(t *testing.T, s store.Store, idle, interval time.Duration) *Table {
	t.Helper()
	ctx := context.Background()
	db := openDBWith(t, s, Options{IndexIdleTimeout: idle, IndexCheckInterval: interval})
	db.opts.Write.MaxRowsPerBatch = 50
	tbl, err := db.CreateTable(ctx, "idle", ixSchema)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := int64(0); i < 3; i++ {
		rec := ixBatch(rng, i*200, i*200+200)
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	return tbl
}

// TestIndexBuildIdleTimeout (issue 10, invariant 12): only progress decides that an index
// build is stuck. A slow build that completes a read every 200 ms for three times the
// 600 ms idle timeout finishes; a silent one is cancelled within the timeout plus one
// check interval (and a little scheduling slack), saying it made no progress; a build
// whose every data read fails ends with an error too, saying which.
func TestIndexBuildIdleTimeout(t *testing.T) {
	ctx := context.Background()
	const idle, interval = 600 * time.Millisecond, 100 * time.Millisecond

	t.Run("slow but alive", func(t *testing.T) {
		tbl := idleTable(t, storetest.Local(t), idle, interval)
		defer failpoint.Enable("engine.index_read", failpoint.Sleep(200*time.Millisecond))()
		start := time.Now()
		if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"id"}}); err != nil {
			t.Fatalf("slow build after %s: %v", time.Since(start), err)
		}
		if took := time.Since(start); took < 3*idle {
			t.Fatalf("the build took %s; the test needs it to run past three idle timeouts", took)
		}
	})

	t.Run("silent", func(t *testing.T) {
		tbl := idleTable(t, storetest.Local(t), idle, interval)
		never := make(chan struct{})
		defer close(never)
		defer failpoint.Enable("engine.index_read", failpoint.BlockUntilClosed(never))()
		start := time.Now()
		_, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"id"}})
		took := time.Since(start)
		if !errors.Is(err, index.ErrNoProgress) {
			t.Fatalf("silent build: %v after %s, want ErrNoProgress", err, took)
		}
		if took > idle+interval+500*time.Millisecond {
			t.Fatalf("silent build cancelled after %s, want within %s + %s (+ slack)", took, idle, interval)
		}
		if len(tbl.Indexes()) != 0 {
			t.Fatalf("indexes after a cancelled build: %+v", tbl.Indexes())
		}
	})

	t.Run("every request fails", func(t *testing.T) {
		fs := faults.NewStore(storetest.Local(t), faults.NewSeed(t))
		tbl := idleTable(t, fs, idle, interval)
		fs.Add(faults.Rule{Ops: []store.Op{store.OpGetRange, store.OpGet}, Key: "idle/data/*", Kind: faults.DropRequest})
		_, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"id"}})
		if err == nil || !(errors.Is(err, index.ErrNoProgress) || errors.Is(err, store.ErrTransient)) {
			t.Fatalf("build with every read failing: %v; want ErrNoProgress or the store's transient error", err)
		}
		t.Logf("ended with: %v", err)
	})
}
