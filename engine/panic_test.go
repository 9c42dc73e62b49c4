package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
)

// TestPanicOnScanGoroutineIsAnError: a panic while a batch is read on one of the engine's
// goroutines (Scan's producers, Count's and Delete's workers, Update's readers) fails
// the operation with an error wrapping ErrInternal that names the table, version and data
// file, instead of ending the process; nothing is committed, and the table reads as
// before once the fault is gone.
func TestPanicOnScanGoroutineIsAnError(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "t", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	appendRange(t, tbl, 10, 20)
	v := tbl.Version()
	keys := map[string]bool{}
	for _, f := range tbl.m.Fragments {
		keys[f.Files[0].Key] = true
	}
	check := func(what string, err error) {
		t.Helper()
		var oe *manifest.ObjectError
		if !errors.Is(err, ErrInternal) || !errors.Is(err, failpoint.ErrInjected) ||
			!errors.As(err, &oe) || oe.Table != "t" || oe.Version != v || !keys[oe.Key] {
			t.Fatalf("%s: %v, want ErrInternal naming table t version %d and one of its data files", what, err, v)
		}
		if !strings.Contains(err.Error(), "internal error: panic: ") || !strings.Contains(err.Error(), "[at ") {
			t.Fatalf("%s: %q lacks the panic and its stack", what, err)
		}
	}
	disable := failpoint.Enable("engine.read_batch", failpoint.Panic("boom"))
	sc, err := tbl.Scan(ctx, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for sc.Next() {
	}
	check("scan", sc.Err())
	sc.Release()
	_, err = tbl.Count(ctx, "id >= 0")
	check("count", err)
	_, err = tbl.Delete(ctx, "id = 3")
	check("delete", err)
	_, err = tbl.Update(ctx, map[string]string{"name": "'u'"}, "id = 3")
	check("update", err)
	disable()

	if head, err := manifest.Head(ctx, db.store, "t"); err != nil || head != v {
		t.Fatalf("HEAD %d (%v), want %d: nothing committed", head, err, v)
	}
	if got := ids(t, tbl, ""); len(got) != 20 {
		t.Fatalf("%d rows after the fault, want 20", len(got))
	}
}
