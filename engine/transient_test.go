package engine

import (
	"context"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// TestFullScanBatchesRetainedOutliveLaterScans: an unfiltered scan hands the caller
// batches decoded into pooled memory, which returns to the pool when the last reference
// is released. Batches retained past the scanner's Release must keep their values while
// later scans of another table (the same shape, other values: the same body sizes, so
// the same pool classes) decode into released memory; and released memory must really be
// reused (else the first check proves nothing).
func TestFullScanBatchesRetainedOutliveLaterScans(t *testing.T) {
	ctx := context.Background()
	seed := lateSeed(t).Uint64()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 8000 // bodies well above the pool's minimum
	tables := map[string]*Table{}
	for name, from := range map[string]int64{"kept": 0, "other": 1_000_000} {
		tbl, err := db.CreateTable(ctx, name, lateSchema)
		if err != nil {
			t.Fatal(err)
		}
		rec := lateRecord(rand.New(rand.NewPCG(seed, 7)), lateSchema, from, from+40000)
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		tables[name] = mustOpen(t, db, name)
	}
	kept, other := tables["kept"], tables["other"]
	want := scanRecord(t, kept, ScanOptions{}) // a copy
	defer want.Release()

	// firstValue is the address of a batch's first id value (its place in its body).
	firstValue := func(rec arrow.RecordBatch) uintptr {
		return uintptr(unsafe.Pointer(&rec.Column(0).(*array.Int64).Int64Values()[0]))
	}
	// scanAll runs a full scan of tbl, calling f with each batch before releasing it.
	scanAll := func(tbl *Table, f func(arrow.RecordBatch)) {
		t.Helper()
		sc, err := tbl.Scan(ctx, ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Release()
		for sc.Next() {
			f(sc.RecordBatch())
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}

	var held []arrow.RecordBatch
	scanAll(kept, func(rec arrow.RecordBatch) { rec.Retain(); held = append(held, rec) })
	defer func() {
		for _, rec := range held {
			rec.Release()
		}
	}()
	for range 5 {
		scanAll(other, func(arrow.RecordBatch) {})
		if _, err := other.Count(ctx, "id >= 0"); err != nil {
			t.Fatal(err)
		}
	}
	got := concatRecords(t, held)
	defer got.Release()
	sameRecords(t, "full-scan batches retained across later scans", want, got)

	// Released bodies are reused: a later scan's batch lands where an earlier, released
	// one was (sync.Pool may drop entries, so try a bounded number of times).
	reused := false
	for try := 0; try < 50 && !reused; try++ {
		released := map[uintptr]bool{}
		scanAll(kept, func(rec arrow.RecordBatch) { released[firstValue(rec)] = true })
		scanAll(other, func(rec arrow.RecordBatch) { reused = reused || released[firstValue(rec)] })
	}
	if !reused {
		t.Fatal("no batch of 50 scans reused the memory of a released one")
	}
}

// concatRecords is recs as one record (copied).
func concatRecords(t *testing.T, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, recs[0].NumCols())
	var rows int64
	for c := range cols {
		parts := make([]arrow.Array, len(recs))
		for i, r := range recs {
			parts[i] = r.Column(c)
		}
		arr, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer arr.Release()
		cols[c] = arr
	}
	for _, r := range recs {
		rows += r.NumRows()
	}
	return array.NewRecordBatch(recs[0].Schema(), cols, rows)
}
