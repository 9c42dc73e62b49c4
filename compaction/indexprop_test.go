package compaction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/verify"
)

// propSchema has a column of every type a BTree supports: int (signed, unsigned, small),
// float, string, binary, bool, date and timestamp.
var propSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "u", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
	{Name: "small", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
}, nil)

// propBatch builds rows [from, to) of propSchema with duplicates and nulls, roughly
// sorted by day.
func propBatch(rng *rand.Rand, from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, propSchema)
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
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(i*1_000_000 + int64(rng.IntN(1000))))
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
			b.Field(8).(*array.BinaryBuilder).Append([]byte(fmt.Sprintf("b%02d", rng.IntN(30))))
		}
	}
	return b.NewRecordBatch()
}

func propPick(rng *rand.Rand, xs ...string) string { return xs[rng.IntN(len(xs))] }

// propPredicate is a random predicate over propSchema: comparisons, BETWEEN, IN, IS
// [NOT] NULL and their AND/OR/NOT combinations. None names the binary column: the WHERE
// dialect refuses binary columns (a type mismatch), so its BTree is built, kept through
// compaction and verified, but never asked.
func propPredicate(rng *rand.Rand) string {
	atoms := []func() string{
		func() string {
			return fmt.Sprintf("id %s %d", propPick(rng, "=", "<", ">", "<=", ">=", "!="), rng.IntN(1500))
		},
		func() string {
			return fmt.Sprintf("name %s 'n%02d'", propPick(rng, "=", "<", ">=", "!="), rng.IntN(40))
		},
		func() string {
			return fmt.Sprintf("score %s %g", propPick(rng, "<", ">", "=", ">="), float64(rng.IntN(1000))/10)
		},
		func() string {
			d := arrow.Date32(11000 + rng.IntN(30)).ToTime().Format("2006-01-02")
			return fmt.Sprintf("day %s DATE '%s'", propPick(rng, "=", "<", ">="), d)
		},
		func() string {
			return fmt.Sprintf("day BETWEEN DATE '%s' AND DATE '%s'", arrow.Date32(11000+rng.IntN(10)).ToTime().Format("2006-01-02"),
				arrow.Date32(11010+rng.IntN(10)).ToTime().Format("2006-01-02"))
		},
		func() string {
			return propPick(rng, "flag", "NOT flag", "flag IS NULL", "name IS NULL", "score IS NOT NULL")
		},
		func() string { return fmt.Sprintf("u IN (%d, %d, %d)", rng.IntN(100), rng.IntN(100), rng.IntN(100)) },
		func() string { return fmt.Sprintf("small %s %d", propPick(rng, "=", "<", ">"), rng.IntN(7)) },
		func() string {
			return fmt.Sprintf("at %s TIMESTAMP '%s'", propPick(rng, "<", ">="), time.Unix(int64(rng.IntN(1500)), 0).UTC().Format("2006-01-02 15:04:05"))
		},
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

// propIDs returns the sorted ids tbl's scan with opts returns.
func propIDs(t *testing.T, tbl *engine.Table, opts engine.ScanOptions) []int64 {
	t.Helper()
	opts.Columns = []string{"id"}
	sc, err := tbl.Scan(context.Background(), opts)
	if err != nil {
		t.Fatalf("v%d, WHERE %s: %v", tbl.Version(), opts.Filter, err)
	}
	defer sc.Release()
	var out []int64
	for sc.Next() {
		out = append(out, sc.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("v%d, WHERE %s: %v", tbl.Version(), opts.Filter, err)
	}
	slices.Sort(out)
	return out
}

// propSame checks n random predicates at tbl's version: the rows with every usable
// index forced, with the planner's choice, and without indexes (with and without
// statistics) are the same. It returns how many plans used an index.
func propSame(t *testing.T, tbl *engine.Table, rng *rand.Rand, n int, seed uint64) (used int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		where := propPredicate(rng)
		want := propIDs(t, tbl, engine.ScanOptions{Filter: where, NoIndex: true, NoStatistics: rng.IntN(2) == 0})
		for _, opts := range []engine.ScanOptions{{Filter: where, ForceIndexes: true}, {Filter: where}} {
			if got := propIDs(t, tbl, opts); !slices.Equal(got, want) {
				t.Fatalf("seed %d, v%d, WHERE %s (forced %v): %d rows with indexes, %d without", seed, tbl.Version(), where,
					opts.ForceIndexes, len(got), len(want))
			}
		}
		plan, err := tbl.Explain(ctx, engine.ScanOptions{Filter: where, ForceIndexes: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range plan.Indexes {
			if u.Used {
				used++
			}
		}
	}
	return used
}

// TestIndexesNeverChangeAnswersAcrossCompaction (issue 10, acceptance: the seeded
// property test with compaction among the steps; engine's TestIndexesNeverChangeAnswers
// cannot compact, this package can): a table with a column of every type a BTree
// supports, nulls and duplicates, a BTree on each and a zone map over several; random
// appends, deletes, updates, compactions, index updates and a replaced index, and after
// each step random predicates answer the same with the indexes forced, as planned, and
// without them; finally every version is read again by time travel, and verify checks
// every version's index objects against its manifest. Seeded (SHALE_SEED replays).
func TestIndexesNeverChangeAnswersAcrossCompaction(t *testing.T) {
	ctx := context.Background()
	seed := uint64(rand.Int64())
	if v := os.Getenv("SHALE_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	db := enginetest.OpenDB(t, storetest.Mem(t), engine.Options{Write: fragment.WriterOptions{MaxRowsPerBatch: 100}})
	tbl, err := db.CreateTable(ctx, "prop", propSchema)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	appendRows := func(n int64) {
		rec := propBatch(rng, next, next+n)
		defer rec.Release()
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		next += n
	}
	for range 4 {
		appendRows(150 + int64(rng.IntN(200)))
	}
	for _, c := range []string{"id", "name", "score", "day", "at", "flag", "u", "small", "bin"} {
		if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{c}}); err != nil {
			t.Fatalf("btree on %s: %v", c, err)
		}
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Name: "zm", Kind: index.KindZoneMap, Columns: []string{"score", "day", "at", "id"}}); err != nil {
		t.Fatal(err)
	}
	versions := []uint64{tbl.Version()}
	used := propSame(t, tbl, rng, 40, seed)
	ex := New(db)
	ex.Write.MaxRowsPerBatch = 100
	compactions := 0
	steps := []func(){
		func() { appendRows(100 + int64(rng.IntN(150))) },
		func() {
			if _, err := tbl.Delete(ctx, propPredicate(rng)); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if _, err := tbl.Update(ctx, map[string]string{"score": "score + 1", "name": "'upd'"}, fmt.Sprintf("id %% 7 = %d", rng.IntN(7))); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			st, err := ex.Run(ctx, "prop", Options{TargetRows: int64(400 + rng.IntN(800)), DeletedRatio: 0.05})
			if err != nil {
				t.Fatal(err)
			}
			if st.Version != 0 {
				compactions++
			}
		},
		func() {
			if _, err := tbl.UpdateIndex(ctx, propPick(rng, "day_idx", "name_idx", "bin_idx", "id_idx", "zm")); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"score"}, Replace: true}); err != nil {
				t.Fatal(err)
			}
		},
	}
	for i := 0; i < 16 || compactions < 2; i++ {
		if i >= 40 {
			t.Fatalf("seed %d: %d compactions in %d steps, want at least 2", seed, compactions, i)
		}
		k := rng.IntN(len(steps))
		if i%4 == 3 {
			k = 3 // a compaction every fourth step at least
		}
		steps[k]()
		if tbl, err = db.OpenTable(ctx, "prop"); err != nil { // the compaction committed through its own handle
			t.Fatal(err)
		}
		used += propSame(t, tbl, rng, 15, seed)
		versions = append(versions, tbl.Version())
	}
	for _, v := range versions {
		old, err := tbl.Checkout(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		used += propSame(t, old, rng, 8, seed)
	}
	if used == 0 {
		t.Fatalf("seed %d: no query used an index", seed)
	}
	rep, err := verify.Table(ctx, db.Store(), db.Catalog(), "prop", verify.Options{AllVersions: true})
	if err != nil || !rep.OK() {
		t.Fatalf("seed %d: verify: %v %v", seed, err, rep.Faults)
	}
	t.Logf("%d compactions, %d versions, %d index uses", compactions, len(versions), used)
}
