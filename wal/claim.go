package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/store"
)

var (
	seamClaimed     = failpoint.Seam("wal.claimed")      // after the claim's shard manifest landed, before any fence
	seamFenced      = failpoint.Seam("wal.fenced")       // after the fence entries, before replay
	seamReplayEntry = failpoint.Seam("wal.replay_entry") // before each entry replay reads
)

// maxClaimAttempts bounds the claims lost to other claimants in one Open.
const maxClaimAttempts = 64

// claim puts the next shard manifest with the writer epoch one above the newest one's
// (a new shard starts at version 1, epoch 1). A claim lost to another claimant reloads and
// claims again above it, so the newest claimant wins. A shard manifest of another table
// incarnation (a dropped table's) is started over: versions and epochs continue, the
// generations, replay position and fencing of the old incarnation do not (its entries are
// never replayed: replay skips other incarnations).
func claim(ctx context.Context, s store.Store, table, shard, incarnation string) (*ShardManifest, error) {
	for range maxClaimAttempts {
		latest, err := LoadShard(ctx, s, table, shard)
		var next *ShardManifest
		switch {
		case errors.Is(err, ErrNoShard):
			next = &ShardManifest{Table: table, Shard: shard, Incarnation: incarnation, Version: 1, Epoch: 1,
				NextGeneration: 1, Status: StatusActive}
		case err != nil:
			return nil, err
		case incarnation != "" && latest.Incarnation != incarnation:
			next = &ShardManifest{Table: table, Shard: shard, Incarnation: incarnation, Version: latest.Version + 1,
				Epoch: latest.Epoch + 1, FencedThrough: latest.Epoch, Replay: Position{Epoch: latest.Epoch + 1},
				NextGeneration: 1, Status: StatusActive}
		default:
			if latest.Status != StatusActive {
				return nil, &ObjectError{Table: table, Shard: shard, Key: latest.Key, Err: fmt.Errorf("shard status %q refuses claims", latest.Status)}
			}
			next = latest.clone()
			next.Version++
			next.Epoch++
		}
		err = putShardManifest(ctx, s, next)
		if errors.Is(err, store.ErrPreconditionFailed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return next, nil
	}
	return nil, fmt.Errorf("table %q WAL shard %s: %d claims in a row lost to other writers", table, shard, maxClaimAttempts)
}

// fence puts a fence entry after the last entry of every epoch a writer might still be
// writing: those above m.FencedThrough and below m.Epoch. After it, every entry such a
// writer will ever store is below its fence (see the package doc).
func fence(ctx context.Context, s store.Store, m *ShardManifest, mem memory.Allocator) error {
	empty := arrow.NewSchema(nil, nil)
	for d := m.FencedThrough + 1; d < m.Epoch; d++ {
		objs, err := s.List(ctx, EpochDir(m.Table, m.Shard, d), 0)
		if err != nil {
			return fmt.Errorf("table %q WAL shard %s: list entries of epoch %d: %w", m.Table, m.Shard, d, err)
		}
		var tail uint64
		if m.Replay.Epoch == d {
			tail = m.Replay.Pos // covered entries may have been collected (never the last)
		}
		for _, o := range objs {
			if p, err := ParseEntryKey(m.Table, m.Shard, o.Key); err == nil && p.Pos > tail {
				tail = p.Pos
			}
		}
		for p := tail + 1; ; p++ {
			pos := Position{Epoch: d, Pos: p}
			b, err := encodeEntry(empty, nil, nil, entryHeader{pos: pos, fence: true, fencedBy: m.Epoch, incarnation: m.Incarnation}, mem)
			if err != nil {
				return err
			}
			err = s.PutIfAbsent(ctx, EntryKey(m.Table, m.Shard, pos), b)
			if err == nil {
				break
			}
			if !errors.Is(err, store.ErrPreconditionFailed) {
				return &ObjectError{Table: m.Table, Shard: m.Shard, Key: EntryKey(m.Table, m.Shard, pos), Err: fmt.Errorf("fence epoch %d: %w", d, err)}
			}
			if p-tail > 1<<20 {
				return fmt.Errorf("table %q WAL shard %s: epoch %d's writer keeps winning positions past %d", m.Table, m.Shard, d, p)
			}
			// The fenced writer won this position first: its entry is below the fence and
			// is replayed.
		}
	}
	return nil
}

// listEntries lists shard's entries after from (in position order), up to but excluding
// epoch below (0: no bound).
func listEntries(ctx context.Context, s store.Store, table, shard string, from Position, below uint64) ([]Position, error) {
	objs, err := s.List(ctx, EntriesDir(table, shard), 0)
	if err != nil {
		return nil, fmt.Errorf("table %q WAL shard %s: list entries: %w", table, shard, err)
	}
	var out []Position
	for _, o := range objs {
		p, err := ParseEntryKey(table, shard, o.Key)
		if err != nil {
			continue // not an entry (a temp name): verify reports it
		}
		if from.Less(p) && (below == 0 || p.Epoch < below) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Position) int {
		switch {
		case a.Less(b):
			return -1
		case b.Less(a):
			return 1
		}
		return 0
	})
	return out, nil
}

// readEntry reads and decodes the entry at p.
func readEntry(ctx context.Context, s store.Store, table, shard string, p Position, mem memory.Allocator) (*Entry, error) {
	key := EntryKey(table, shard, p)
	b, err := s.Get(ctx, key)
	if err != nil {
		return nil, &ObjectError{Table: table, Shard: shard, Key: key, Err: err}
	}
	return decodeEntry(table, shard, key, p, b, mem)
}

// replay reads every entry after m.Replay written by an earlier epoch, in order, skipping
// fences and entries of another incarnation, and hands their records to insert. A
// corrupt or unreadable entry stops it with an error naming the object: nothing is
// skipped silently. Replay writes nothing, so a crash during it is safe to replay again.
func replay(ctx context.Context, s store.Store, m *ShardManifest, mem memory.Allocator, insert func(e *Entry) error) error {
	ps, err := listEntries(ctx, s, m.Table, m.Shard, m.Replay, m.Epoch)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := seamReplayEntry.Inject(ctx); err != nil {
			return err
		}
		e, err := readEntry(ctx, s, m.Table, m.Shard, p, mem)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if e.Fence || (m.Incarnation != "" && e.Incarnation != "" && e.Incarnation != m.Incarnation) {
			e.Release()
			continue
		}
		err = insert(e)
		e.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
