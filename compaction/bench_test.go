package compaction

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// BenchmarkCompaction compares compaction (plan, rewrite with deletion vectors applied,
// commit, publish) with a plain full scan of the same table version written back through
// one fragment.Writer: 600,000 real flight records in 60 appended fragments of 10,000
// rows on a memory store, output fragments of up to 131,072 rows. Each iteration
// compacts a freshly appended table (the appends are not timed). rows/s counts the rows
// read and written.
//
//	go test -bench Compaction -run '^$' -benchtime 5x ./compaction/
func BenchmarkCompaction(b *testing.B) {
	const target = 131_072
	ctx := context.Background()
	schema, batches := flightBatches(b, 60, 10_000)
	db := openDB(b, storetest.Mem(b))
	seq := 0
	fresh := func() string {
		b.Helper()
		seq++
		name := fmt.Sprintf("bench_%d", seq)
		appendEach(b, db, name, schema, batches)
		return name
	}
	b.Run("compact", func(b *testing.B) {
		var rows int64
		var elapsed time.Duration
		for b.Loop() {
			b.StopTimer()
			name := fresh()
			b.StartTimer()
			start := time.Now()
			st, err := Compact(ctx, db, name, Options{TargetRows: target})
			if err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(start)
			rows += st.RowsRewritten
			if st.FragmentsAfter != 5 {
				b.Fatalf("%d fragments after compaction", st.FragmentsAfter)
			}
		}
		b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	})
	b.Run("scan+write", func(b *testing.B) {
		name := fresh()
		tbl, err := db.OpenTable(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		var rows int64
		var elapsed time.Duration
		for b.Loop() {
			start := time.Now()
			rows += scanWrite(b, db, tbl, target)
			elapsed += time.Since(start)
		}
		b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	})
}

// scanWrite reads every row of tbl with the engine's scan and writes them to new data files
// of up to target rows, returning the rows written.
func scanWrite(b *testing.B, db *engine.DB, tbl *engine.Table, target int) int64 {
	ctx := context.Background()
	sc, err := tbl.Scan(ctx, engine.ScanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Release()
	w, err := fragment.NewWriter(ctx, db.Store(), manifest.DataDir(tbl.Name()), tbl.Schema(), tbl.Manifest().Schema.FieldIDs,
		fragment.WriterOptions{MaxRowsPerFile: target})
	if err != nil {
		b.Fatal(err)
	}
	var rows int64
	for sc.Next() {
		rec := sc.RecordBatch()
		rows += rec.NumRows()
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return rows
}
