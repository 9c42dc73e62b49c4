package wal

import (
	"context"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
)

// TestFlushesCollectEveryCoveredEntry: a writer that appends and flushes 10 times leaves,
// once its background collection is done, only the last entry of its epoch (which must
// stay: for a fenced epoch it is the fence). Before the fix each flush kept the entry at
// its replay position (it was the epoch's last when the flush listed them) and no later
// flush looked at it again (each collected after its predecessor's replay position), so
// one entry per flush stayed until gc, and every read listed them all.
func TestFlushesCollectEveryCoveredEntry(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	w := open(t, s, opts())
	for i := range int64(10) {
		appendRange(t, w, 3*i, 3*i+3)
		appendRange(t, w, 3*i+3, 3*i+3) // empty: no entry
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	deadline := time.Now().Add(5 * time.Second)
	for {
		objs, err := s.List(ctx, EntriesDir("t", "0"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if n = len(objs); n <= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n != 1 {
		t.Fatalf("%d entry objects left after 10 flushes of 10 entries, want 1 (the epoch's last)", n)
	}
	if got := shardRows(t, s); len(got) != 30 {
		t.Fatalf("rows %v", got)
	}
}
