package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var lateSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "lst", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
}, nil)

func lateSeed(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SHALE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 7))
}

// lateRecord builds rows [from, to) of schema (lateSchema, possibly with "extra" added):
// k = id*7919 mod 20000, and every nullable column null in about one row of eight.
func lateRecord(r *rand.Rand, schema *arrow.Schema, from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	null := func() bool { return r.IntN(8) == 0 }
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.Int64Builder).Append(i * 7919 % 20000)
		for c := 2; c < schema.NumFields(); c++ {
			fb := b.Field(c)
			if null() {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.StringBuilder:
				fb.Append(fmt.Sprintf("n%d", r.IntN(50)))
			case *array.Float64Builder:
				fb.Append(float64(r.IntN(1000)) / 8)
			case *array.BooleanBuilder:
				fb.Append(r.IntN(2) == 0)
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(i * 1000))
			case *array.LargeStringBuilder:
				fb.Append(fmt.Sprintf("large-%d", r.IntN(1000)))
			case *array.BinaryBuilder:
				fb.Append([]byte{byte(i), byte(r.IntN(256))})
			case *array.ListBuilder:
				fb.Append(true)
				for j := 0; j < r.IntN(4); j++ {
					fb.ValueBuilder().(*array.Int32Builder).Append(int32(r.IntN(100)))
				}
			case *array.StructBuilder:
				fb.Append(true)
				fb.FieldBuilder(0).(*array.Int32Builder).Append(int32(r.IntN(100)))
			case *array.Int64Builder: // "extra"
				fb.Append(i % 13)
			}
		}
	}
	return b.NewRecordBatch()
}

// scanRecord drains a scan into one record (nil when it returned no rows).
func scanRecord(t *testing.T, tbl *Table, opts ScanOptions) arrow.RecordBatch {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var recs []arrow.RecordBatch
	for sc.Next() {
		rec := sc.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if len(recs) == 0 {
		return nil
	}
	// One record of every row (a TableReader would stop at the first chunk boundary).
	cols := make([]arrow.Array, len(recs[0].Columns()))
	var rows int64
	for c := range cols {
		parts := make([]arrow.Array, len(recs))
		for i, r := range recs {
			parts[i] = r.Column(c)
		}
		col, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer col.Release()
		cols[c] = col
	}
	for _, r := range recs {
		rows += r.NumRows()
	}
	return array.NewRecordBatch(sc.Schema(), cols, rows)
}

func sameRecords(t *testing.T, label string, want, got arrow.RecordBatch) {
	t.Helper()
	if (want == nil) != (got == nil) {
		t.Fatalf("%s: one side returned no rows (want %v, got %v)", label, want, got)
	}
	if want == nil {
		return
	}
	if want.NumRows() != got.NumRows() || want.NumCols() != got.NumCols() {
		t.Fatalf("%s: %dx%d rows×columns, want %dx%d", label, got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
	}
	for c := 0; c < int(want.NumCols()); c++ {
		if !array.Equal(want.Column(c), got.Column(c)) {
			t.Fatalf("%s: column %s differs:\nwant %v\ngot  %v", label, want.ColumnName(c), want.Column(c), got.Column(c))
		}
	}
}

// TestLateMaterializationReturnsSameRows: decoding the filter's columns first and the
// others only for batches with a match returns exactly the rows (and values, in order)
// that decoding every column first does: for every column type, with nulls, deleted rows
// (deletion vectors), an index's selection, a column added after some files were written
// (it reads as nulls), rows still in the WAL (in-memory batches), projections that leave
// out the filter's columns, and limits.
func TestLateMaterializationReturnsSameRows(t *testing.T) {
	ctx := context.Background()
	r := lateSeed(t)
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 300
	tbl, err := db.CreateTable(ctx, "late", lateSchema)
	if err != nil {
		t.Fatal(err)
	}
	for part := int64(0); part < 2; part++ {
		rec := lateRecord(r, lateSchema, part*3000, (part+1)*3000)
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if _, err := tbl.Delete(ctx, "id % 5 = 0 OR (id >= 1200 AND id < 1500)"); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"k"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.AddColumns(ctx, arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}); err != nil {
		t.Fatal(err)
	}
	wide := tbl.Schema()
	rec := lateRecord(r, wide, 6000, 7000)
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if _, err := tbl.UpdateConfig(ctx, map[string]string{ConfigWALShards: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	rec = lateRecord(r, wide, 7000, 7400)
	if _, err := w.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	tbl = mustOpen(t, db, "late")

	filters := []string{
		"k = 777",                  // one row: one batch has a match
		"k < 300",                  // a few rows, spread over batches
		"id >= 2950 AND id < 3100", // two batches across a fragment boundary
		"name = 'n7' AND f > 100",  // two filter columns, nulls in both
		"name IS NULL",             // nulls
		"b AND ts > TIMESTAMP '1970-01-01 00:00:01'",
		"extra = 3",                   // a column the first files lack
		"extra IS NULL AND k > 19990", // nulls from the missing column
		"id >= 7100",                  // only WAL and the last fragment
		"ls = 'large-1'",
		"id < 0",  // nothing
		"id >= 0", // everything left
	}
	projections := [][]string{nil, {"id"}, {"st", "lst", "bin"}, {"name", "k"}}
	for _, where := range filters {
		for _, cols := range projections {
			for _, mode := range []string{"planner", "noindex", "force", "limit"} {
				opts := ScanOptions{Filter: where, Columns: cols}
				switch mode {
				case "noindex":
					opts.NoIndex = true
				case "force":
					opts.ForceIndexes = true
				case "limit":
					opts.Limit = 7
				}
				label := fmt.Sprintf("WHERE %s, columns %v, %s", where, cols, mode)
				eager := opts
				eager.noLate = true
				want := scanRecord(t, tbl, eager)
				got := scanRecord(t, tbl, opts)
				sameRecords(t, label, want, got)
				for _, x := range []arrow.RecordBatch{want, got} {
					if x != nil {
						x.Release()
					}
				}
			}
		}
	}
}

// TestLateMaterializationSkipsBatchesWithoutMatches: a batch whose filter column selects
// no row comes back empty from readBatch (its other columns are never decoded); without
// late materialization it comes back whole with a mask of no row.
func TestLateMaterializationSkipsBatchesWithoutMatches(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 500
	tbl, err := db.CreateTable(ctx, "skip", lateSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := lateRecord(rand.New(rand.NewPCG(1, 2)), lateSchema, 0, 5000)
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	for _, late := range []bool{true, false} {
		p, err := tbl.plan(ctx, ScanOptions{Filter: "id = 1234", NoStatistics: true, NoIndex: true, noLate: !late})
		if err != nil {
			t.Fatal(err)
		}
		st := tbl.newScanState()
		var empty, whole int
		for _, task := range p.tasks {
			rec, mask, err := p.readBatch(ctx, st, task)
			if err != nil {
				t.Fatal(err)
			}
			matched := task.rowStart <= 1234 && 1234 < task.rowStart+task.rows
			switch {
			case rec.NumRows() == 0 && late && !matched:
				empty++
			case rec.NumRows() == task.rows && (!late || matched):
				whole++
				if n := countTrue(mask); n != map[bool]int64{true: 1, false: 0}[matched] {
					t.Fatalf("late %v, batch at %d: mask selects %d rows", late, task.rowStart, n)
				}
			default:
				t.Fatalf("late %v, batch at %d (match %v): %d rows of %d", late, task.rowStart, matched, rec.NumRows(), task.rows)
			}
			rec.Release()
			if mask != nil {
				mask.Release()
			}
		}
		st.close()
		p.close()
		if late && (empty != 9 || whole != 1) || !late && whole != 10 {
			t.Fatalf("late %v: %d empty and %d whole batches of %d", late, empty, whole, len(p.tasks))
		}
	}
}
