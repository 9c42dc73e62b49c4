package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// binKey is the raw value of row i of writeBinaryFixture: four big-endian bytes of a
// permutation of the ids (so every record batch spans nearly every value and statistics
// cannot prune), mostly not UTF-8.
func binKey(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i*7919%spreadRows)) }

// writeBinaryFixture writes an Arrow IPC file of spreadRows rows: id (int64) and raw
// (binary): binKey(id), NULL where id is a multiple of 1,000 and empty for id 5.
func writeBinaryFixture(t *testing.T, path string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range spreadRows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		rb := b.Field(1).(*array.BinaryBuilder)
		switch {
		case i%1000 == 0:
			rb.AppendNull()
		case i == 5:
			rb.Append([]byte{})
		default:
			rb.Append(binKey(i))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestQueryBinaryBTree: a BTree on a binary column serves a point lookup written with a
// hex literal; --explain shows the index used and batches skipped, and the rows of
// every binary condition (=, IN, BETWEEN, IS NULL, the empty value) are the same with
// the index, with --no-index, and counted. LIKE on the column is a clear error.
func TestQueryBinaryBTree(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("binwhere")
	path := filepath.Join(e.dir, "binary.arrow")
	writeBinaryFixture(t, path)
	e.ok("import", path, "--table", tbl)
	e.ok("index", "create", tbl, "--column", "raw")

	point := fmt.Sprintf("raw = X'%X'", binKey(777))
	out := e.ok("query", tbl, "--where", point, "--explain")
	for _, w := range []string{"raw_idx (btree): used for 1 fragment", "1 candidate row", "by indexes", "1 row returned"} {
		if !strings.Contains(out, w) {
			t.Fatalf("explain of %s lacks %q:\n%s", point, w, out)
		}
	}
	ix := e.explainOf(tbl, "--where", point)
	if ix.Rows != 1 || len(ix.Plan.Indexes) != 1 || !ix.Plan.Indexes[0].Used || ix.Plan.BatchesPrunedByIndex == 0 || ix.Plan.Indexes[0].PagesSkipped == 0 {
		t.Fatalf("explain of %s: %+v", point, ix.Plan)
	}
	if noix := e.explainOf(tbl, "--where", point, "--no-index"); noix.Rows != 1 || noix.Plan.BatchesPrunedByIndex != 0 {
		t.Fatalf("explain --no-index of %s: %+v", point, noix.Plan)
	}
	inRange := 0 // rows whose key is 0 … 16
	for i := range spreadRows {
		if k := i * 7919 % spreadRows; k <= 16 && i%1000 != 0 && i != 5 {
			inRange++
		}
	}
	for _, c := range []struct {
		where string
		rows  int
	}{
		{point, 1},
		{fmt.Sprintf("raw IN (0x%x, X'%X', 'zz')", binKey(1), binKey(2)), 2},
		{"raw BETWEEN X'00000000' AND 0x00000010", inRange},
		{"raw IS NULL", spreadRows / 1000},
		{"raw = ''", 1},
		{"raw < X'00'", 1}, // only the empty value orders before every non-empty one
	} {
		with := e.ok("query", tbl, "--where", c.where, "--format", "csv")
		without := e.ok("query", tbl, "--where", c.where, "--format", "csv", "--no-index")
		if with != without {
			t.Fatalf("WHERE %s: with the index %q, without %q", c.where, with, without)
		}
		a, b := e.ok("query", tbl, "--where", c.where, "--count"), e.ok("query", tbl, "--where", c.where, "--count", "--no-index")
		if strings.Fields(a)[0] != strings.Fields(b)[0] || strings.Count(with, "\n") != c.rows+1 {
			t.Fatalf("WHERE %s: count %q with the index, %q without; %d csv lines, want %d rows:\n%s", c.where, a, b, strings.Count(with, "\n"), c.rows, with)
		}
	}
	r := e.run("query", tbl, "--where", "raw LIKE 'a%'")
	if r.code == 0 || !strings.Contains(r.stderr, "LIKE needs a string column") || !strings.Contains(r.stderr, "raw") {
		t.Fatalf("LIKE on a binary column: %v", r)
	}
}
