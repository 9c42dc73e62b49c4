package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/wal"
)

// HoldKindMerge is the catalog hold kind of a running WAL merge.
const HoldKindMerge = "merge_wal"

var (
	seamMergePlanned   = failpoint.Seam("engine.merge_planned")   // a merge armed its sidecar, before its commit
	seamMergeCommitted = failpoint.Seam("engine.merge_committed") // a merge committed and published, before its sidecar is removed
)

// MergeIntent is what a WAL merge records in its recovery sidecar before it commits: the
// version it may commit carries TxnID. A merge writes no object (the generations' data
// files become base fragments as they are), so recovery only rolls a landed merge forward.
type MergeIntent struct {
	OperationID string    // the merge's id (a ULID); also its catalog hold id, so recovery skips a live merge
	Table       string    // the table
	Created     time.Time // when the merge began (UTC)
	TxnID       string    // the pre-minted id of the transaction it may commit
	ReadVersion uint64    // the version it plans against
}

// MergeSidecars stores the recovery sidecars of WAL merges (recovery implements it).
type MergeSidecars interface {
	// Arm durably records in before the merge commits; an error fails the merge.
	Arm(ctx context.Context, in *MergeIntent) error
	// Disarm removes the sidecar after the merge committed and published, or was rejected.
	Disarm(ctx context.Context, in *MergeIntent) error
}

// MergeWALOptions select what MergeWAL merges.
type MergeWALOptions struct {
	// Shards to merge (nil: every shard of ConfigWALShards).
	Shards []int
}

// ShardMerge is what one merge did to one shard.
type ShardMerge struct {
	Shard       string `json:"shard"`       // the shard id
	From        uint64 `json:"from"`        // merged watermark before
	To          uint64 `json:"to"`          // after: generations (From, To] are in the base table
	Generations int    `json:"generations"` // To - From
	Rows        int64  `json:"rows"`        // rows merged
	Bytes       int64  `json:"bytes"`       // bytes of their data files
}

// MergeWALResult reports a merge: the version it committed (CommitResult) and what it
// merged per shard (empty: nothing to merge, no version).
type MergeWALResult struct {
	CommitResult
	Shards []ShardMerge `json:"shards"` // one per shard merged
}

// MergeWAL commits every flushed generation above each shard's merged watermark into the
// base table in one version (a MergeWAL transaction: the generations' data files as new
// fragments and every shard's new watermark), then publishes it by fast-forward. It is
// exactly once (invariant 8): the version's build requires each shard's watermark to be
// where the merge planned from, so a rerun, or the loser of a race with another merger,
// finds the generations merged and re-plans from the new watermark (up to
// Options.WriteRetries times), merging only what is left. Rows still in the log (not yet
// flushed by their writer) are not merged: flush them first (WALWriter.Flush). Cost: a
// LIST and a GET per shard, then one commit. Errors: ErrReadOnly, ErrNoWAL,
// ErrShardOutOfRange, wal errors naming the object, *manifest.ConflictError, store and
// catalog errors; outcomes as Append (OutcomeOf; an Unknown merge keeps its sidecar for
// recover).
func (t *Table) MergeWAL(ctx context.Context, opts MergeWALOptions) (MergeWALResult, error) {
	if t.readOnly {
		return MergeWALResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	for attempt := 0; ; attempt++ {
		if err := t.refreshHead(ctx); err != nil {
			return MergeWALResult{}, err
		}
		txn, shards, err := t.planMerge(ctx, opts)
		if err != nil || len(shards) == 0 {
			return MergeWALResult{CommitResult: CommitResult{Version: t.m.Version}, Shards: shards}, err
		}
		res, err := t.commitMerge(ctx, txn)
		out := MergeWALResult{CommitResult: res, Shards: shards}
		if err == nil {
			for _, s := range shards {
				t.db.pub.PublishMerged(t.name, s.Shard, s.To, t.m.IncarnationSince)
				if f := t.db.opts.OnWALMerged; f != nil {
					f(t.name, s.Shard, s.To)
				}
			}
			return out, nil
		}
		if !errors.Is(err, manifest.ErrRetryable) && !errors.Is(err, manifest.ErrWatermarkMoved) || attempt >= t.db.opts.WriteRetries {
			return MergeWALResult{}, err
		}
	}
}

// planMerge builds the merge of the handle's version (HEAD): every shard's generations
// above its watermark, in generation order.
func (t *Table) planMerge(ctx context.Context, opts MergeWALOptions) (manifest.Transaction, []ShardMerge, error) {
	n := WALShards(t.m.Config)
	if n == 0 {
		return manifest.Transaction{}, nil, fmt.Errorf("table %q: %w", t.name, ErrNoWAL)
	}
	pick := opts.Shards
	if pick == nil {
		for i := range n {
			pick = append(pick, i)
		}
	}
	txn := t.newTxn(manifest.OpMergeWAL, writeOptions{})
	var shards []ShardMerge
	for _, i := range pick {
		if i < 0 || i >= n {
			return txn, nil, fmt.Errorf("table %q: %w: shard %d of %d", t.name, ErrShardOutOfRange, i, n)
		}
		id := wal.ShardID(i)
		sm, err := wal.LoadShard(ctx, t.db.store, t.name, id)
		if errors.Is(err, wal.ErrNoShard) {
			continue
		}
		if err != nil {
			return txn, nil, err
		}
		if sm.Incarnation != "" && t.m.Incarnation != "" && sm.Incarnation != t.m.Incarnation {
			continue // a dropped incarnation's shard
		}
		from := t.m.WALMerged[id]
		gens := sm.Unmerged(from)
		if len(gens) == 0 {
			continue
		}
		for k, g := range gens {
			if g.Generation != from+uint64(k)+1 {
				return txn, nil, &wal.ObjectError{Table: t.name, Shard: id, Key: sm.Key,
					Err: fmt.Errorf("%w: generation %d follows merged watermark %d, expected %d", wal.ErrCorrupt, g.Generation, from, from+uint64(k)+1)}
			}
		}
		sh := ShardMerge{Shard: id, From: from, To: gens[len(gens)-1].Generation, Generations: len(gens)}
		for _, g := range gens {
			for _, df := range g.Files {
				txn.Op.NewFragments = append(txn.Op.NewFragments, manifest.Fragment{Files: []manifest.DataFile{df}, PhysicalRows: df.Rows})
				sh.Rows += df.Rows
				sh.Bytes += df.Size
			}
		}
		txn.Op.WALs = append(txn.Op.WALs, manifest.WALMerge{Shard: id, From: from, To: sh.To})
		shards = append(shards, sh)
	}
	slices.SortFunc(txn.Op.WALs, func(a, b manifest.WALMerge) int {
		switch {
		case a.Shard < b.Shard:
			return -1
		case a.Shard > b.Shard:
			return 1
		}
		return 0
	})
	return txn, shards, nil
}

// commitMerge commits and publishes a planned merge under a catalog hold (recovery skips
// a live merge) and a recovery sidecar (a crash between commit and publish is rolled
// forward by recover).
func (t *Table) commitMerge(ctx context.Context, txn manifest.Transaction) (CommitResult, error) {
	in := &MergeIntent{OperationID: manifest.NewTransactionID(), Table: t.name, Created: time.Now().UTC(),
		TxnID: txn.ID, ReadVersion: t.m.Version}
	if cat := t.db.cat; cat != nil {
		h, err := cat.AcquireHold(ctx, catalog.Hold{ID: in.OperationID, Table: t.name, Kind: HoldKindMerge, Version: t.m.ContentVersion()}, 0)
		if err != nil {
			return CommitResult{}, fmt.Errorf("table %q: merge WAL: acquire hold: %w", t.name, err)
		}
		defer func() { _ = h.Release(context.WithoutCancel(ctx)) }()
	}
	sc := t.db.opts.MergeSidecars
	if sc != nil {
		if err := sc.Arm(ctx, in); err != nil {
			return CommitResult{}, fmt.Errorf("table %q: merge WAL: write recovery sidecar: %w", t.name, err)
		}
	}
	if err := seamMergePlanned.Inject(ctx); err != nil {
		return CommitResult{}, err
	}
	res, err := t.commit(ctx, txn)
	if err == nil {
		err = seamMergeCommitted.Inject(ctx)
	}
	if sc != nil && (err == nil || OutcomeOf(err) == Rejected) {
		_ = sc.Disarm(context.WithoutCancel(ctx), in)
	}
	return res, err
}
