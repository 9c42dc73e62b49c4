package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
)

// spreadSchema: k is a permutation of the row numbers, so every record batch spans
// nearly the whole range of k and statistics cannot prune a condition on it.
var spreadSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

const spreadRows = 40000 // more than four BTree pages: the planner's page estimate lets a point lookup use it

func spreadTable(t *testing.T, db *DB, name string, indexed bool) *Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.CreateTable(ctx, name, spreadSchema)
	if err != nil {
		t.Fatal(err)
	}
	for part := int64(0); part < 2; part++ { // two fragments
		b := array.NewRecordBuilder(memory.DefaultAllocator, spreadSchema)
		for i := part * spreadRows / 2; i < (part+1)*spreadRows/2; i++ {
			b.Field(0).(*array.Int64Builder).Append(i)
			b.Field(1).(*array.Int64Builder).Append(i * 7919 % spreadRows) // 7919 is prime to 40,000
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
		}
		rec := b.NewRecordBatch()
		b.Release()
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if indexed {
		if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"k"}}); err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

// batchesRead runs f and returns how many record batches the scans, counts, deletes and
// updates it made read (the engine.read_batch seam, hit once per batch read).
func batchesRead(t *testing.T, f func()) int {
	t.Helper()
	disable := failpoint.Enable(seamReadBatch.Name(), failpoint.Count())
	defer disable()
	f()
	return failpoint.Hits(seamReadBatch.Name())
}

// TestDeleteAndUpdatePlanWithIndexes (issue 10 item 5: every scan uses the indexes):
// Delete and Update find their rows through the same planner as Scan and Count, so on a
// column statistics cannot prune, a BTree makes a point delete and a point update read
// the batches holding their rows instead of every batch. The rows they change, and every
// row afterwards, are the same as on an identical table without the index (invariant 11).
func TestDeleteAndUpdatePlanWithIndexes(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 1000 // 40 batches
	with := spreadTable(t, db, "with_index", true)
	without := spreadTable(t, db, "without_index", false)
	const batches = spreadRows / 1000

	plan, err := with.Explain(ctx, ScanOptions{Filter: "k IN (5, 12345)"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Indexes) != 1 || !plan.Indexes[0].Used || plan.BatchesRead > 2 || plan.BatchesPrunedByIndex < batches-2 {
		t.Fatalf("plan of a point lookup on the indexed table: %+v", plan)
	}

	type outcome struct {
		deleted, updated int64
		ids              []int64
		values           []string
	}
	run := func(tbl *Table) (outcome, int, int) {
		var o outcome
		del := batchesRead(t, func() {
			res, err := tbl.Delete(ctx, "k IN (5, 12345)")
			if err != nil {
				t.Fatal(err)
			}
			o.deleted = res.Rows
		})
		upd := batchesRead(t, func() {
			res, err := tbl.Update(ctx, map[string]string{"v": "'changed'"}, "k = 777")
			if err != nil {
				t.Fatal(err)
			}
			o.updated = res.Rows
		})
		o.ids = scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, NoIndex: true})
		sc, err := tbl.Scan(ctx, ScanOptions{Columns: []string{"v"}, Filter: "v = 'changed' OR k = 777"})
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			col := sc.RecordBatch().Column(0).(*array.String)
			for i := range col.Len() {
				o.values = append(o.values, col.Value(i))
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sc.Release()
		return o, del, upd
	}
	got, delWith, updWith := run(with)
	want, delWithout, updWithout := run(without)
	if got.deleted != 2 || got.updated != 1 || got.deleted != want.deleted || got.updated != want.updated ||
		!slices.Equal(got.ids, want.ids) || !slices.Equal(got.values, want.values) || len(got.ids) != spreadRows-2 {
		t.Fatalf("with the index: deleted %d, updated %d, %d rows left, values %v; without: deleted %d, updated %d, %d rows left, values %v",
			got.deleted, got.updated, len(got.ids), got.values, want.deleted, want.updated, len(want.ids), want.values)
	}
	// Without the index every batch is read; with it, the batches of the candidates.
	if delWithout != batches || updWithout != batches {
		t.Fatalf("without the index: delete read %d batches, update %d; want %d each", delWithout, updWithout, batches)
	}
	if delWith > 2 || updWith > 1 {
		t.Fatalf("with the index: delete read %d batches (want ≤ 2), update %d (want 1): they did not use the index", delWith, updWith)
	}
	t.Logf("batches read: delete %d with the index, %d without; update %d with, %d without", delWith, delWithout, updWith, delWithout)
}

// TestIndexSkippedWhenStatisticsLeaveOneBatch: on data sorted by the indexed column a
// narrow range is pruned by statistics to one batch; the planner then leaves the index
// out before reading any of its objects (it could only add requests), says why, and the
// scan makes the same requests as one without indexes and returns the same rows.
func TestIndexSkippedWhenStatisticsLeaveOneBatch(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 1000
	tbl, err := db.CreateTable(ctx, "sorted", spreadSchema)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, spreadSchema)
	for i := int64(0); i < spreadRows; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.Int64Builder).Append(i) // sorted: batch statistics are tight
		b.Field(2).AppendNull()
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"k"}}); err != nil {
		t.Fatal(err)
	}
	db.indexes = indexCache{} // cold: a read of the lookup would show
	const where = "k >= 12100 AND k < 12200"
	plan, err := tbl.Explain(ctx, ScanOptions{Filter: where})
	if err != nil {
		t.Fatal(err)
	}
	if plan.BatchesRead != 1 || len(plan.Indexes) != 1 || plan.Indexes[0].Used || plan.Indexes[0].PagesRead != 0 ||
		!strings.Contains(plan.Indexes[0].Reason, "statistics already leave 1 batch") {
		t.Fatalf("plan: %+v", plan)
	}
	requests := func(opts ScanOptions) (int64, []int64) {
		before := db.store.Counters().Snapshot()
		ids := scanIDs(t, tbl, opts)
		return db.store.Counters().Snapshot().Sub(before).Total(), ids
	}
	withReqs, withIDs := requests(ScanOptions{Columns: []string{"id"}, Filter: where})
	withoutReqs, withoutIDs := requests(ScanOptions{Columns: []string{"id"}, Filter: where, NoIndex: true})
	if withReqs != withoutReqs || !slices.Equal(withIDs, withoutIDs) || len(withIDs) != 100 {
		t.Fatalf("with the index: %d requests, %d rows; without: %d requests, %d rows", withReqs, len(withIDs), withoutReqs, len(withoutIDs))
	}
	// A point lookup that statistics leave to one batch skips the index too; forcing it
	// reads the index (and still returns the same row).
	forced, err := tbl.Explain(ctx, ScanOptions{Filter: "k = 777", ForceIndexes: true})
	if err != nil || !forced.Indexes[0].Used || forced.Indexes[0].PagesRead == 0 {
		t.Fatalf("forced plan: %+v %v", forced, err)
	}
}

// TestExplainSaysWhichBTreeWon: of two BTrees that could both serve a filter, the plan
// uses the one with fewer candidate rows and says why the other was not used.
func TestExplainSaysWhichBTreeWon(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write.MaxRowsPerBatch = 1000
	tbl := spreadTable(t, db, "two_trees", true)
	if _, err := tbl.CreateIndex(ctx, IndexSpec{Columns: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	const where = "k = 12345 AND id < 8000" // id_idx: 2 candidate pages; k_idx: 1
	plan, err := tbl.Explain(ctx, ScanOptions{Filter: where})
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]IndexUse{}
	for _, u := range plan.Indexes {
		uses[u.Name] = u
	}
	if !uses["k_idx"].Used || uses["id_idx"].Used || !strings.Contains(uses["id_idx"].Reason, `index "k_idx" has fewer candidate rows`) {
		t.Fatalf("plan: %+v", plan)
	}
	if got, want := scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: where}), scanIDs(t, tbl, ScanOptions{Columns: []string{"id"}, Filter: where, NoIndex: true}); !slices.Equal(got, want) {
		t.Fatalf("rows %v with the indexes, %v without", got, want)
	}
}
