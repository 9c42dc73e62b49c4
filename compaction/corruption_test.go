package compaction

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// TestCompactionOfMistypedDataFileIsCorruptNotPanic: compacting a version whose data file
// stores field id 0 (int64 "id") as utf8 fails with a corruption error naming the table,
// the version and the file, and commits nothing; the rewrite's read-ahead goroutine does
// not panic.
func TestCompactionOfMistypedDataFileIsCorruptNotPanic(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Mem(t))
	schema, batches := intBatches(2, 50)
	tbl := appendEach(t, db, "t", schema, batches)

	bad := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, schema.Field(1)}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, bad)
	for i := range 50 {
		b.Field(0).(*array.StringBuilder).Append("x")
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("y", i%3))
	}
	rec := b.NewRecordBatch()
	b.Release()
	key, v := enginetest.CommitDataFile(t, db, "t", rec, tbl.Manifest().Schema.FieldIDs)
	rec.Release()

	_, err := Compact(ctx, db, "t", Options{})
	if !errors.Is(err, fragment.ErrCorrupt) || !errors.Is(err, manifest.ErrCorrupt) {
		t.Fatalf("compact: %v, want an error wrapping ErrCorrupt", err)
	}
	var oe *manifest.ObjectError
	if !errors.As(err, &oe) || oe.Table != "t" || oe.Version != v || oe.Key != key {
		t.Fatalf("compact: %v, want a *manifest.ObjectError naming table t version %d object %s", err, v, key)
	}
	if head, err := manifest.Head(ctx, db.Store(), "t"); err != nil || head != v {
		t.Fatalf("HEAD %d (%v), want %d: nothing committed", head, err, v)
	}
}
