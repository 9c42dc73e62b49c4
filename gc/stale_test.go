package gc

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/storetest"
)

func appendOne(tbl *engine.Table, id int64) (engine.CommitResult, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(id)
	b.Field(1).(*array.StringBuilder).Append("row-9000")
	rec := b.NewRecordBatch()
	defer rec.Release()
	return tbl.AppendRecord(context.Background(), rec)
}

// TestWriterWithExpiredReadVersion: a writer holding an old handle (read version 2)
// appends after GC expired every version between 2 and HEAD. The commit loop builds
// version 3 on its in-memory read manifest and creates _versions/<3> with
// put-if-absent, which succeeds because GC deleted that manifest: the append reports
// success but its rows are in a version below HEAD that no reader sees.
//
// The write must instead fail with a clear retryable error (or commit above HEAD). That
// needs a change in manifest.Commit (see the gc report); until it lands this test is
// skipped unless SHALE_GC_EXPIRED_WRITER=1.
func TestWriterWithExpiredReadVersion(t *testing.T) {
	if os.Getenv("SHALE_GC_EXPIRED_WRITER") != "1" {
		t.Skip("known gap (manifest.Commit re-creates an expired version number); set SHALE_GC_EXPIRED_WRITER=1 to run")
	}
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
	want := len(scanRows(t, other)) + 1
	res, err := appendOne(stale, 9000)
	if err != nil {
		t.Logf("stale writer: %v", err) // a clear error is the acceptable outcome
		return
	}
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got := scanRows(t, other)
	if !slices.Contains(got, "9000|row-9000") {
		t.Fatalf("the stale writer's append reported success (version %d, published %v) but its row is not in the published table (HEAD v%d, %d rows, want %d)",
			res.Version, res.Published, other.Version(), len(got), want)
	}
}
