package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
)

// TestBinaryBTreeAnswersWhere: a BTree on a binary column serves WHERE conditions on it
// (=, IN, BETWEEN, <, >=, IS NULL, with string, hex and bit literals): the planner uses it
// for the selective ones (Explain says so, pages and batches are skipped), and every
// query returns the rows a Go reference computes bytewise, with the index, forced onto
// the index and without it (invariant 11). The values hold nulls, empty values and
// bytes that are not UTF-8, in random row order so statistics cannot prune.
func TestBinaryBTreeAnswersWhere(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 500
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "raw", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
	}, nil)
	tbl, err := db.CreateTable(ctx, "binidx", schema)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 24000 // six BTree pages
	rng := rand.New(rand.NewPCG(7, 11))
	vals := make([][]byte, rows) // nil: NULL
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range vals {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		v := uint16(rng.IntN(2000)) * 32 // 0x0000 … 0xF9E0: mostly not UTF-8
		switch k := rng.IntN(50); {
		case k < 2:
			b.Field(1).AppendNull()
			continue
		case k == 2:
			vals[i] = []byte{}
		case k == 3:
			vals[i] = []byte{byte(v >> 8)}
		default:
			vals[i] = []byte{byte(v >> 8), byte(v)}
		}
		b.Field(1).(*array.BinaryBuilder).Append(vals[i])
	}
	rec := b.NewRecordBatch()
	b.Release()
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"raw"}}); err != nil {
		t.Fatal(err)
	}
	if tbl, err = db.OpenTable(ctx, "binidx"); err != nil {
		t.Fatal(err)
	}

	// Two neighbouring values (most likely in one page) and 'zz' (0x7A7A, between them).
	probe, other := []byte{0x7a, 0x60}, []byte{0x7a, 0x80}
	if !slices.ContainsFunc(vals, func(v []byte) bool { return bytes.Equal(v, probe) }) {
		t.Fatalf("no row holds %X", probe)
	}
	hi := []byte{probe[0], 0xff}
	cmp := func(v, lit []byte) int { return bytes.Compare(v, lit) }
	cases := []struct {
		where     string
		match     func(v []byte) bool // v non-nil (NULL rows never match unless the case says so)
		nulls     bool                // NULL rows match
		selective bool                // the planner must choose the index
	}{
		{fmt.Sprintf("raw = X'%X'", probe), func(v []byte) bool { return bytes.Equal(v, probe) }, false, true},
		{fmt.Sprintf("0x%x = raw", probe), func(v []byte) bool { return bytes.Equal(v, probe) }, false, true},
		{fmt.Sprintf("raw IN (X'%X', 0x%x, 'zz')", probe, other), func(v []byte) bool {
			return bytes.Equal(v, probe) || bytes.Equal(v, other) || string(v) == "zz"
		}, false, true},
		{fmt.Sprintf("raw BETWEEN X'%X' AND X'%X'", probe, hi), func(v []byte) bool { return cmp(v, probe) >= 0 && cmp(v, hi) <= 0 }, false, true},
		// Statistics already leave only the batches holding candidates: the index is not chosen.
		{"raw > b'1111100111000000'", func(v []byte) bool { return cmp(v, []byte{0xf9, 0xc0}) > 0 }, false, false},
		{"raw > X'00' AND raw < X'0020'", func(v []byte) bool { return cmp(v, []byte{0}) > 0 && cmp(v, []byte{0, 0x20}) < 0 }, false, true},
		{"raw >= X'F9C0'", func(v []byte) bool { return cmp(v, []byte{0xf9, 0xc0}) >= 0 }, false, false},
		{"raw < X'0040'", func(v []byte) bool { return cmp(v, []byte{0x00, 0x40}) < 0 }, false, false},
		{"raw = ''", func(v []byte) bool { return len(v) == 0 }, false, false},
		{"raw > 'A'", func(v []byte) bool { return cmp(v, []byte("A")) > 0 }, false, false},
		{"raw <> X'00'", func(v []byte) bool { return !bytes.Equal(v, []byte{0}) }, false, false},
		{"raw NOT IN (X'', 'A')", func(v []byte) bool { return len(v) != 0 && string(v) != "A" }, false, false},
		{"raw IS NULL", func([]byte) bool { return false }, true, false},
		{"raw IS NOT NULL AND raw <= X'01'", func(v []byte) bool { return cmp(v, []byte{1}) <= 0 }, false, false},
		{fmt.Sprintf("raw IS NULL OR raw = X'%X'", probe), func(v []byte) bool { return bytes.Equal(v, probe) }, true, false},
	}
	for _, c := range cases {
		var want []int64
		for i, v := range vals {
			if (v == nil && c.nulls) || (v != nil && c.match(v)) {
				want = append(want, int64(i))
			}
		}
		got := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: c.where})
		forced := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: c.where, ForceIndexes: true})
		noIndex := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: c.where, NoIndex: true})
		if !slices.Equal(got, want) || !slices.Equal(forced, want) || !slices.Equal(noIndex, want) {
			t.Errorf("WHERE %s: %d rows planned, %d forced onto the index, %d without it; want %d", c.where, len(got), len(forced), len(noIndex), len(want))
		}
		if n, err := tbl.Count(ctx, c.where); err != nil || n != int64(len(want)) {
			t.Errorf("WHERE %s: count %d (%v), want %d", c.where, n, err, len(want))
		}
		plan, err := tbl.Explain(ctx, ScanOptions{Filter: c.where, ForceIndexes: !c.selective})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Indexes) != 1 || !plan.Indexes[0].Used || plan.Indexes[0].Name != "raw_idx" {
			t.Errorf("WHERE %s: plan does not use raw_idx: %+v", c.where, plan.Indexes)
			continue
		}
		if u := plan.Indexes[0]; c.selective && (plan.BatchesPrunedByIndex == 0 || u.PagesSkipped == 0 || u.PagesRead == 0 || u.Candidates < int64(len(want))) {
			t.Errorf("WHERE %s: the index skipped nothing: %+v, %+v", c.where, plan, u)
		}
	}
	// LIKE on a binary column is refused, naming what the column takes.
	if _, err := tbl.Count(ctx, "raw LIKE 'A%'"); !errors.Is(err, filter.ErrType) || !strings.Contains(err.Error(), "LIKE needs a string column") {
		t.Errorf("LIKE on a binary column: %v", err)
	}
}
