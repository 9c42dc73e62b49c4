package gather

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/store"
)

var schema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newDB opens a DB on a fresh local-disk store with the shared embedded etcd as catalog.
func newDB(t *testing.T) (*engine.DB, store.Store) {
	s := storetest.Local(t)
	return enginetest.OpenDB(t, s, engine.Options{}), s
}

func batch(from, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(from + i))
	}
	return b.NewRecordBatch()
}

func appendRows(t *testing.T, tbl *engine.Table, from, n int) {
	t.Helper()
	rec := batch(from, n)
	defer rec.Release()
	if _, err := tbl.AppendRecord(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// create makes table name with appends fragments of 10 rows each.
func create(t *testing.T, db *engine.DB, name string, appends int) *engine.Table {
	t.Helper()
	tbl, err := db.CreateTable(testCtx(t), name, schema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range appends {
		appendRows(t, tbl, i*10, 10)
	}
	return tbl
}

// one reads table name's state with Table and checks that Tables agrees.
func one(t *testing.T, db *engine.DB, name string, opts Options) plan.TableState {
	t.Helper()
	ctx := testCtx(t)
	st, err := Table(ctx, db, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Tables = []string{name}
	all, _, err := Tables(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0] != st {
		t.Fatalf("Tables %+v, Table %+v", all, st)
	}
	return st
}

// waitFor polls Table until cond holds (demand is published detached from the write
// path), failing after a deadline with the last state.
func waitFor(t *testing.T, db *engine.DB, name string, what string, cond func(plan.TableState) bool) plan.TableState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := Table(testCtx(t), db, name, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached; last state %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTablesWALBacklog: WAL flushes show as pending generations with an exact age; a
// merge clears them; demand deleted from etcd (lost events) reads as nothing pending until
// Reconcile republishes it from storage.
func TestTablesWALBacklog(t *testing.T) {
	ctx := testCtx(t)
	db, _ := newDB(t)
	tbl := create(t, db, "w", 1)
	if _, err := tbl.UpdateConfig(ctx, map[string]string{engine.ConfigWALShards: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for g := range 3 {
		rec := batch(100+g*10, 10)
		if _, err := w.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st := waitFor(t, db, "w", "3 pending generations", func(st plan.TableState) bool { return st.PendingGenerations == 3 })
	if st.PendingBytes == 0 || !st.AgeKnown || !st.AgeExact || st.OldestPending.Before(before.Add(-time.Second)) || st.OldestPending.After(time.Now()) {
		t.Fatalf("backlog state %+v (flushed after %v)", st, before)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Lost demand: the records are gone, so nothing reads as pending; Reconcile re-reads
	// the shard from storage and publishes it again.
	if err := db.Demand().DeleteTable(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if st := one(t, db, "w", Options{}); st.PendingGenerations != 0 {
		t.Fatalf("after deleting demand: %+v", st)
	}
	n, err := Reconcile(ctx, db, "w")
	if err != nil || n != 1 {
		t.Fatalf("Reconcile: %d changed, %v; want 1", n, err)
	}
	if st := one(t, db, "w", Options{}); st.PendingGenerations != 3 {
		t.Fatalf("after Reconcile: %+v", st)
	}
	if n, err := Reconcile(ctx, db, "w"); err != nil || n != 0 {
		t.Fatalf("second Reconcile: %d changed, %v; want 0", n, err)
	}

	m, err := db.OpenTable(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MergeWAL(ctx, engine.MergeWALOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, db, "w", "merged", func(st plan.TableState) bool { return st.PendingGenerations == 0 && !st.AgeKnown })

	// A table without a WAL reconciles nothing; a dropped one names itself.
	create(t, db, "plain", 1)
	if n, err := Reconcile(ctx, db, "plain"); err != nil || n != 0 {
		t.Fatalf("Reconcile without a WAL: %d, %v", n, err)
	}
	if _, err := Reconcile(ctx, db, "nope"); !errors.Is(err, manifest.ErrTableNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Reconcile of a missing table: %v", err)
	}
}

// TestTablesSmallFragments: many small appends are compaction work with the bytes it
// would rewrite; after a compaction there is none.
func TestTablesSmallFragments(t *testing.T) {
	ctx := testCtx(t)
	db, _ := newDB(t)
	create(t, db, "t", 20)
	opts := Options{Compaction: compaction.Options{TargetRows: 1000}}
	st := one(t, db, "t", opts)
	if st.Fragments != 20 || st.SmallFragments != 20 || st.CompactBytes <= 0 || st.DeletedRatioHigh != 0 || st.UncoveredByIndex != 0 || st.Drift != 0 {
		t.Fatalf("before compaction: %+v", st)
	}
	// With the default target (a million rows) they are small too; with a target below
	// their size, none is.
	if st := one(t, db, "t", Options{Compaction: compaction.Options{TargetRows: 5}}); st.SmallFragments != 0 || st.CompactBytes != 0 {
		t.Fatalf("target 5 rows: %+v", st)
	}
	if _, err := compaction.Compact(ctx, db, "t", opts.Compaction); err != nil {
		t.Fatal(err)
	}
	if st := one(t, db, "t", opts); st.Fragments != 1 || st.SmallFragments != 0 || st.CompactBytes != 0 {
		t.Fatalf("after compaction: %+v", st)
	}
	// Deleting most of the one fragment makes it worth rewriting alone.
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Delete(ctx, "id < 150"); err != nil {
		t.Fatal(err)
	}
	if st := one(t, db, "t", opts); st.DeletedRatioHigh != 1 || st.SmallFragments != 1 || st.CompactBytes <= 0 {
		t.Fatalf("after deleting 150 of 200 rows: %+v", st)
	}
}

// TestTablesUncoveredFragments: fragments appended after an index is built are uncovered
// until UpdateIndex covers them.
func TestTablesUncoveredFragments(t *testing.T) {
	ctx := testCtx(t)
	db, _ := newDB(t)
	tbl := create(t, db, "t", 3)
	if st := one(t, db, "t", Options{}); st.UncoveredByIndex != 0 {
		t.Fatalf("no index: %+v", st)
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	if st := one(t, db, "t", Options{}); st.UncoveredByIndex != 0 || st.IndexBytes != 0 {
		t.Fatalf("after the build: %+v", st)
	}
	appendRows(t, tbl, 1000, 10)
	appendRows(t, tbl, 2000, 10)
	st := one(t, db, "t", Options{})
	if st.UncoveredByIndex != 2 || st.IndexBytes <= 0 || st.Fragments != 5 {
		t.Fatalf("two appends after the build: %+v", st)
	}
	if _, err := tbl.UpdateIndex(ctx, "id_idx"); err != nil {
		t.Fatal(err)
	}
	if st := one(t, db, "t", Options{}); st.UncoveredByIndex != 0 {
		t.Fatalf("after UpdateIndex: %+v", st)
	}
}

// TestTablesPendingSidecars: a running compaction's sidecar (its hold is live) is not
// recovery work; the sidecar of one that failed after committing is, and its drift is
// recovery's, not publish work; Recover clears both.
func TestTablesPendingSidecars(t *testing.T) {
	ctx := testCtx(t)
	db, s := newDB(t)
	create(t, db, "t", 4)
	ex := recovery.Enable(compaction.New(db))
	var running plan.TableState
	var runningErr error
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error {
		running, runningErr = Table(ctx, db, "t", Options{})
		return nil
	}
	off := failpoint.Enable("compaction.before_publish", failpoint.Error(errors.New("crash before publish")))
	_, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000})
	off()
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("compaction: %v, want the injected crash", err)
	}
	if runningErr != nil || running.PendingSidecars != 0 || running.SmallFragments != 4 {
		t.Fatalf("while running (sidecar armed, hold live): %+v, %v", running, runningErr)
	}
	keys, err := recovery.Pending(ctx, s, "t")
	if err != nil || len(keys) != 1 {
		t.Fatalf("pending sidecars: %v, %v", keys, err)
	}
	st := one(t, db, "t", Options{})
	if st.PendingSidecars != 1 || st.Drift != 0 || st.Unreadable != "" {
		t.Fatalf("after the crash: %+v", st)
	}
	// Another table's view is not affected by t's sidecar.
	create(t, db, "u", 1)
	if st := one(t, db, "u", Options{}); st.PendingSidecars != 0 {
		t.Fatalf("table u: %+v", st)
	}
	if _, err := recovery.Recover(ctx, s, db.Catalog(), "t", recovery.Options{MinAge: -1}); err != nil {
		t.Fatal(err)
	}
	if st := one(t, db, "t", Options{Compaction: compaction.Options{TargetRows: 1000}}); st.PendingSidecars != 0 || st.Drift != 0 || st.Fragments != 1 {
		t.Fatalf("after Recover: %+v", st)
	}
}

// TestTablesDrift: a compaction committed and never published, with no sidecar, is
// maintenance drift (publish work); an append committed and never published is logical
// drift, which the sidecar never publishes (Drift 0).
func TestTablesDrift(t *testing.T) {
	ctx := testCtx(t)
	db, _ := newDB(t)
	create(t, db, "m", 4)
	ex := compaction.New(db)
	ex.Catalog = nil // commit, never publish; no sidecar
	if st, err := ex.Run(ctx, "m", compaction.Options{TargetRows: 1000}); err != nil || st.Version == 0 {
		t.Fatalf("compaction: %+v, %v", st, err)
	}
	st := one(t, db, "m", Options{Compaction: compaction.Options{TargetRows: 1000}})
	if st.Drift != 1 || st.PendingSidecars != 0 || st.Fragments != 4 {
		t.Fatalf("maintenance drift: %+v", st)
	}

	create(t, db, "l", 2)
	rec := batch(500, 5)
	defer rec.Release()
	enginetest.CommitDataFile(t, db, "l", rec, []int32{0})
	if st := one(t, db, "l", Options{}); st.Drift != 0 || st.Unreadable != "" || st.Dropped {
		t.Fatalf("logical drift: %+v", st)
	}
}

// TestTablesDropped: a dropped table, and a name that never was a table, are Dropped; the
// listing of every table leaves a dropped one out unless demand names it.
func TestTablesDropped(t *testing.T) {
	ctx := testCtx(t)
	db, _ := newDB(t)
	create(t, db, "keep", 1)
	create(t, db, "gone", 1)
	if _, err := db.DropTable(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone", "never"} {
		if st := one(t, db, name, Options{}); !st.Dropped || st.Unreadable != "" || st.Fragments != 0 {
			t.Fatalf("%s: %+v", name, st)
		}
	}
	all, stats, err := Tables(ctx, db, Options{})
	if err != nil || len(all) != 1 || all[0].Table != "keep" || all[0].Dropped || stats.Tables != 1 {
		t.Fatalf("every table: %+v %+v, %v", all, stats, err)
	}
	// Demand left behind by the dropped table (a publish in flight during the drop) shows
	// it as Dropped, a named skip rather than a silent one.
	if _, err := db.Demand().Publish(ctx, "gone", flushEv("0", 2, 0, 1)); err != nil {
		t.Fatal(err)
	}
	all, _, err = Tables(ctx, db, Options{})
	if err != nil || len(all) != 2 || all[0].Table != "gone" || !all[0].Dropped || all[0].PendingGenerations != 2 {
		t.Fatalf("with demand of the dropped table: %+v, %v", all, err)
	}
}

// TestTablesUnreadable: a corrupt published manifest makes its table Unreadable, naming
// the object; the pass still reads the other tables.
func TestTablesUnreadable(t *testing.T) {
	ctx := testCtx(t)
	db, s := newDB(t)
	create(t, db, "bad", 2)
	create(t, db, "good", 2)
	p, _, err := db.Catalog().Get(ctx, "bad")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Get(ctx, p.ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := s.Put(ctx, p.ManifestKey, b); err != nil {
		t.Fatal(err)
	}
	fresh := enginetest.OpenDB(t, s, engine.Options{}) // an empty manifest cache
	all, _, err := Tables(ctx, fresh, Options{})
	if err != nil || len(all) != 2 {
		t.Fatalf("Tables: %+v, %v", all, err)
	}
	if all[0].Table != "bad" || all[0].Unreadable == "" || all[0].Dropped || !strings.Contains(all[0].Unreadable, p.ManifestKey) {
		t.Fatalf("bad: %+v (key %s)", all[0], p.ManifestKey)
	}
	if all[1].Table != "good" || all[1].Unreadable != "" || all[1].Fragments != 2 {
		t.Fatalf("good: %+v", all[1])
	}
}

// TestTablesManifestCache: a second pass over unchanged tables reads no manifest object
// (the DB's manifest cache); the drift probe is its only store request per table.
func TestTablesManifestCache(t *testing.T) {
	ctx := testCtx(t)
	db, s := newDB(t)
	const n = 12
	for i := range n {
		create(t, db, fmt.Sprintf("t%02d", i), 1)
	}
	fresh := enginetest.OpenDB(t, s, engine.Options{})
	first, st1, err := Tables(ctx, fresh, Options{Concurrency: 3})
	if err != nil || len(first) != n || st1.Tables != n || st1.ManifestReads != n {
		t.Fatalf("first pass: %d states, %+v, %v", len(first), st1, err)
	}
	before := s.Counters().Snapshot()
	second, _, err := Tables(ctx, fresh, Options{Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Counters().Snapshot().Sub(before)
	if d.ByOp[store.OpGet] != 0 || d.BytesRead != 0 || d.ByOp[store.OpHead] != n {
		t.Fatalf("second pass store requests: %v (want no GET, %d HEAD)", d, n)
	}
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("passes differ at %d: %+v vs %+v", i, first[i], second[i])
		}
	}
}

// TestTablesErrors: a bad table name, and a cancelled context, fail the pass with
// ErrGather.
func TestTablesErrors(t *testing.T) {
	db, _ := newDB(t)
	if _, _, err := Tables(testCtx(t), db, Options{Tables: []string{"a/b"}}); !errors.Is(err, ErrGather) || !errors.Is(err, manifest.ErrInvalidTableName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := Table(testCtx(t), db, "", Options{}); !errors.Is(err, manifest.ErrInvalidTableName) {
		t.Fatalf("empty name: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Tables(ctx, db, Options{}); !errors.Is(err, ErrGather) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
