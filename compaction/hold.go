package compaction

import (
	"context"
	"fmt"
	"time"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// HoldKind is the catalog hold kind of a running compaction.
const HoldKind = "compaction"

// runHold is a run's low watermark in the catalog (catalog.AcquireHold): while it is
// live, GC in any process keeps the version the run reads and everything above it, and
// keeps the files written since the run started; recovery treats the operation as alive
// (catalog.HoldExists(table, Intent.ID)). A nil *runHold (no catalog) does nothing.
type runHold struct {
	h *catalog.Holding
}

type holdCtxKey struct{}

// acquireHold takes the run's hold before the run reads its version. Its id is the
// run's operation id (in.ID) when the run has a sidecar, else a fresh one. The first
// watermark is the published version the run saw at its start (0 without one: keep
// everything) and moves up to the read version once planned: GC reads the pointer before
// the holds, so whatever version the run then reads is at or above what GC keeps.
// Errors: catalog errors, naming the table.
func (e *Executor) acquireHold(ctx context.Context, table string, in *Intent) (*runHold, error) {
	if e.Catalog == nil {
		return nil, nil
	}
	if err := manifest.ValidateTableName(table); err != nil {
		return nil, err
	}
	h := catalog.Hold{Table: table, Kind: HoldKind}
	if in != nil {
		h.ID, h.Version = in.ID, in.PublishedAtStart
	} else {
		h.ID = manifest.NewTransactionID()
	}
	hd, err := e.Catalog.AcquireHold(ctx, h, 0)
	if err != nil {
		return nil, fmt.Errorf("table %q: compaction %s: acquire hold: %w", table, h.ID, err)
	}
	return &runHold{h: hd}, nil
}

// move sets the watermark to the version an attempt reads (a no-op when unchanged).
// Errors: catalog.ErrHoldLost (the lease expired: GC may have expired the version),
// catalog errors.
func (r *runHold) move(ctx context.Context, v uint64) error {
	if r == nil || r.h.Hold().Version == v {
		return r.lost()
	}
	if err := r.h.Move(ctx, v); err != nil {
		h := r.h.Hold()
		return fmt.Errorf("table %q: compaction %s: move hold to version %d: %w", h.Table, h.ID, v, err)
	}
	return nil
}

// lost returns catalog.ErrHoldLost once the hold's lease is gone: nothing then stops GC
// from expiring the read version, so the run must not commit on it.
func (r *runHold) lost() error {
	if r == nil {
		return nil
	}
	select {
	case <-r.h.Lost():
		h := r.h.Hold()
		return fmt.Errorf("table %q: compaction %s: hold at version %d: %w", h.Table, h.ID, h.Version, catalog.ErrHoldLost)
	default:
		return nil
	}
}

// release drops the hold (also after an error or a cancelled context).
func (r *runHold) release(ctx context.Context) {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = r.h.Release(ctx) // on failure the lease expires within its TTL
}

func withHold(ctx context.Context, r *runHold) context.Context {
	return context.WithValue(ctx, holdCtxKey{}, r)
}

// holdLost is lost() of the run's hold carried by ctx (nil when none).
func holdLost(ctx context.Context) error {
	return holdOf(ctx).lost()
}

// bound returns ctx cancelled, with a cause wrapping catalog.ErrHoldLost, as soon as the
// hold's lease is lost. The run commits under it: once the lease is gone, recovery in
// another process may roll the run back (delete its files), so a commit still in flight
// is abandoned rather than left to land later. (A request already sent can still land;
// the store offers no fence against that. The window is one request's latency after a
// lease that went unrenewed for its whole TTL.)
func (r *runHold) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if r == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-r.h.Lost():
			cancel(r.lost())
		case <-stop:
		}
	}()
	return ctx, func() { close(stop); cancel(nil) }
}

// holdOf is the run's hold carried by ctx (nil when none).
func holdOf(ctx context.Context) *runHold {
	r, _ := ctx.Value(holdCtxKey{}).(*runHold)
	return r
}
