package compaction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/verify"
)

var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// kvBatch: ids [from, from+n), k random in [0, 1000) or null, s one of 30 strings.
func kvBatch(rng *rand.Rand, from, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, kvSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		if rng.IntN(20) == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(int64(rng.IntN(1000)))
		}
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("s%02d", rng.IntN(30)))
	}
	return b.NewRecordBatch()
}

func kvPredicate(rng *rand.Rand) string {
	switch rng.IntN(7) {
	case 0:
		return fmt.Sprintf("k = %d", rng.IntN(1000))
	case 1:
		lo := rng.IntN(1000)
		return fmt.Sprintf("k BETWEEN %d AND %d", lo, lo+rng.IntN(20))
	case 2:
		return fmt.Sprintf("id < %d AND k > %d", rng.IntN(40000), rng.IntN(1000))
	case 3:
		return fmt.Sprintf("id BETWEEN %d AND %d", rng.IntN(40000), rng.IntN(40000))
	case 4:
		return fmt.Sprintf("k IN (%d, %d, %d) OR s = 's%02d'", rng.IntN(1000), rng.IntN(1000), rng.IntN(1000), rng.IntN(30))
	case 5:
		return "k IS NULL"
	}
	return fmt.Sprintf("s >= 's%02d' AND id >= %d", rng.IntN(30), rng.IntN(40000))
}

// answer returns the rows of tbl matching where, sorted: with every usable index forced,
// or without indexes.
func answer(t *testing.T, tbl *engine.Table, where string, indexes bool) []string {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), engine.ScanOptions{Filter: where, ForceIndexes: indexes, NoIndex: !indexes})
	if err != nil {
		t.Fatalf("scan %q: %v", where, err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := range int(rec.NumRows()) {
			out = append(out, fmt.Sprintf("%s|%s|%s", rec.Column(0).ValueStr(i), rec.Column(1).ValueStr(i), rec.Column(2).ValueStr(i)))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan %q: %v", where, err)
	}
	slices.Sort(out)
	return out
}

// indexedKV builds table t: 6 fragments of 5,000 rows in batches of 500, a BTree on k,
// a zone map on id and k, and some rows deleted.
func indexedKV(t *testing.T, rng *rand.Rand) (*engine.DB, *engine.Table) {
	t.Helper()
	ctx := context.Background()
	db := kvDB(t)
	tbl, err := db.CreateTable(ctx, "t", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(6) {
		rec := kvBatch(rng, i*5000, 5000)
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"k"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Name: "zm", Columns: []string{"id", "k"}, Kind: index.KindZoneMap}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Delete(ctx, fmt.Sprintf("k < %d OR id %% 97 = 0", 1+rng.IntN(100))); err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

// kvDB opens a DB on a memory store whose data files have batches of 500 rows.
func kvDB(t *testing.T) *engine.DB {
	return enginetest.OpenDB(t, storetest.Mem(t), engine.Options{Write: fragment.WriterOptions{MaxRowsPerBatch: 500}})
}

func testSeed(t *testing.T) uint64 {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return seed
}

// coverage maps each index name to the fragments its segments cover in m.
func coverage(m *manifest.Manifest) map[string][]uint32 {
	out := map[string][]uint32{}
	for _, ix := range m.Indexes {
		out[ix.Name] = append(out[ix.Name], ix.Fragments...)
	}
	for _, c := range out {
		slices.Sort(c)
	}
	return out
}

func newFragments(before, after *manifest.Manifest) []uint32 {
	var out []uint32
	for _, f := range after.Fragments {
		if _, ok := before.Fragment(f.ID); !ok {
			out = append(out, f.ID)
		}
	}
	slices.Sort(out)
	return out
}

// checkAnswers checks, for every predicate, that tbl answers the same with every usable
// index forced and without indexes, and (want non-nil) what want says.
func checkAnswers(t *testing.T, what string, tbl *engine.Table, preds []string, want map[string][]string) {
	t.Helper()
	for _, p := range preds {
		with, without := answer(t, tbl, p, true), answer(t, tbl, p, false)
		if !slices.Equal(with, without) {
			t.Fatalf("%s, %q: %d rows with indexes, %d without", what, p, len(with), len(without))
		}
		if want != nil && !slices.Equal(with, want[p]) {
			t.Fatalf("%s, %q: %d rows, %d before", what, p, len(with), len(want[p]))
		}
	}
}

// TestCompactionKeepsIndexAnswers (issue 10, "after compaction"): compacting a table with
// a BTree and a zone map changes no answer, with or without indexes. The Rewrite commit
// drops the rewritten fragments from both; the zone map covers the new fragments in the
// same version (its zones verified against the data), the BTree does not until
// UpdateIndex covers them.
func TestCompactionKeepsIndexAnswers(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(testSeed(t), 10))
	db, tbl := indexedKV(t, rng)
	var preds []string
	for range 40 {
		preds = append(preds, kvPredicate(rng))
	}
	before := map[string][]string{}
	for _, p := range preds {
		before[p] = answer(t, tbl, p, false)
	}
	checkAnswers(t, "before compaction", tbl, preds, before)
	ex := New(db)
	ex.Write.MaxRowsPerFile = 10_000 // several files, zones cut at file ends
	st, err := ex.Run(ctx, "t", Options{TargetRows: 40_000})
	if err != nil {
		t.Fatal(err)
	}
	if st.Version == 0 || st.FragmentsAdded < 3 || st.ZoneMaps != 1 || st.ZoneMapBytes == 0 {
		t.Fatalf("compaction %+v; want one group into several fragments and their zone map", st)
	}
	after, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	fresh := newFragments(tbl.Manifest(), after.Manifest())
	cov := coverage(after.Manifest())
	if !slices.Equal(cov["zm"], fresh) || len(cov["k_idx"]) != 0 {
		t.Fatalf("coverage %v, new fragments %v; want the zone map over the new fragments, the btree over none", cov, fresh)
	}
	checkAnswers(t, "after compaction", after, preds, before)
	plan, err := after.Explain(ctx, engine.ScanOptions{Filter: "id BETWEEN 100 AND 200", ForceIndexes: true})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(plan.Indexes, func(u engine.IndexUse) bool { return u.Name == "zm" }); i < 0 || !plan.Indexes[i].Used || plan.Indexes[i].ZonesSkipped == 0 {
		t.Fatalf("plan %+v: want the zone map used, skipping zones", plan)
	}
	rep, err := verify.Table(ctx, db.Store(), db.Catalog(), "t", verify.Options{AllVersions: true})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Faults)
	}
	if _, err := after.UpdateIndex(ctx, "k_idx"); err != nil {
		t.Fatal(err)
	}
	if cov := coverage(after.Manifest()); !slices.Equal(cov["k_idx"], fresh) {
		t.Fatalf("btree coverage after UpdateIndex %v, want %v", cov["k_idx"], fresh)
	}
	checkAnswers(t, "after UpdateIndex", after, preds, before)
	if rep, err := verify.Table(ctx, db.Store(), db.Catalog(), "t", verify.Options{AllVersions: true}); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Faults)
	}
}

// TestZoneMapsLeftOutWhenCommitMoves: the zone map a rewrite built is left out, and its
// new fragments stay uncovered, when an append lands before the rewrite's commit (the
// commit is rebuilt on top of it and the new fragments get other ids than the zones name)
// or the index is dropped meanwhile. Answers are unchanged either way.
func TestZoneMapsLeftOutWhenCommitMoves(t *testing.T) {
	for _, meanwhile := range []string{"append", "drop index"} {
		t.Run(meanwhile, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(testSeed(t), 11))
			db, tbl := indexedKV(t, rng)
			ex := New(db)
			ex.Hooks.BeforeCommit = func(ctx context.Context, p *Plan) error {
				w, err := db.OpenTable(ctx, "t")
				if err != nil {
					return err
				}
				if meanwhile == "append" {
					rec := kvBatch(rng, 100_000, 700)
					defer rec.Release()
					_, err = w.AppendRecord(ctx, rec)
					return err
				}
				_, err = w.DropIndex(ctx, "zm")
				return err
			}
			st, err := ex.Run(ctx, "t", Options{TargetRows: 40_000})
			if err != nil {
				t.Fatal(err)
			}
			if st.Version == 0 || st.ZoneMaps != 0 || len(st.Rebased) != 1 {
				t.Fatalf("compaction %+v; want it rebased and its zone map left out", st)
			}
			after, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			fresh := newFragments(tbl.Manifest(), after.Manifest())
			for name, frags := range coverage(after.Manifest()) {
				if len(frags) != 0 {
					t.Fatalf("index %s covers %v (new fragments %v); want nothing", name, frags, fresh)
				}
			}
			var preds []string
			for range 20 {
				preds = append(preds, kvPredicate(rng))
			}
			checkAnswers(t, "after compaction", after, preds, nil)
			rep, err := verify.Table(ctx, db.Store(), db.Catalog(), "t", verify.Options{AllVersions: true})
			if err != nil || !rep.OK() {
				t.Fatalf("verify: %v %v", err, rep.Faults)
			}
		})
	}
}
