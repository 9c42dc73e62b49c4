package wal

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
)

// TestFlushInFlightWhenAFencedWriterCloses (found by internal/waltest's racing claims): a
// flush is in flight (held after writing its generation's files) when another writer
// claims the shard; the first writer learns of the fence at its next append and is closed
// while the flush still runs. Close must wait for the flush before releasing the memtable
// the flush is writing, and the flush's collision must be reported as ErrFenced: before
// the fix Close returned at once (the writer's error was already sticky, so its own flush
// returned early) and cancelled the writer's context, and the flush's fence check ran on
// that cancelled context and reported a corrupt shard manifest instead.
func TestFlushInFlightWhenAFencedWriterCloses(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	w, err := Open(ctx, s, "t", "0", opts())
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, w, 0, 3)
	reached, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(failpoint.Enable("wal.flush_files", failpoint.Call(func(context.Context) error {
		close(reached)
		<-release
		return nil
	}).Once()))
	flushed := make(chan error, 1)
	go func() { flushed <- w.Flush(ctx) }()
	<-reached
	w2 := open(t, s, opts()) // claims the shard, fences w
	r := batch(3, 4)
	_, err = w.Append(ctx, r)
	r.Release()
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("append after the claim: %v, want ErrFenced", err)
	}
	closed := make(chan struct{})
	go func() { _ = w.Close(ctx); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a flush of the writer was in flight (it released the memtable under the flush)")
	case <-time.After(200 * time.Millisecond): // Close is waiting for the flush, as it must
	}
	close(release)
	if err := <-flushed; !errors.Is(err, ErrFenced) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("the fenced writer's flush: %v, want ErrFenced (and not ErrCorrupt)", err)
	}
	<-closed
	if err := w2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("rows %v, want 0..2 once", got)
	}
}
