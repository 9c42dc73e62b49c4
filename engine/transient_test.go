package engine

import (
	"context"
	"testing"
)

// TestFilteredScanResultsOutliveLaterScans: a filtered scan decodes batches into pooled
// memory (fragment.Batch.DecodeTransient) that later scans reuse once released; the rows
// it returns are copies, so records kept (retained) from one filtered scan must still hold
// their values after other filtered scans and counts have decoded many batches, including
// when the filter selects every row of a batch. Compared with an unfiltered scan (not
// transient).
func TestFilteredScanResultsOutliveLaterScans(t *testing.T) {
	ctx := context.Background()
	r := lateSeed(t)
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 8000 // bodies well above the pool's minimum
	tbl, err := db.CreateTable(ctx, "keep", lateSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := lateRecord(r, lateSchema, 0, 40000)
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	tbl = mustOpen(t, db, "keep")

	all := scanRecord(t, tbl, ScanOptions{})
	defer all.Release()
	kept := scanRecord(t, tbl, ScanOptions{Filter: "id >= 0"}) // every row of every batch
	defer kept.Release()
	some := scanRecord(t, tbl, ScanOptions{Filter: "k < 5000", Columns: []string{"id", "ls", "name"}})
	defer some.Release()
	for _, f := range []string{"ls = 'large-7'", "id >= 0", "name IS NULL OR f > 1", "k >= 0"} {
		for range 2 {
			if rec := scanRecord(t, tbl, ScanOptions{Filter: f}); rec != nil {
				rec.Release()
			}
			if _, err := tbl.Count(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	sameRecords(t, "id >= 0 kept across later scans", all, kept)
	again := scanRecord(t, tbl, ScanOptions{Filter: "k < 5000", Columns: []string{"id", "ls", "name"}})
	defer again.Release()
	sameRecords(t, "k < 5000 kept across later scans", again, some)
	if n, err := tbl.Count(ctx, "k < 5000"); err != nil || n != some.NumRows() {
		t.Fatalf("Count(k < 5000) = %d, %v; the scan returned %d rows", n, err, some.NumRows())
	}
}
