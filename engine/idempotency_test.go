package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
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
