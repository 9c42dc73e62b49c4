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
// conflict, and the engine re-commits the same append on top of HEAD.
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
	// The append's first attempt meets a tombstone (a retryable conflict: nothing
	// landed); the engine re-commits the same files on top of HEAD.
	res, err := appendOne(stale, 9000)
	if err != nil || res.Attempts < 1 || res.Version != 8 {
		t.Fatalf("append from an expired read version: %+v, %v; want committed as version 8 on top of HEAD", res, err)
	}
	vs, err := manifest.Versions(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs[:len(vs)-2] {
		if _, err := manifest.Load(ctx, s, "t", v); !errors.Is(err, manifest.ErrVersionExpired) {
			t.Fatalf("version %d after the stale append: %v; want it still expired (no commit into the hole)", v, err)
		}
	}
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got := scanRows(t, other)
	if len(got) != 61 || !slices.Contains(got, "9000|stale") {
		t.Fatalf("after the retried append: %d rows at v%d, want 61 with the stale writer's row", len(got), other.Version())
	}
}
