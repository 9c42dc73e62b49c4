package wal

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/store"
)

// ShardView is a consistent read of one shard from storage: its newest manifest and the
// entries above its replay position (fences and other incarnations' entries left out).
// Every row acknowledged before the read began is in Manifest's generations (or merged
// into the base table) or in Entries, and none in both.
type ShardView struct {
	Manifest *ShardManifest // the newest shard manifest
	Entries  []*Entry       // in position order; release with Release
	Rows     int64          // rows in Entries
	Bytes    int64          // bytes of the entry objects read
	Attempts int            // reads it took (a flush that moved the manifest meanwhile forces another)
}

// Release releases the entries' records.
func (v *ShardView) Release() {
	for _, e := range v.Entries {
		e.Release()
	}
	v.Entries = nil
}

// maxViewAttempts bounds the reads ReadShard makes while flushes keep moving the manifest.
const maxViewAttempts = 8

// ErrBusy: flushes moved the shard manifest during every one of ReadShard's attempts.
var ErrBusy = errors.New("WAL shard manifest kept moving while it was read")

// ReadShard reads shard from storage: its newest manifest, then every entry above the
// manifest's replay position, then the newest manifest's version again; if a flush moved it
// meanwhile (the entries it covers may have been collected, or flushed into a generation the
// first read did not list) it reads again. Costs per attempt: two LISTs of the manifests,
// one GET of the manifest, one LIST of the entries and a GET per entry above the replay
// position. Errors: ErrNoShard (no writer ever claimed it), ErrCorrupt or ErrFormatTooNew
// naming the object (never skipped), ErrBusy, store errors.
func ReadShard(ctx context.Context, s store.Store, table, shard string, mem memory.Allocator) (*ShardView, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	for attempt := 1; attempt <= maxViewAttempts; attempt++ {
		m, err := LoadShard(ctx, s, table, shard)
		if err != nil {
			return nil, err
		}
		v := &ShardView{Manifest: m, Attempts: attempt}
		ps, err := listEntries(ctx, s, table, shard, m.Replay, 0)
		if err != nil {
			return nil, err
		}
		moved := false
		for _, p := range ps {
			e, err := readEntry(ctx, s, table, shard, p, mem)
			if errors.Is(err, store.ErrNotFound) {
				moved = true // collected after a flush covered it
				break
			}
			if err != nil {
				v.Release()
				return nil, err
			}
			if e.Fence || (m.Incarnation != "" && e.Incarnation != "" && e.Incarnation != m.Incarnation) || m.Epoch < e.Position.Epoch {
				// An entry of an epoch above the manifest's was written after a claim the
				// manifest read predates: the check below reads again.
				moved = moved || m.Epoch < e.Position.Epoch
				e.Release()
				continue
			}
			v.Entries = append(v.Entries, e)
			v.Rows += e.Rows
			v.Bytes += e.Bytes
		}
		if !moved {
			latest, err := LatestVersion(ctx, s, table, shard)
			if err != nil {
				v.Release()
				return nil, err
			}
			if latest == m.Version {
				return v, nil
			}
		}
		v.Release()
	}
	return nil, fmt.Errorf("table %q WAL shard %s: %w (%d attempts)", table, shard, ErrBusy, maxViewAttempts)
}

// ListEntries returns the positions of shard's entries after from, in position order (one
// LIST of the entries; keys that are not entry names are left out). For verification and
// garbage collection. Errors: store errors.
func ListEntries(ctx context.Context, s store.Store, table, shard string, from Position) ([]Position, error) {
	return listEntries(ctx, s, table, shard, from, 0)
}

// ReadEntry reads and decodes the entry at p (one GET): its checksum, trailer, metadata
// (which must name p) and record batches. Release it when done. Errors: an *ObjectError
// naming the key, wrapping ErrCorrupt or store.ErrNotFound, store errors.
func ReadEntry(ctx context.Context, s store.Store, table, shard string, p Position, mem memory.Allocator) (*Entry, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return readEntry(ctx, s, table, shard, p, mem)
}
