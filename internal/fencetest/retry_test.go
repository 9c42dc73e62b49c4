package fencetest

import (
	"context"
	"errors"
	"github.com/shale-db/shale/internal/failpoint"
	"slices"
	"testing"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// TestRetryAfterCollectionIsRejected (issue 8 item 1, the Unknown case): an append's
// outcome is Unknown (its manifest put never arrived); its hold is released with the
// write, garbage collection collects its data files, and Table.Retry then runs. The retry
// must be rejected with manifest.ErrTxnAborted, not commit a version naming the deleted
// files.
func TestRetryAfterCollectionIsRejected(t *testing.T) {
	ctx := context.Background()
	fs := faults.NewStore(storetest.Local(t), faults.NewSeed(t))
	db := enginetest.OpenDB(t, fs, engine.Options{})
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch(0, 10)
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	before := enginetest.Rows(t, tbl)
	key := manifest.ManifestKey("t", tbl.Version()+1)
	// Armed once the append has planned (on HEAD) and written its files.
	defer failpoint.Enable("manifest.before_txn_put", failpoint.Call(func(context.Context) error {
		fs.Add(faults.Rule{Ops: []store.Op{store.OpPutIfAbsent}, Key: key, Kind: faults.DropRequest, Class: store.ErrOutcomeUnknown})
		fs.Add(faults.Rule{Ops: []store.Op{store.OpGet}, Key: key, Kind: faults.DropRequest})
		return nil
	}).Once())()
	rec = batch(100, 110)
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	var ue *engine.UnknownError
	if !errors.As(err, &ue) {
		t.Fatalf("append: %v, want Unknown", err)
	}
	fs.Clear()
	rep, err := gc.Run(ctx, fs, db.Catalog(), "t", gc.Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	if tr := rep.Tables[0]; tr.FencedTxns != 1 || tr.Fence == 0 {
		t.Fatalf("gc: fenced %d at v%d, want the unknown append's transaction", tr.FencedTxns, tr.Fence)
	}
	for _, h := range []*engine.Table{tbl, checkSound(t, fs, db, "t")} {
		_, err := h.Retry(ctx, ue.Txn)
		if engine.OutcomeOf(err) != engine.Rejected || !errors.Is(err, manifest.ErrTxnAborted) {
			t.Fatalf("retry after gc collected the files: %v; want rejected with ErrTxnAborted", err)
		}
	}
	if after := enginetest.Rows(t, checkSound(t, fs, db, "t")); !slices.Equal(after, before) {
		t.Fatalf("rows %d, want %d", len(after), len(before))
	}
}
