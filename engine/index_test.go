package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index"
)

var ixSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "u", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
	{Name: "small", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
}, nil)

// ixRawBytes are the bytes of ixSchema's binary column: NUL, 'A', and bytes that are not
// UTF-8 (0x80, 0xff), so values order bytewise unlike any text collation.
var ixRawBytes = []byte{0x00, 'A', 0x80, 0xff}

// ixRaw returns 0 to 2 bytes of ixRawBytes: empty values, duplicates.
func ixRaw(rng *rand.Rand) []byte {
	b := make([]byte, rng.IntN(3))
	for i := range b {
		b[i] = ixRawBytes[rng.IntN(len(ixRawBytes))]
	}
	return b
}

// ixRawLit is a literal for ixSchema's binary column: X'…', 0x…, b'…' or, when the
// bytes are printable text, a string.
func ixRawLit(rng *rand.Rand) string {
	b := ixRaw(rng)
	printable := !slices.ContainsFunc(b, func(c byte) bool { return c < ' ' || c >= 0x7f })
	switch k := rng.IntN(4); {
	case k == 0 && printable:
		return "'" + string(b) + "'"
	case k == 1 && len(b) > 0:
		return fmt.Sprintf("0x%x", b)
	case k == 2:
		var sb strings.Builder
		for _, c := range b {
			fmt.Fprintf(&sb, "%08b", c)
		}
		return "b'" + sb.String() + "'"
	}
	return fmt.Sprintf("X'%X'", b)
}

// ixBatch builds rows [from, to) of ixSchema: values with duplicates and nulls, roughly
// sorted by day (as real data often is).
func ixBatch(rng *rand.Rand, from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, ixSchema)
	defer b.Release()
	null := func() bool { return rng.IntN(12) == 0 }
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		if null() {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%02d", rng.IntN(40)))
		}
		if null() {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(float64(rng.IntN(1000)) / 10)
		}
		if null() {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Date32Builder).Append(arrow.Date32(11000 + int(i/50) + rng.IntN(3)))
		}
		if null() {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(i)*1_000_000 + int64(rng.IntN(1000))))
		}
		if null() {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.BooleanBuilder).Append(rng.IntN(4) == 0)
		}
		if null() {
			b.Field(6).AppendNull()
		} else {
			b.Field(6).(*array.Uint32Builder).Append(uint32(rng.IntN(100)))
		}
		if null() {
			b.Field(7).AppendNull()
		} else {
			b.Field(7).(*array.Int16Builder).Append(int16(rng.IntN(7)))
		}
		if null() {
			b.Field(8).AppendNull()
		} else {
			b.Field(8).(*array.BinaryBuilder).Append(ixRaw(rng))
		}
	}
	return b.NewRecordBatch()
}

func ixPredicate(rng *rand.Rand) string {
	atoms := []func() string{
		func() string {
			return fmt.Sprintf("id %s %d", pick(rng, "=", "<", ">", "<=", ">=", "!="), rng.IntN(1200))
		},
		func() string { return fmt.Sprintf("name %s 'n%02d'", pick(rng, "=", "<", ">=", "!="), rng.IntN(40)) },
		func() string {
			return fmt.Sprintf("score %s %g", pick(rng, "<", ">", "=", ">="), float64(rng.IntN(1000))/10)
		},
		func() string {
			d := arrow.Date32(11000 + rng.IntN(25)).ToTime().Format("2006-01-02")
			return fmt.Sprintf("day %s DATE '%s'", pick(rng, "=", "<", ">="), d)
		},
		func() string {
			return fmt.Sprintf("day BETWEEN DATE '%s' AND DATE '%s'", arrow.Date32(11000+rng.IntN(10)).ToTime().Format("2006-01-02"), arrow.Date32(11010+rng.IntN(10)).ToTime().Format("2006-01-02"))
		},
		func() string {
			return pick(rng, "flag", "NOT flag", "flag IS NULL", "name IS NULL", "score IS NOT NULL")
		},
		func() string { return fmt.Sprintf("u IN (%d, %d, %d)", rng.IntN(100), rng.IntN(100), rng.IntN(100)) },
		func() string { return fmt.Sprintf("small %s %d", pick(rng, "=", "<", ">"), rng.IntN(7)) },
		func() string {
			return fmt.Sprintf("at %s TIMESTAMP '%s'", pick(rng, "<", ">="), time.Unix(int64(rng.IntN(1200)), 0).UTC().Format("2006-01-02 15:04:05"))
		},
		func() string {
			return fmt.Sprintf("raw %s %s", pick(rng, "=", "<", "<=", ">", ">=", "!="), ixRawLit(rng))
		},
		func() string {
			return fmt.Sprintf("raw %sIN (%s, %s)", pick(rng, "", "NOT "), ixRawLit(rng), ixRawLit(rng))
		},
		func() string { return fmt.Sprintf("raw BETWEEN %s AND %s", ixRawLit(rng), ixRawLit(rng)) },
		func() string { return pick(rng, "raw IS NULL", "raw IS NOT NULL", "raw = ''", "raw = X'FF'") },
	}
	p := atoms[rng.IntN(len(atoms))]()
	switch rng.IntN(5) {
	case 0:
		p = "(" + p + ") AND (" + atoms[rng.IntN(len(atoms))]() + ")"
	case 1:
		p = "(" + p + ") OR (" + atoms[rng.IntN(len(atoms))]() + ")"
	case 2:
		p = "NOT (" + p + ")"
	}
	return p
}

func pick(rng *rand.Rand, xs ...string) string { return xs[rng.IntN(len(xs))] }

func testSeed(t *testing.T) uint64 {
	s := uint64(rand.Int64())
	if v := os.Getenv("SHALE_SEED"); v != "" {
		s, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", s, s)
	return s
}

// sameAnswers checks that random predicates select the same rows with and without the
// indexes at tbl's version (invariant 11). It counts the index uses of the forced plans,
// in total and by index name in byName.
func sameAnswers(t *testing.T, tbl *Table, rng *rand.Rand, n int, seed uint64, byName map[string]int) (used int) {
	t.Helper()
	ctx := context.Background()
	for q := 0; q < n; q++ {
		where := ixPredicate(rng)
		got := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: where, forceIndexes: rng.IntN(2) == 0})
		want := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: where, NoIndex: true, NoStatistics: rng.IntN(2) == 0})
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d, v%d, WHERE %s: %d rows with indexes, %d without", seed, tbl.Version(), where, len(got), len(want))
		}
		plan, err := tbl.Explain(ctx, ScanOptions{Filter: where, forceIndexes: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range plan.Indexes {
			if u.Used {
				used++
				byName[u.Name]++
			}
		}
		n, err := tbl.Count(ctx, where)
		if err != nil || n != int64(len(want)) {
			t.Fatalf("seed %d, WHERE %s: count %d (%v), want %d", seed, where, n, err, len(want))
		}
	}
	return used
}

func scanIDs(t *testing.T, tbl *Table, opts ScanOptions) []int64 {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []int64
	for sc.Next() {
		out = append(out, sc.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestIndexesNeverChangeAnswers (issue 10): random tables of every supported type with
// nulls and duplicates, a BTree on each column and a zone map over several; random
// predicates give the same rows with and without the indexes after appends (uncovered
// fragments), deletes, updates, index updates (delta segments, then a merge), a replaced
// index and a dropped one, at every version. Seeded; the seed is printed.
func TestIndexesNeverChangeAnswers(t *testing.T) {
	ctx := context.Background()
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 10))
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 100 // several batches per fragment
	tbl, err := db.CreateTable(ctx, "ix", ixSchema)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	appendRows := func(n int64) {
		rec := ixBatch(rng, next, next+n)
		defer rec.Release()
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		next += n
	}
	for i := 0; i < 4; i++ {
		appendRows(150 + int64(rng.IntN(200)))
	}
	for _, c := range []string{"id", "name", "score", "day", "at", "flag", "u", "small", "raw"} {
		if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{c}}); err != nil {
			t.Fatalf("btree on %s: %v", c, err)
		}
	}
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Kind: index.KindZoneMap, Columns: []string{"score", "day", "at", "raw"}}); err != nil {
		t.Fatal(err)
	}
	var versions []uint64
	byName := map[string]int{}
	used := sameAnswers(t, tbl, rng, 80, seed, byName)
	versions = append(versions, tbl.Version())
	steps := []func(){
		func() { appendRows(100 + int64(rng.IntN(100))) },
		func() {
			if _, err := tbl.Delete(ctx, ixPredicate(rng)); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if _, err := tbl.Update(ctx, map[string]string{"score": "score + 1", "name": "'upd'", "raw": ixRawLit(rng)}, fmt.Sprintf("id %% 7 = %d", rng.IntN(7))); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if _, err := tbl.UpdateIndex(ctx, "day_idx"); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if _, err := tbl.UpdateIndex(ctx, "name_idx"); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if _, err := tbl.UpdateIndex(ctx, "raw_idx"); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"score"}, Replace: true}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for i := 0; i < 12; i++ {
		steps[rng.IntN(len(steps))]()
		used += sameAnswers(t, tbl, rng, 30, seed, byName)
		versions = append(versions, tbl.Version())
	}
	if _, err := tbl.DropIndex(ctx, "u_idx"); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(tbl.Indexes(), func(i IndexInfo) bool { return i.Name == "u_idx" }) {
		t.Fatal("dropped index still listed")
	}
	// Every version read again, by time travel.
	for _, v := range versions {
		old, err := tbl.Checkout(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		used += sameAnswers(t, old, rng, 10, seed, byName)
	}
	if used == 0 {
		t.Fatal("no query used an index")
	}
	if byName["raw_idx"] == 0 {
		t.Fatalf("seed %d: no query used the binary column's BTree (uses by index: %v)", seed, byName)
	}
	t.Logf("%d index uses over the queries: %v", used, byName)
}

// TestIndexBadInput: an unknown column, an unsupported type, a duplicate name, two
// columns for a BTree, a column twice, an unknown kind, no column, a bad name: typed
// errors (errors.Is), nothing committed.
func TestIndexBadInput(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true}}, nil)
	tbl, err := db.CreateTable(ctx, "bad", schema)
	if err != nil {
		t.Fatal(err)
	}
	v := tbl.Version()
	for _, tc := range []struct {
		spec IndexSpec
		want error
	}{
		{IndexSpec{Columns: []string{"nope"}}, filter.ErrUnknownColumn},
		{IndexSpec{Columns: []string{"l"}}, index.ErrUnsupportedType},
		{IndexSpec{Columns: []string{"a", "a"}, Kind: index.KindZoneMap}, ErrInvalidIndexSpec},
		{IndexSpec{Columns: []string{"a", "l"}}, ErrInvalidIndexSpec},
		{IndexSpec{Columns: []string{"a"}, Kind: "hash"}, ErrInvalidIndexSpec},
		{IndexSpec{}, ErrInvalidIndexSpec},
		{IndexSpec{Columns: []string{"a"}, Name: "a/b"}, ErrInvalidIndexSpec},
	} {
		_, err := tbl.CreateIndex(ctx, tc.spec)
		if !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.spec, err, tc.want)
		}
	}
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"a"}, Name: "a/b"}); err == nil || !strings.Contains(err.Error(), `index name "a/b": contains '/'`) {
		t.Errorf("a bad name's error does not say why: %v", err)
	}
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"a"}}); !errors.Is(err, ErrIndexExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	if h, _ := db.OpenTable(ctx, "bad"); h.Version() != v+1 {
		t.Fatalf("version %d, want %d (one index committed)", h.Version(), v+1)
	}
	if _, err := tbl.DropIndex(ctx, "nope"); !errors.Is(err, ErrIndexNotFound) {
		t.Fatalf("drop of an unknown index: %v", err)
	}
}

// TestScanNoStatistics: ScanOptions.NoStatistics reads every batch of every live fragment
// (no pruning by statistics) and returns what a pruned scan returns.
func TestScanNoStatistics(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 100
	tbl, err := db.CreateTable(ctx, "nostats", ixSchema)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := int64(0); i < 2; i++ {
		rec := ixBatch(rng, i*500, (i+1)*500)
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	const where = "id < 150" // ids ascend: statistics keep 2 of 10 batches
	pruned, err := tbl.Explain(ctx, ScanOptions{Filter: where, NoIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	full, err := tbl.Explain(ctx, ScanOptions{Filter: where, NoIndex: true, NoStatistics: true})
	if err != nil {
		t.Fatal(err)
	}
	if pruned.BatchesRead != 2 || pruned.FragmentsPruned != 1 {
		t.Fatalf("with statistics: %+v, want 2 batches read and 1 fragment pruned", pruned)
	}
	if full.BatchesRead != 10 || full.BatchesPruned != 0 || full.FragmentsPruned != 0 {
		t.Fatalf("NoStatistics: %+v, want all 10 batches read and nothing pruned", full)
	}
	got := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: where, NoIndex: true, NoStatistics: true})
	want := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: where, NoIndex: true})
	if len(want) != 150 || !slices.Equal(got, want) {
		t.Fatalf("NoStatistics returned %d rows, pruned scan %d (want 150)", len(got), len(want))
	}
}

// TestExplainSaysWhyAnotherBTreeWasNotUsed: when two BTrees can answer a filter, the plan
// uses the one with fewer candidates and says so of the other (its reason was empty).
func TestExplainSaysWhyAnotherBTreeWasNotUsed(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 100
	tbl, err := db.CreateTable(ctx, "twotrees", ixSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := ixBatch(rand.New(rand.NewPCG(3, 4)), 0, 2000)
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"id", "name"} {
		if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{c}}); err != nil {
			t.Fatal(err)
		}
	}
	if tbl, err = db.OpenTable(ctx, "twotrees"); err != nil {
		t.Fatal(err)
	}
	plan, err := tbl.Explain(ctx, ScanOptions{Filter: "id < 10 AND name >= 'n00'", ForceIndexes: true})
	if err != nil {
		t.Fatal(err)
	}
	var used, other *IndexUse
	for i := range plan.Indexes {
		switch u := &plan.Indexes[i]; {
		case u.Used:
			used = u
		default:
			other = u
		}
	}
	if used == nil || used.Name != "id_idx" || other == nil || other.Name != "name_idx" {
		t.Fatalf("plan %+v: want id_idx used and name_idx not", plan.Indexes)
	}
	if !strings.Contains(other.Reason, `"id_idx" has fewer candidate rows`) {
		t.Fatalf("name_idx's reason %q does not name the index used", other.Reason)
	}
}
