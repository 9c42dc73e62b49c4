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
	return t.startWriteHold(ctx).stop
}

// writeHold is the lazy hold of one write (see holdWhileWriting): armed at the write's
// start, taken in etcd only once the write has run for Options.WriteHoldAfter, released
// by stop. A multi-table write (PrepareAppend, PrepareDelete) keeps its writeHold from
// the prepare until DB.Commit returns or Write.Release.
type writeHold struct {
	ctx   context.Context // without cancel: the hold outlives the prepare's context
	timer *time.Timer

	mu      sync.Mutex
	held    *catalog.Holding
	stopped bool
}

// startWriteHold arms the lazy hold of a write starting now at the handle's version.
// It returns nil (a valid writeHold that does nothing) without a catalog or when
// Options.WriteHoldAfter is negative.
func (t *Table) startWriteHold(ctx context.Context) *writeHold {
	after := t.db.opts.WriteHoldAfter
	if t.db.cat == nil || after < 0 {
		return nil
	}
	if after == 0 {
		after = DefaultWriteHoldAfter
	}
	cat, name := t.db.cat, t.name
	hold := catalog.Hold{ID: "write-" + manifest.NewTransactionID(), Table: name, Kind: HoldKindWrite,
		Version: t.m.Version, Started: time.Now().UTC()}
	h := &writeHold{ctx: context.WithoutCancel(ctx)}
	h.timer = time.AfterFunc(after, func() {
		// Under mu for the whole acquisition, so that stop, once it returns, leaves no
		// hold behind: it either runs first (and this does nothing) or waits for this.
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stopped {
			return
		}
		actx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		defer cancel()
		held, err := cat.AcquireHold(actx, hold, 0)
		if err != nil {
			return
		}
		h.held = held
	})
	return h
}

// stop releases the hold if it was taken and disarms it otherwise. Safe to call more than
// once, concurrently, and on nil.
func (h *writeHold) stop() {
	if h == nil {
		return
	}
	h.timer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.held != nil {
		rctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		defer cancel()
		_ = h.held.Release(rctx) // on failure the lease expires within its TTL
		h.held = nil
	}
}
