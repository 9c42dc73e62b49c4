package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// unknownNotLanded makes the manifest puts of table's version v look unanswered (the
// request never arrives) and their read-backs fail, until fs.Clear: the write's outcome is
// Unknown and nothing landed.
func unknownNotLanded(fs *faults.Store, table string, v uint64) {
	key := manifest.ManifestKey(table, v)
	fs.Add(faults.Rule{Name: "put lost", Ops: []store.Op{store.OpPutIfAbsent}, Key: key,
		Kind: faults.DropRequest, Class: store.ErrOutcomeUnknown})
	fs.Add(faults.Rule{Name: "no read-back", Ops: []store.Op{store.OpGet}, Key: key, Kind: faults.DropRequest})
}

// unknownLanded makes the first manifest put of table's version v land with its reply
// lost, and the next times readers of v fail: Unknown, though the version is in the
// store.
func unknownLanded(fs *faults.Store, table string, v uint64, reads int) {
	key := manifest.ManifestKey(table, v)
	fs.Add(faults.Rule{Name: "reply lost", Ops: []store.Op{store.OpPutIfAbsent}, Key: key, Kind: faults.DropResponse, Times: 1})
	fs.Add(faults.Rule{Name: "no read-back", Ops: []store.Op{store.OpGet}, Key: key, Kind: faults.DropRequest, Times: reads})
}

// atSeam runs f once when seam is reached (to arm faults after a write's planning reads).
func atSeam(t *testing.T, seam string, f func()) {
	t.Cleanup(failpoint.Enable(seam, failpoint.Call(func(context.Context) error { f(); return nil }).Once()))
}

// expireBelow expires (as GC does: a tombstone keeping the transaction) every retained
// version of table below v.
func expireBelow(t *testing.T, db *DB, table string, v uint64) {
	t.Helper()
	ctx := context.Background()
	for u := uint64(1); u < v; u++ {
		m, err := manifest.Load(ctx, db.store, table, u)
		if errors.Is(err, manifest.ErrVersionExpired) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := manifest.Expire(ctx, db.store, m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnknownAppendLandedThenExpiredIsCommittedOnRetry (issue 8 item 3): an append whose
// outcome was Unknown had landed; another writer published past it and GC expired its
// version. Table.Retry must report Committed (the tombstone keeps its transaction id),
// never Rejected, so a caller does not append the rows again; and the rows are there once.
func TestUnknownAppendLandedThenExpiredIsCommittedOnRetry(t *testing.T) {
	ctx := context.Background()
	db, fs, _ := faultDB(t)
	tbl, err := db.CreateTable(ctx, "u", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 3)
	v := tbl.Version() + 1 // every read-back fails: the engine's retries cannot decide
	atSeam(t, "manifest.before_txn_put", func() { unknownLanded(fs, "u", v, 0) })
	rec := kvBatch(100, 105)
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	var ue *UnknownError
	if !errors.As(err, &ue) {
		// The engine's own retries may have found it; then there is nothing to decide.
		t.Fatalf("append: %v, want Unknown", err)
	}
	fs.Clear()
	other := mustOpen(t, db, "u")
	appendRange(t, other, 200, 201) // publishes past the unknown append's version
	expireBelow(t, db, "u", other.Version())
	for _, h := range []*Table{tbl, mustOpen(t, db, "u")} {
		res, err := h.Retry(ctx, ue.Txn)
		if OutcomeOf(err) != Committed || !res.Published {
			t.Fatalf("retry from v%d: %v (outcome %v), want Committed", h.Version(), err, OutcomeOf(err))
		}
	}
	got := ids(t, mustOpen(t, db, "u"), "")
	if want := []int64{0, 1, 2, 100, 101, 102, 103, 104, 200}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v (the unknown append exactly once)", got, want)
	}
}

// TestUnknownUpdateIsAppliedOnceAcrossExpiry (issue 8 item 3): an update's first attempt
// lands with its reply lost; before the engine's own retry, another writer publishes past
// it and GC expires its version. The retry must find its own transaction in the tombstone
// instead of taking "expired" for a conflict and re-planning: SET b = b + 1 is applied
// once, and no other write's rows are lost or doubled.
func TestUnknownUpdateIsAppliedOnceAcrossExpiry(t *testing.T) {
	ctx := context.Background()
	db, fs, _ := faultDB(t)
	tbl, err := db.CreateTable(ctx, "u", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 4)
	v := tbl.Version() + 1
	atSeam(t, "engine.update_planned", func() { unknownLanded(fs, "u", v, 1) })
	calls := 0
	defer failpoint.Enable("manifest.before_txn_put", failpoint.Call(func(ctx context.Context) error {
		calls++
		if calls != 2 { // the engine's retry of the update, after its unknown first attempt
			return nil
		}
		other := mustOpen(t, db, "u")
		if _, err := other.AppendRecord(ctx, kvBatch(50, 51)); err != nil {
			return err
		}
		expireBelow(t, db, "u", other.Version())
		return nil
	}))()
	res, err := tbl.Update(ctx, map[string]string{"id": "id + 1000"}, "true")
	if err != nil || res.Rows != 4 {
		t.Fatalf("update: %+v, %v; want 4 rows committed", res, err)
	}
	got := ids(t, mustOpen(t, db, "u"), "")
	slices.Sort(got)
	if want := []int64{50, 1000, 1001, 1002, 1003}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v (the update applied once)", got, want)
	}
}

// TestUnknownAppendIsCommittedOnceAcrossExpiry (issue 8 item 3, Append's own retry): an
// append's first attempt lands with its reply lost and cannot be read back; before the
// engine's own retry, another writer publishes past it and GC expires its version. The
// retry must find its own transaction in the tombstone (Committed), instead of taking
// "expired" for a conflict: the rows are there once, and its files are never committed a
// second time (under another transaction id or the same).
func TestUnknownAppendIsCommittedOnceAcrossExpiry(t *testing.T) {
	ctx := context.Background()
	db, fs, _ := faultDB(t)
	tbl, err := db.CreateTable(ctx, "u", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 3)
	v := tbl.Version() + 1
	calls := 0
	defer failpoint.Enable("manifest.before_txn_put", failpoint.Call(func(ctx context.Context) error {
		switch calls++; calls {
		case 1: // the append's first attempt: it lands, its reply and one read-back are lost
			unknownLanded(fs, "u", v, 1)
		case 2: // the engine's retry of the append
			other := mustOpen(t, db, "u")
			if _, err := other.AppendRecord(ctx, kvBatch(50, 51)); err != nil {
				return err
			}
			expireBelow(t, db, "u", other.Version())
		}
		return nil
	}))()
	rec := kvBatch(100, 105)
	res, err := tbl.AppendRecord(ctx, rec)
	rec.Release()
	if err != nil || res.Version != v || !res.Published {
		t.Fatalf("append: %+v, %v; want Committed as v%d (its first attempt)", res, err, v)
	}
	if calls < 2 {
		t.Fatalf("the engine retried %d times; the test needs its retry", calls-1)
	}
	got := ids(t, mustOpen(t, db, "u"), "")
	slices.Sort(got)
	if want := []int64{0, 1, 2, 50, 100, 101, 102, 103, 104}; !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v (the append exactly once)", got, want)
	}
	// No version after v names the append's files again.
	first, err := manifest.LoadRecord(ctx, db.store, "u", v)
	if err != nil || first.Txn == nil {
		t.Fatalf("v%d: %v", v, err)
	}
	head, err := manifest.Head(ctx, db.store, "u")
	if err != nil {
		t.Fatal(err)
	}
	for u := v + 1; u <= head; u++ {
		r, err := manifest.LoadRecord(ctx, db.store, "u", u)
		if err != nil {
			t.Fatal(err)
		}
		if r.TxnID == first.TxnID || len(r.Txn.Op.NewFragments) > 0 && slices.EqualFunc(r.Txn.Op.NewFragments, first.Txn.Op.NewFragments, func(a, b manifest.Fragment) bool { return a.Files[0].Key == b.Files[0].Key }) {
			t.Fatalf("v%d commits the append's files again (%s)", u, r.TxnID)
		}
	}
}

// TestRetryOnReopenedHandleChecksConflicts (issue 8 item 4): a schema change whose outcome
// was Unknown (nothing landed) is retried on a reopened handle after a concurrent schema
// change gave its field id to another column. The retry must meet the conflict rules
// (Rejected), not land over the other column: the same transaction gets the same answer
// from every handle. Likewise an append retried after the table was overwritten.
func TestRetryOnReopenedHandleChecksConflicts(t *testing.T) {
	ctx := context.Background()
	db, fs, _ := faultDB(t)
	tbl, err := db.CreateTable(ctx, "u", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 3)
	v := tbl.Version() + 1
	atSeam(t, "engine.schema_change_planned", func() { unknownNotLanded(fs, "u", v) })
	_, err = tbl.AddColumns(ctx, arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	var ue *UnknownError
	if !errors.As(err, &ue) {
		t.Fatalf("add column c: %v, want Unknown", err)
	}
	fs.Clear()
	other := mustOpen(t, db, "u")
	if _, err := other.AddColumns(ctx, arrow.Field{Name: "d", Type: arrow.BinaryTypes.String, Nullable: true}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Table{mustOpen(t, db, "u"), tbl} {
		_, err := h.Retry(ctx, ue.Txn)
		if OutcomeOf(err) != Rejected || !errors.Is(err, manifest.ErrRetryable) {
			t.Fatalf("retry of ADD COLUMN c from v%d over a concurrent ADD COLUMN d: %v; want a rejected retryable conflict", h.Version(), err)
		}
	}
	h := mustOpen(t, db, "u")
	if names := h.Schema().String(); !slices.Contains(columnNames(h.Schema()), "d") || slices.Contains(columnNames(h.Schema()), "c") {
		t.Fatalf("schema after the retries: %s; want d and no c", names)
	}
	if got := ids(t, h, ""); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("rows %v", got)
	}

	// An append whose outcome was unknown, retried after the table was overwritten.
	v = h.Version() + 1
	atSeam(t, "manifest.before_txn_put", func() { unknownNotLanded(fs, "u", v) })
	rec := kvBatchFor(h.Schema(), 10, 12)
	_, err = h.AppendRecord(ctx, rec)
	rec.Release()
	if !errors.As(err, &ue) {
		t.Fatalf("append: %v, want Unknown", err)
	}
	fs.Clear()
	ow := mustOpen(t, db, "u")
	rec = kvBatchFor(ow.Schema(), 500, 501)
	rdr, _ := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if _, err := ow.Overwrite(ctx, rdr); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	rec.Release()
	if _, err := mustOpen(t, db, "u").Retry(ctx, ue.Txn); OutcomeOf(err) != Rejected || !errors.Is(err, manifest.ErrIncompatible) {
		t.Fatalf("retry of an append over an overwrite: %v; want rejected, incompatible", err)
	}
	if got := ids(t, mustOpen(t, db, "u"), ""); !slices.Equal(got, []int64{500}) {
		t.Fatalf("rows after the overwrite and the rejected retry: %v", got)
	}
}

func columnNames(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}

// kvBatchFor builds ids [from, to) for a schema that starts with kvSchema's columns and
// may have more (left null).
func kvBatchFor(schema *arrow.Schema, from, to int64) arrow.RecordBatch {
	base := kvBatch(from, to)
	defer base.Release()
	cols := slices.Clone(base.Columns())
	for i := len(cols); i < schema.NumFields(); i++ {
		cols = append(cols, array.MakeArrayOfNull(memory.DefaultAllocator, schema.Field(i).Type, int(base.NumRows())))
	}
	out := array.NewRecordBatch(schema, cols, base.NumRows())
	for i := base.NumCols(); i < int64(len(cols)); i++ {
		cols[i].Release()
	}
	return out
}
