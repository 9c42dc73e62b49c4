package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// TestWithIdempotencyKeyCommitsOnce (issue 8 item 8): a keyed write run again (a new
// transaction, say after its client crashed between its commit and its publish) commits
// nothing: it returns the first write's version, publishes it, and says Duplicate. A
// write that publishes another writer's unpublished logical version lists it in
// AlsoPublished.
func TestWithIdempotencyKeyCommitsOnce(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "idem", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 2)
	// The first run commits and dies before its publish.
	off := failpoint.Enable("engine.before_publish", failpoint.Error(errors.New("process died")).Once())
	rec := kvBatch(10, 13)
	_, err = tbl.AppendRecord(ctx, rec, WithIdempotencyKey("batch-7"))
	off()
	var ue *UnknownError
	if !errors.As(err, &ue) || !ue.Committed {
		t.Fatalf("first run: %v, want committed but unpublished", err)
	}
	if got := ids(t, mustOpen(t, db, "idem"), ""); len(got) != 2 {
		t.Fatalf("published rows %v before the second run", got)
	}
	// The second run: another process, another transaction, the same key.
	again := mustOpen(t, db, "idem")
	res, err := again.AppendRecord(ctx, rec, WithIdempotencyKey("batch-7"))
	rec.Release()
	if err != nil || !res.Duplicate || res.Version != ue.Version || res.DuplicateTxn != ue.Txn.ID || !res.Published {
		t.Fatalf("second run: %+v, %v; want a published duplicate of v%d", res, err, ue.Version)
	}
	if got := ids(t, mustOpen(t, db, "idem"), ""); !slices.Equal(got, []int64{0, 1, 10, 11, 12}) {
		t.Fatalf("rows %v, want the batch once", got)
	}
	// Keys are per write: another key appends.
	rec = kvBatch(10, 13)
	res, err = again.AppendRecord(ctx, rec, WithIdempotencyKey("batch-8"))
	rec.Release()
	if err != nil || res.Duplicate {
		t.Fatalf("another key: %+v %v", res, err)
	}
	if _, err := again.AppendRecord(ctx, kvBatch(0, 1), WithIdempotencyKey(strings.Repeat("k", manifest.MaxIdempotencyKeyLen+1))); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("an over-long key: %v", err)
	}

	// A writer that dies before its publish; the next writer's publish shows it.
	off = failpoint.Enable("engine.before_publish", failpoint.Error(errors.New("process died")).Once())
	_, err = mustOpen(t, db, "idem").Delete(ctx, "id = 0")
	off()
	if !errors.As(err, &ue) || !ue.Committed {
		t.Fatalf("dying delete: %v", err)
	}
	res = appendRange(t, mustOpen(t, db, "idem"), 100, 101)
	if len(res.AlsoPublished) != 1 || res.AlsoPublished[0].Version != ue.Version || res.AlsoPublished[0].Operation != manifest.OpDelete ||
		res.AlsoPublished[0].Transaction != ue.Txn.ID {
		t.Fatalf("also published %+v, want the dead delete's v%d", res.AlsoPublished, ue.Version)
	}
	// An uncontended write publishes nobody else's version.
	if res := appendRange(t, mustOpen(t, db, "idem"), 200, 201); len(res.AlsoPublished) != 0 {
		t.Fatalf("also published %+v", res.AlsoPublished)
	}
}

// TestKeyedRerunFailingBeforeCommitIsDuplicate (found by the chaos test, SHALE_SLOW=1
// SHALE_SEED=1796112590368233046): a keyed write whose key committed already, run again
// and failing before its commit loop (here its first-write recovery hook fails), is the
// Duplicate of the first write, not Rejected: a client trusting Rejected would conclude
// the write is not in the table.
func TestKeyedRerunFailingBeforeCommitIsDuplicate(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDBOn(t, s)
	tbl, err := db.CreateTable(ctx, "k", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := kvBatch(1, 4)
	defer rec.Release()
	first, err := tbl.AppendRecord(ctx, rec, WithIdempotencyKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	hookErr := errors.New("transient store error reading a sidecar's version")
	db2 := openDBWith(t, s, Options{BeforeFirstWrite: func(context.Context, store.Store, *catalog.Catalog, string) error { return hookErr }})
	res, err := mustOpen(t, db2, "k").AppendRecord(ctx, rec, WithIdempotencyKey("k"))
	if err != nil || !res.Duplicate || res.Version != first.Version {
		t.Fatalf("run again under a committed key, failing before its commit: %+v, %v; want the Duplicate of v%d", res, err, first.Version)
	}
	// Unkeyed, the same failure is Rejected.
	if _, err := mustOpen(t, db2, "k").AppendRecord(ctx, rec); OutcomeOf(err) != Rejected || !errors.Is(err, hookErr) {
		t.Fatalf("unkeyed: %v", err)
	}
}

// TestUnpublishedOverwriteDoesNotBlockAppends (found by the chaos test, SHALE_SLOW=1
// SHALE_SEED=1796113381432508863): an overwrite committed by a writer that died before
// publishing it must not make every later append and overwrite conflict with it forever.
// Appends and overwrites plan on HEAD, as deletes and updates do; the first write after
// it publishes it and says so.
func TestUnpublishedOverwriteDoesNotBlockAppends(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "ow", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 1, 4)
	off := failpoint.Enable("engine.before_publish", failpoint.Error(errors.New("process died")).Once())
	rec := kvBatch(10, 12)
	rdr, _ := array.NewRecordReader(kvSchema, []arrow.RecordBatch{rec})
	_, err = tbl.Overwrite(ctx, rdr)
	rdr.Release()
	rec.Release()
	off()
	var ue *UnknownError
	if !errors.As(err, &ue) || !ue.Committed {
		t.Fatalf("overwrite: %v, want committed but not published", err)
	}
	for i := int64(0); i < 3; i++ {
		h := mustOpen(t, db, "ow")
		res := appendRange(t, h, 20+i, 21+i)
		if i == 0 && (len(res.AlsoPublished) != 1 || res.AlsoPublished[0].Version != ue.Version) {
			t.Fatalf("append: %+v, want the overwrite v%d published with it", res, ue.Version)
		}
	}
	rec = kvBatch(30, 31)
	rdr, _ = array.NewRecordReader(kvSchema, []arrow.RecordBatch{rec})
	if _, err := mustOpen(t, db, "ow").Overwrite(ctx, rdr); err != nil {
		t.Fatalf("overwrite on a fresh handle: %v", err)
	}
	rdr.Release()
	rec.Release()
	if got := ids(t, mustOpen(t, db, "ow"), ""); !slices.Equal(got, []int64{30}) {
		t.Fatalf("rows %v", got)
	}
}

// readsFail is a store whose reads fail while fail is set (writes still work).
type readsFail struct {
	store.Store
	fail atomic.Bool
}

var errReadsDown = errors.New("store reads down")

func (s *readsFail) Get(ctx context.Context, key string) ([]byte, error) {
	if s.fail.Load() {
		return nil, errReadsDown
	}
	return s.Store.Get(ctx, key)
}

func (s *readsFail) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if s.fail.Load() {
		return nil, errReadsDown
	}
	return s.Store.GetRange(ctx, key, off, n)
}

func (s *readsFail) List(ctx context.Context, prefix string, limit int) ([]store.ObjectInfo, error) {
	if s.fail.Load() {
		return nil, errReadsDown
	}
	return s.Store.List(ctx, prefix, limit)
}

// TestKeyedWriteFailingBeforeCommitRetryCommitsNothing (found by the chaos test, SHALE_SEED=
// 1796149841465748419: an update reported committed left its row unchanged): a keyed
// update that fails while planning (its store reads fail) and cannot look its key up is
// Unknown; Table.Retry of its transaction must not commit the empty, never-planned
// operation (an empty update "committed" with no effect; an empty overwrite would truncate
// the table). Retry decides by the key alone: ErrNotApplied (Rejected) while the key has
// not committed, and the first run's version as a Duplicate when it has.
func TestKeyedWriteFailingBeforeCommitRetryCommitsNothing(t *testing.T) {
	ctx := context.Background()
	s := &readsFail{Store: storetest.Local(t)}
	db := openDBOn(t, s)
	tbl, err := db.CreateTable(ctx, "k", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 3)
	before := mustOpen(t, db, "k").Version()

	for _, write := range []struct {
		name string
		do   func(*Table) (CommitResult, error)
	}{
		{"update", func(t *Table) (CommitResult, error) {
			return t.Update(ctx, map[string]string{"id": "id + 100"}, "id = 1", WithIdempotencyKey("u"))
		}},
		{"overwrite", func(t *Table) (CommitResult, error) {
			rdr, err := array.NewRecordReader(kvSchema, []arrow.RecordBatch{kvBatch(50, 51)})
			if err != nil {
				panic(err)
			}
			defer rdr.Release()
			return t.Overwrite(ctx, rdr, WithIdempotencyKey("o"))
		}},
	} {
		h := mustOpen(t, db, "k")
		s.fail.Store(true)
		_, err := write.do(h)
		s.fail.Store(false)
		var ue *UnknownError
		if !errors.As(err, &ue) {
			t.Fatalf("%s with reads failing: %v, want Unknown (the key could not be looked up)", write.name, err)
		}
		if ue.Txn.Op.Kind != "" {
			t.Fatalf("%s: Unknown carries a committable %s transaction, want the key alone", write.name, ue.Txn.Op.Kind)
		}
		res, err := mustOpen(t, db, "k").Retry(ctx, ue.Txn)
		if !errors.Is(err, ErrNotApplied) || OutcomeOf(err) != Rejected || res.Version != 0 {
			t.Fatalf("%s: Retry = %+v, %v; want ErrNotApplied", write.name, res, err)
		}
		after := mustOpen(t, db, "k")
		if after.Version() != before {
			t.Fatalf("%s: Retry committed version %d", write.name, after.Version())
		}
		if got := ids(t, after, ""); !slices.Equal(got, []int64{0, 1, 2}) {
			t.Fatalf("%s: rows %v", write.name, got)
		}
	}

	// The key committed meanwhile (the write run again): Retry finds it.
	first, err := mustOpen(t, db, "k").Update(ctx, map[string]string{"id": "id + 100"}, "id = 1", WithIdempotencyKey("u2"))
	if err != nil {
		t.Fatal(err)
	}
	keyOnly := manifest.Transaction{ID: manifest.NewTransactionID(), IdempotencyKey: "u2"}
	res, err := mustOpen(t, db, "k").Retry(ctx, keyOnly)
	if err != nil || !res.Duplicate || res.Version != first.Version {
		t.Fatalf("Retry of a key that committed: %+v, %v; want the Duplicate of v%d", res, err, first.Version)
	}
	if _, err := mustOpen(t, db, "k").Retry(ctx, manifest.Transaction{ID: manifest.NewTransactionID()}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Retry of an empty transaction without a key: %v", err)
	}
}
