package compaction

import (
	"context"
	"fmt"
	"strings"

	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/flightstest"
	"github.com/shale-db/shale/store"
)

// TestMain runs the tests with one real embedded etcd (engine/enginetest).
func TestMain(m *testing.M) { enginetest.Main(m) }

// openDB opens a DB on s with the shared etcd as its catalog.
func openDB(t testing.TB, s store.Store) *engine.DB {
	return enginetest.OpenDB(t, s, engine.Options{})
}

// flightBatches returns the first n record batches of rows rows each from the bundled
// flights data (internal/flightstest).
func flightBatches(t testing.TB, n, rows int) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	schema, batches := flightstest.Batches(t, n*rows, rows)
	if len(batches) != n {
		t.Fatalf("flights data: %d batches of at most %d rows, want %d", len(batches), rows, n)
	}
	return schema, batches
}

// appendEach creates table name and appends every batch as its own version (one small
// fragment each).
func appendEach(t testing.TB, db *engine.DB, name string, schema *arrow.Schema, batches []arrow.RecordBatch) *engine.Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.CreateTable(ctx, name, schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if _, err := tbl.AppendRecord(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

// rowsOf scans every column of tbl in table order and renders each row as one string.
func rowsOf(t testing.TB, tbl *engine.Table) []string {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), engine.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	var sb strings.Builder
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			sb.Reset()
			for c := 0; c < int(rec.NumCols()); c++ {
				if c > 0 {
					sb.WriteByte('|')
				}
				sb.WriteString(rec.Column(c).ValueStr(i))
			}
			out = append(out, sb.String())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func equalRows(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d = %q, want %q", what, i, got[i], want[i])
		}
	}
}

// intBatches makes n batches of rows rows of (id int64, s string) with ids counting up
// from 0.
func intBatches(n, rows int) (*arrow.Schema, []arrow.RecordBatch) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	var out []arrow.RecordBatch
	id := int64(0)
	for range n {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for range rows {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row-%d", id))
			id++
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return schema, out
}
