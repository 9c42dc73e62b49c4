package engine

import (
	"context"
	"sync"
	"time"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// HoldKindWrite is the catalog hold kind of a long-running write.
const HoldKindWrite = "write"

// DefaultWriteHoldAfter is Options.WriteHoldAfter's default.
const DefaultWriteHoldAfter = 30 * time.Second

// holdWhileWriting protects a write's data files from garbage collection while it runs.
// A write's files are unreferenced until its commit, so GC keeps them only because they
// are younger than its grace period (default 1 h). A write that runs longer than
// Options.WriteHoldAfter therefore takes a catalog hold (kind "write") backdated to the
// write's start: GC in any process deletes no file written after a live non-pin hold
// started, and expires no version at or above the write's read version. Short writes,
// the common case, cost nothing. The returned stop releases the hold, if one was taken;
// call it once the write has committed or failed.
//
// A hold that cannot be taken (etcd unreachable) is not an error: the write goes on under
// the grace period's protection alone.
func (t *Table) holdWhileWriting(ctx context.Context) (stop func()) {
	after := t.db.opts.WriteHoldAfter
	if t.db.cat == nil || after < 0 {
		return func() {}
	}
	if after == 0 {
		after = DefaultWriteHoldAfter
	}
	start := time.Now().UTC()
	read := t.m.Version
	var (
		mu      sync.Mutex
		held    *catalog.Holding
		stopped bool
	)
	hctx := context.WithoutCancel(ctx)
	timer := time.AfterFunc(after, func() {
		h, err := t.db.cat.AcquireHold(hctx, catalog.Hold{ID: "write-" + manifest.NewTransactionID(), Table: t.name,
			Kind: HoldKindWrite, Version: read, Started: start}, 0)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			_ = h.Release(hctx)
			return
		}
		held = h
	})
	return func() {
		timer.Stop()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if held != nil {
			rctx, cancel := context.WithTimeout(hctx, 10*time.Second)
			defer cancel()
			_ = held.Release(rctx) // on failure the lease expires within its TTL
		}
	}
}
