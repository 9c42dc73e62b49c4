package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/wal"
)

// TestDropKeepsShardManifestsSoAStaleWriterCannotTakeOverTheNextIncarnation: a WAL writer
// of a table still open across a drop and a CreateTable of the same name is fenced by the
// new incarnation's claim, and the rows acknowledged to the new incarnation's writer stay
// readable. DropTable keeps the shard manifests (as it keeps the drop marker): had it
// deleted them, the new incarnation's claim would start the shard over at version 1,
// epoch 1, the stale writer's next flush would land in a version number the drop freed,
// and readers and later claims would take the shard for the dropped incarnation's,
// hiding (and at the next claim, losing) the new incarnation's acknowledged rows.
func TestDropKeepsShardManifestsSoAStaleWriterCannotTakeOverTheNextIncarnation(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDBOn(t, s)
	old, err := walTable(t, db, "w", "1", 0).WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	walAppend(t, old, 0, 5)
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTable(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if objs, err := s.List(ctx, wal.ManifestDir("w", "0"), 0); err != nil || len(objs) != 2 {
		t.Fatalf("after the drop, %d shard manifests are left (%v), want both kept", len(objs), err)
	}
	w, err := walTable(t, db, "w", "1", 0).WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	walAppend(t, w, 100, 103) // acknowledged to the new incarnation, in its log

	// The dropped incarnation's writer goes on: its entry lands in its own epoch's
	// directory (read by nobody), its flush is fenced.
	rec := kvBatch(5, 7)
	_, _ = old.Append(ctx, rec)
	rec.Release()
	if err := old.Flush(ctx); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("the dropped incarnation's writer flushed after the table was created again: %v", err)
	}
	if got := sorted(ids(t, mustOpen(t, db, "w"), "")); !slices.Equal(got, seq(100, 103)) {
		t.Fatalf("the new incarnation reads %v, want %v", got, seq(100, 103))
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("the new incarnation's writer: %v", err)
	}
	walAppend(t, w, 103, 104)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sorted(ids(t, mustOpen(t, openDBOn(t, s), "w"), "")); !slices.Equal(got, seq(100, 104)) {
		t.Fatalf("another process reads %v, want %v", got, seq(100, 104))
	}
}
