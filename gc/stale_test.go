package gc

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

func appendOne(tbl *engine.Table, id int64) (engine.CommitResult, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(id)
	b.Field(1).(*array.StringBuilder).Append("stale")
	rec := b.NewRecordBatch()
	defer rec.Release()
	return tbl.AppendRecord(context.Background(), rec)
}

// TestWriterWithExpiredReadVersion: a writer holding an old handle (read version 2)
// appends after GC expired every version between 2 and HEAD. Its commit must not land
// in the expired range (a deleted manifest would let put-if-absent re-create version 3
// below HEAD: a "successful" write no reader sees); GC's tombstones make it a retryable
// conflict, and after a Refresh the same append commits on top of HEAD.
func TestWriterWithExpiredReadVersion(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 1, 10) // v1 create, v2 append
	stale, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		appendRows(t, other, int64(100*(i+1)), 10)
	}
	if _, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1}); err != nil {
		t.Fatal(err)
	}
	res, err := appendOne(stale, 9000)
	if !errors.Is(err, manifest.ErrRetryable) {
		t.Fatalf("append from an expired read version: %+v, %v; want a retryable conflict", res, err)
	}
	t.Logf("stale writer: %v", err)
	if err := stale.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := appendOne(stale, 9000); err != nil {
		t.Fatalf("append after refresh: %v", err)
	}
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got := scanRows(t, other)
	if len(got) != 61 || !slices.Contains(got, "9000|stale") {
		t.Fatalf("after the retried append: %d rows at v%d, want 61 with the stale writer's row", len(got), other.Version())
	}
}
