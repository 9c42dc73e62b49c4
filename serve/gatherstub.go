package serve

// TEMPORARY adapter for package serve/gather (owned by another helper): the same
// signatures as gather.Tables / gather.Table / gather.Reconcile, folded simply. The
// coordinator replaces these three functions with calls to package gather at merge.

import (
	"context"
	"errors"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/repair"
	"github.com/shale-db/shale/serve/plan"
)

// gatherOptions mirrors gather.Options.
type gatherOptions struct {
	Tables      []string
	Compaction  compaction.Options
	Concurrency int
}

// gatherStats mirrors gather.Stats.
type gatherStats struct {
	Tables        int
	DemandBytes   int64
	ManifestReads int
	Duration      time.Duration
}

// gatherTables mirrors gather.Tables.
func gatherTables(ctx context.Context, db *engine.DB, opts gatherOptions) ([]plan.TableState, gatherStats, error) {
	start := time.Now()
	names := opts.Tables
	if names == nil {
		var err error
		if names, err = db.Tables(ctx); err != nil {
			return nil, gatherStats{}, err
		}
	}
	var snap *demand.Snapshot
	if db.Demand() != nil {
		var err error
		if snap, err = db.Demand().ReadAll(ctx); err != nil {
			return nil, gatherStats{}, err
		}
	}
	var out []plan.TableState
	var st gatherStats
	for _, n := range names {
		var td *demand.TableDemand
		if snap != nil {
			td = snap.Tables[n]
		}
		ts, err := gatherOne(ctx, db, n, td, opts)
		if err != nil {
			return nil, st, err
		}
		st.ManifestReads++
		out = append(out, ts)
	}
	st.Tables, st.Duration = len(out), time.Since(start)
	return out, st, nil
}

// gatherTable mirrors gather.Table.
func gatherTable(ctx context.Context, db *engine.DB, name string, opts gatherOptions) (plan.TableState, error) {
	var td *demand.TableDemand
	if db.Demand() != nil {
		snap, err := db.Demand().ReadTable(ctx, name)
		if err != nil {
			return plan.TableState{}, err
		}
		td = snap.Tables[name]
	}
	return gatherOne(ctx, db, name, td, opts)
}

// gatherReconcile mirrors gather.Reconcile: republish the table's WAL demand from storage.
func gatherReconcile(ctx context.Context, db *engine.DB, table string) error {
	t, err := db.OpenTable(ctx, table)
	if err != nil {
		return err
	}
	_, _, err = t.ScanWALDemand(ctx)
	if errors.Is(err, engine.ErrNoWAL) {
		return nil
	}
	return err
}

func gatherOne(ctx context.Context, db *engine.DB, name string, td *demand.TableDemand, opts gatherOptions) (plan.TableState, error) {
	ts := plan.TableState{Table: name}
	if td != nil {
		ts.PendingGenerations, ts.PendingBytes = td.PendingGenerations(), td.PendingBytes()
		if age := td.OldestPending(); age.Kind == demand.AgeExact || age.Kind == demand.AgeUpperBound {
			ts.OldestPending, ts.AgeKnown, ts.AgeExact = time.UnixMilli(age.AtMs), true, age.Kind == demand.AgeExact
		}
	}
	t, err := db.OpenTable(ctx, name)
	var dropped *manifest.DroppedError
	switch {
	case errors.As(err, &dropped), errors.Is(err, manifest.ErrTableNotFound):
		ts.Dropped = true
		return ts, nil
	case ctx.Err() != nil:
		return ts, ctx.Err()
	case err != nil:
		ts.Unreadable = err.Error()
		return ts, nil
	}
	m := t.Manifest()
	ts.Fragments = len(m.Fragments)
	if p := compaction.NewPlan(m, opts.Compaction); !p.Empty() {
		ts.SmallFragments = p.OldFragments()
		for _, g := range p.Groups {
			ts.CompactBytes += g.Bytes
		}
	}
	for _, ix := range t.Indexes() {
		if u := ix.Fragments - ix.FragmentsCovered; u > ts.UncoveredByIndex {
			ts.UncoveredByIndex = u
		}
	}
	keys, err := recovery.Pending(ctx, db.Store(), name)
	if err != nil {
		ts.Unreadable = err.Error()
		return ts, nil
	}
	ts.PendingSidecars = len(keys)
	if cat := db.Catalog(); cat != nil && len(keys) == 0 {
		if p, err := repair.Inspect(ctx, db.Store(), cat, name); err == nil && p.Decision == repair.Publishable {
			ts.Drift = len(p.Versions)
		}
	}
	return ts, nil
}
