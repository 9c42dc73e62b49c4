package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/wal"
)

// walTable creates table name with shards WAL shards and rows [0, base) in the base table.
func walTable(t *testing.T, db *DB, name string, shards string, base int64) *Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.CreateTable(ctx, name, kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	if base > 0 {
		appendRange(t, tbl, 0, base)
	}
	if _, err := tbl.UpdateConfig(ctx, map[string]string{ConfigWALShards: shards}, nil); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func walAppend(t *testing.T, w *WALWriter, from, to int64) {
	t.Helper()
	rec := kvBatch(from, to)
	defer rec.Release()
	if _, err := w.Append(context.Background(), rec); err != nil {
		t.Fatalf("WAL append [%d,%d): %v", from, to, err)
	}
}

func sorted(xs []int64) []int64 {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

func countOf(t *testing.T, tbl *Table, where string) int64 {
	t.Helper()
	n, err := tbl.Count(context.Background(), where)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWALRowsAreReadRightAwayAndMergedOnce: rows appended through the WAL are returned by
// scans and counts at once, in the writing process (memtables) and in another (entries),
// after a flush (generations) and after the merge (base fragments), never twice; a second
// merge is a no-op (invariant 8).
func TestWALRowsAreReadRightAwayAndMergedOnce(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDBOn(t, s)
	other := openDBOn(t, s) // another process: no writer of its own
	tbl := walTable(t, db, "w", "2", 10)
	w0, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Close(ctx)
	w1, err := tbl.WAL(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close(ctx)
	walAppend(t, w0, 10, 20)
	walAppend(t, w1, 20, 25)

	check := func(stage string, want []int64) {
		t.Helper()
		for name, d := range map[string]*DB{"writer": db, "other": other} {
			h := mustOpen(t, d, "w")
			if got := sorted(ids(t, h, "")); !slices.Equal(got, want) {
				t.Fatalf("%s, %s process: rows %v, want %v", stage, name, got, want)
			}
			if n := countOf(t, h, ""); n != int64(len(want)) {
				t.Fatalf("%s, %s process: count %d, want %d", stage, name, n, len(want))
			}
			if got := sorted(ids(t, h, "id >= 18 AND id < 22")); !slices.Equal(got, []int64{18, 19, 20, 21}) {
				t.Fatalf("%s, %s process: filtered rows %v", stage, name, got)
			}
			if got := ids(t, h, "id = 3"); !slices.Equal(got, []int64{3}) {
				t.Fatalf("%s, %s process: base row %v", stage, name, got)
			}
			if got := sorted(ids(t, mustCheckout(t, h, h.Version()), "")); !slices.Equal(got, base(t, h)) {
				t.Fatalf("%s, %s process: time travel to v%d read the WAL: %v", stage, name, h.Version(), got)
			}
		}
	}
	all := seq(0, 25)
	check("in the log", all)
	if err := w0.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check("shard 0 flushed", all)
	if err := w1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := mustOpen(t, db, "w").MergeWAL(ctx, MergeWALOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Shards) != 2 || res.Shards[0] != (ShardMerge{Shard: "0", From: 0, To: 1, Generations: 1, Rows: 10, Bytes: res.Shards[0].Bytes}) || res.Shards[1].Rows != 5 {
		t.Fatalf("merge: %+v", res)
	}
	h := mustOpen(t, db, "w")
	if h.Manifest().WALMerged["0"] != 1 || h.Manifest().WALMerged["1"] != 1 || h.Manifest().LiveRows() != 25 {
		t.Fatalf("after the merge: watermarks %v, %d base rows", h.Manifest().WALMerged, h.Manifest().LiveRows())
	}
	check("merged", all)
	again, err := h.MergeWAL(ctx, MergeWALOptions{})
	if err != nil || len(again.Shards) != 0 || again.Version != h.Version() {
		t.Fatalf("second merge: %+v, %v", again, err)
	}
	walAppend(t, w0, 25, 30)
	check("appended after the merge", seq(0, 30))
}

// base is the ids of the handle's base table alone.
func base(t *testing.T, h *Table) []int64 {
	t.Helper()
	sc, err := h.Scan(context.Background(), ScanOptions{Columns: []string{"id"}, NoWAL: true})
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
	return sorted(out)
}

func mustCheckout(t *testing.T, h *Table, v uint64) *Table {
	t.Helper()
	c, err := h.Checkout(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConcurrentMergesMergeOnce: mergers racing on the same generations commit them once;
// the losers find them merged (invariant 8).
func TestConcurrentMergesMergeOnce(t *testing.T) {
	ctx := context.Background()
	db := openDBOn(t, storetest.Local(t))
	tbl := walTable(t, db, "w", "1", 0)
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	for g := range int64(3) {
		walAppend(t, w, g*10, g*10+10)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	results := make([]MergeWALResult, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = mustOpen(t, db, "w").MergeWAL(ctx, MergeWALOptions{})
		}()
	}
	wg.Wait()
	merged := 0
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("merger %d: %v", i, errs[i])
		}
		for _, s := range results[i].Shards {
			merged += s.Generations
		}
	}
	if merged != 3 {
		t.Fatalf("%d generations merged in all, want 3 (each once)", merged)
	}
	h := mustOpen(t, db, "w")
	if got := sorted(ids(t, h, "")); !slices.Equal(got, seq(0, 30)) {
		t.Fatalf("rows %v", got)
	}
	if h.Manifest().LiveRows() != 30 {
		t.Fatalf("%d base rows", h.Manifest().LiveRows())
	}
}

// TestLogicalWritesRefuseUnmergedWALRows: a delete, update or overwrite would not apply to
// rows still in the WAL, so it refuses (ErrWALPending) and writes nothing; after the merge
// it applies to them.
func TestLogicalWritesRefuseUnmergedWALRows(t *testing.T) {
	ctx := context.Background()
	db := openDBOn(t, storetest.Local(t))
	tbl := walTable(t, db, "w", "1", 5)
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	walAppend(t, w, 5, 10)
	h := mustOpen(t, db, "w")
	v := h.Version()
	if _, err := h.Delete(ctx, "id >= 0"); !errors.Is(err, ErrWALPending) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := h.Update(ctx, map[string]string{"id": "id + 100"}, "id >= 0"); !errors.Is(err, ErrWALPending) {
		t.Fatalf("update: %v", err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Delete(ctx, "id >= 0"); !errors.Is(err, ErrWALPending) {
		t.Fatalf("delete with a flushed generation: %v", err)
	}
	if got := mustOpen(t, db, "w").Version(); got != v {
		t.Fatalf("a refused write committed version %d", got)
	}
	if _, err := h.MergeWAL(ctx, MergeWALOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := mustOpen(t, db, "w").Delete(ctx, "id >= 3")
	if err != nil || res.Rows != 7 {
		t.Fatalf("delete after the merge: %+v, %v", res, err)
	}
	if got := sorted(ids(t, mustOpen(t, db, "w"), "")); !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("rows %v", got)
	}
}

func TestWALBadInput(t *testing.T) {
	ctx := context.Background()
	db := openDBOn(t, storetest.Local(t))
	tbl, err := db.CreateTable(ctx, "plain", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.WAL(ctx, 0); !errors.Is(err, ErrNoWAL) {
		t.Fatalf("WAL of a table without one: %v", err)
	}
	if _, err := tbl.MergeWAL(ctx, MergeWALOptions{}); !errors.Is(err, ErrNoWAL) {
		t.Fatalf("merge of a table without a WAL: %v", err)
	}
	w := walTable(t, db, "w", "2", 0)
	for _, shard := range []int{-1, 2} {
		if _, err := w.WAL(ctx, shard); !errors.Is(err, ErrShardOutOfRange) {
			t.Fatalf("shard %d: %v", shard, err)
		}
	}
	if _, err := w.MergeWAL(ctx, MergeWALOptions{Shards: []int{5}}); !errors.Is(err, ErrShardOutOfRange) {
		t.Fatalf("merge of shard 5: %v", err)
	}
	ww, err := w.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ww.Close(ctx)
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	b.Field(0).(*array.Int32Builder).Append(1)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := ww.Append(ctx, rec); !errors.Is(err, wal.ErrSchemaMismatch) {
		t.Fatalf("append of another schema: %v", err)
	}
	if n := countOf(t, mustOpen(t, db, "w"), ""); n != 0 {
		t.Fatalf("%d rows after refused appends", n)
	}
}

// TestStaleHandleBehindMergedWAL: a handle older than a merge whose generations the
// writer dropped from the shard manifest cannot read them consistently: ErrWALAhead, and
// a refreshed handle reads every row once.
func TestStaleHandleBehindMergedWAL(t *testing.T) {
	ctx := context.Background()
	db := openDBOn(t, storetest.Local(t))
	tbl := walTable(t, db, "w", "1", 0)
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	walAppend(t, w, 0, 5)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stale := mustOpen(t, db, "w")
	if _, err := mustOpen(t, db, "w").MergeWAL(ctx, MergeWALOptions{}); err != nil {
		t.Fatal(err)
	}
	walAppend(t, w, 5, 8)
	if err := w.Flush(ctx); err != nil { // drops merged generation 1 from the shard manifest
		t.Fatal(err)
	}
	if _, err := stale.Scan(ctx, ScanOptions{}); !errors.Is(err, ErrWALAhead) {
		t.Fatalf("stale handle: %v", err)
	}
	if err := stale.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sorted(ids(t, stale, "")); !slices.Equal(got, seq(0, 8)) {
		t.Fatalf("rows %v", got)
	}
}

// TestFencingOneShardLeavesTheOtherWriting: a writer fenced by a claim in another process
// fails with wal.ErrFenced from then on; the same process's writer of another shard goes
// on (fencing one role never takes down another).
func TestFencingOneShardLeavesTheOtherWriting(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDBOn(t, s)
	tbl := walTable(t, db, "w", "2", 0)
	w0, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Close(ctx)
	w1, err := mustOpen(t, db, "w").WAL(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close(ctx)
	walAppend(t, w0, 0, 5)
	other := openDBOn(t, s)
	w0b, err := mustOpen(t, other, "w").WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w0b.Close(ctx)
	walAppend(t, w0b, 5, 8)
	// Before the fenced writer learns of the fence, its process reads shard 0 from
	// storage: the new writer's rows are there.
	if got := sorted(ids(t, mustOpen(t, db, "w"), "")); !slices.Equal(got, seq(0, 8)) {
		t.Fatalf("rows before the fenced writer knows %v", got)
	}
	rec := kvBatch(50, 51)
	defer rec.Release()
	if _, err := w0.Append(ctx, rec); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("fenced writer's append: %v", err)
	}
	walAppend(t, w1, 100, 105)
	walAppend(t, w0b, 8, 10)
	// The fenced writer's process reads shard 0 from storage now, and its own shard 1.
	if got := sorted(ids(t, mustOpen(t, db, "w"), "")); !slices.Equal(got, append(seq(0, 10), seq(100, 105)...)) {
		t.Fatalf("rows %v", got)
	}
}

// TestWALDemandFollowsFlushesAndMerges: a flush publishes the shard's sealed generation
// to demand, a merge its merged watermark (both detached from the write path), and a scan
// of storage publishes both; the table fold then shows what is pending.
func TestWALDemandFollowsFlushesAndMerges(t *testing.T) {
	ctx := context.Background()
	db := openDBOn(t, storetest.Local(t))
	tbl := walTable(t, db, "w", "1", 0)
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	pending := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			snap, err := db.Demand().ReadTable(ctx, "w")
			if err != nil {
				t.Fatal(err)
			}
			got := uint64(0)
			if td := snap.Tables["w"]; td != nil {
				got = td.PendingGenerations()
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("demand: %d pending generations, want %d (publisher %+v)", got, want, db.DemandStats())
			}
			time.Sleep(5 * time.Millisecond) // the detached publisher's etcd round trip
		}
	}
	for g := range int64(3) {
		walAppend(t, w, g*10, g*10+10)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pending(3)
	if _, err := mustOpen(t, db, "w").MergeWAL(ctx, MergeWALOptions{}); err != nil {
		t.Fatal(err)
	}
	pending(0)
	walAppend(t, w, 30, 40)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pending(1)
	events, _, err := mustOpen(t, db, "w").ScanWALDemand(ctx)
	if err != nil || len(events) != 1 || events[0].SealedThrough != 4 || *events[0].MergedThrough != 3 {
		t.Fatalf("scan: %+v, %v", events, err)
	}
	pending(1)
}
