package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// DefaultFencePublishWait is how long Fence waits for the versions below its abort
// version to be published by their own writers before leaving the abort unpublished.
const DefaultFencePublishWait = 10 * time.Second

// FenceResult is what Fence committed.
type FenceResult struct {
	// Version is the abort version.
	Version uint64
	// Published is true when the catalog pointer is at or past Version afterwards (false
	// without a catalog, or when versions below it stayed unpublished for the whole wait:
	// the next write to the table publishes the abort with them).
	Published bool
}

// Fence commits an abort version (manifest.OpAbort) naming the transactions ids, on top
// of read, which must be the newest version the caller examined (as LoadCounted returns
// it): every version committed after read is checked against the abort, so if one of ids
// landed after the caller looked, the abort fails (manifest.ErrIncompatible) instead of
// being committed past it. Once Fence returns, none of ids can ever commit (its commit
// loop meets the abort, as a manifest or as a tombstone), so their files may be deleted:
// this is what fences every deletion by garbage collection and recovery (invariant 15).
//
// The abort is published only by moving the pointer from the version just below it: Fence
// waits (up to wait; 0 means DefaultFencePublishWait) for the versions below the abort to
// be published by their own writers, so it never publishes another writer's unpublished
// logical work (DESIGN §11). groups resolves multi-table groups met on the way (nil: none).
// Errors: *manifest.ConflictError wrapping ErrIncompatible when a named transaction
// committed first, commit and store errors; a failed publish is not an error (the fence
// holds whether or not it is published) and leaves Published false.
func Fence(ctx context.Context, s store.Store, cat *catalog.Catalog, read *manifest.Manifest, ids []string, groups manifest.GroupResolver, wait time.Duration) (FenceResult, error) {
	ids = slices.Sorted(slices.Values(ids))
	ids = slices.Compact(ids)
	txn := manifest.NewTransaction(read.Version, manifest.Operation{Kind: manifest.OpAbort, Aborted: ids})
	m, _, err := manifest.Commit(ctx, s, read.Table, read, txn, manifest.CommitOptions{Groups: groups})
	if err != nil {
		return FenceResult{}, err
	}
	res := FenceResult{Version: m.Version}
	if cat == nil || m.Version <= 1 {
		return res, nil
	}
	if wait <= 0 {
		wait = DefaultFencePublishWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if _, err := cat.WaitAtLeast(wctx, read.Table, m.Version-1); err != nil {
		return res, nil // left for the next write (or repair) to publish with its neighbours
	}
	if _, err := cat.FastForwardExisting(wctx, read.Table, engine.PointerOf(m, m.Checksum())); err == nil {
		res.Published = true
	} else if !errors.Is(err, catalog.ErrNoPointer) && ctx.Err() != nil {
		return res, fmt.Errorf("table %q: publish abort version %d: %w", read.Table, m.Version, ctx.Err())
	}
	return res, nil
}
