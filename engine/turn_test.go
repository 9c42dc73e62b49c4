package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/turn"
	"github.com/shale-db/shale/store"
)

// TestStuckTurnHolderDoesNotStopWriters: on a local store, writers that met each other
// take the table's turn for their commits; a holder that never lets go (a paused process)
// costs them a bounded wait, and every write commits exactly once all the same.
func TestStuckTurnHolderDoesNotStopWriters(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db := openDB(t, "file://"+dir)
	a, err := db.CreateTable(ctx, "t", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, a, 0, 10)
	appendRange(t, b, 10, 20)
	// Another process holds the turn and never gives it back.
	stuck := turn.New(filepath.Join(dir, store.TempDir, "turns"))
	release, had := stuck.Take(ctx, "t")
	if !had {
		t.Fatal("the test could not take the turn")
	}
	defer release()
	start := time.Now()
	for i := range 3 {
		b.contended = true // as after meeting other writers: the commit takes the turn
		rec := kvBatch(int64(20+10*i), int64(30+10*i))
		res, err := b.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if res.Attempts != 1 {
			t.Fatalf("append %d: %d attempts", i, res.Attempts)
		}
	}
	// The first append waited for the turn (once), the others did not wait again.
	if d := time.Since(start); d < turn.DefaultWait || d > 20*turn.DefaultWait {
		t.Fatalf("three appends past a stuck turn took %v, want one wait of %v", d, turn.DefaultWait)
	}
	if got := ids(t, b, "true"); len(got) != 50 {
		t.Fatalf("%d rows, want 50", len(got))
	}
}
