package gather

import (
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/repair"
	"github.com/shale-db/shale/serve/plan"
)

// inputs is everything read about one table, before folding: the I/O wrapper fills it,
// fold turns it into a plan.TableState without any I/O.
type inputs struct {
	table string
	// demand is the table's WAL demand (nil: no record).
	demand *demand.TableDemand
	// published is the manifest the table's pointer names (HEAD when it has never been
	// published, or without a catalog); nil when dropped or unreadable.
	published *manifest.Manifest
	// dropped: the table has no published pointer and no live HEAD (a drop marker, or no
	// version at all).
	dropped bool
	// unreadable: why the manifest could not be read (nil: it was, or the table is dropped).
	unreadable error
	// drift is the classified drift above the published version (nil: none, HEAD is the
	// published version).
	drift *repair.Plan
	// sidecars are the pending recovery sidecars of every table (the fold picks the
	// table's own), live the operation ids holding a live catalog hold (running: their
	// sidecars are not recovery work).
	sidecars []recovery.Keyed
	live     map[string]bool
	// compaction tunes what counts as a small fragment and a high deleted ratio.
	compaction compaction.Options
}

// fold is the pure fold of one table's inputs into the planner's picture:
//
//   - demand: PendingGenerations, PendingBytes and the oldest pending flush from the
//     table's demand (AgeKnown for an exact age or an upper bound, AgeExact only for an
//     exact one), ignored when the records belong to an older incarnation than the
//     published manifest's (a table dropped and created again). LargestGeneration stays
//     0 (unknown): demand keeps a shard's running byte total, never a generation's size.
//   - compaction: the plan compaction.NewPlan makes of the published manifest: the
//     fragments it would rewrite that are small (SmallFragments) or have a deleted ratio
//     above the threshold (DeletedRatioHigh; a fragment can be both), and the bytes of
//     their data files (CompactBytes). Fragments compaction would not touch (a lone small
//     fragment, one between fragments of other index sets) do not count, so the planner
//     never places a compaction that would do nothing.
//   - indexes: the live fragments that some index (by name, over all its segments) does
//     not cover (UncoveredByIndex) and the bytes of their data files (IndexBytes).
//   - Drift: the drifting versions when repair classifies the drift as maintenance-only
//     with no sidecar naming it (repair.Publishable), counting its maintenance versions;
//     0 for logical drift (never the sidecar's to publish), sidecar-covered drift
//     (recovery's), a pending group, only aborted versions, or a pointer ahead of HEAD.
//   - PendingSidecars: the table's sidecars (by Sidecar.Table, unreadable ones included
//     when their table could be read) whose operation holds no live catalog hold.
//   - Dropped, Unreadable: as read; the shape fields are then zero (demand and sidecars
//     are still reported).
func fold(in inputs) plan.TableState {
	st := plan.TableState{Table: in.table}
	st.Dropped = in.dropped
	if in.unreadable != nil && !in.dropped {
		st.Unreadable = in.unreadable.Error()
	}
	if d := in.demand; d != nil && !staleDemand(d, in.published) {
		st.PendingGenerations = d.PendingGenerations()
		st.PendingBytes = d.PendingBytes()
		switch age := d.OldestPending(); age.Kind {
		case demand.AgeExact, demand.AgeUpperBound:
			st.OldestPending = time.UnixMilli(age.AtMs).UTC()
			st.AgeKnown = true
			st.AgeExact = age.Kind == demand.AgeExact
		}
	}
	for _, k := range in.sidecars {
		if k.Sidecar.Table == in.table && !in.live[k.Sidecar.OperationID] {
			st.PendingSidecars++
		}
	}
	m := in.published
	if m == nil || st.Dropped || st.Unreadable != "" {
		return st
	}
	st.Fragments = len(m.Fragments)
	cp := compaction.NewPlan(m, in.compaction)
	var pos map[uint32]int // fragment id -> index in m.Fragments
	if len(cp.Groups) > 0 {
		pos = make(map[uint32]int, len(m.Fragments))
		for i := range m.Fragments {
			pos[m.Fragments[i].ID] = i
		}
	}
	for _, g := range cp.Groups {
		for _, id := range g.Old {
			i, ok := pos[id]
			if !ok {
				continue
			}
			f := &m.Fragments[i]
			if f.PhysicalRows < cp.Options.TargetRows {
				st.SmallFragments++
			}
			if deletedHigh(f, cp.Options.DeletedRatio) {
				st.DeletedRatioHigh++
			}
		}
		st.CompactBytes += g.Bytes
	}
	st.UncoveredByIndex, st.IndexBytes = uncovered(m)
	if d := in.drift; d != nil && d.Decision == repair.Publishable {
		for _, v := range d.Versions {
			if v.Class == repair.Maintenance {
				st.Drift++
			}
		}
	}
	return st
}

// staleDemand reports demand recorded for an earlier incarnation of the table than m's
// (the table was dropped and created again; the new incarnation's shards start afresh).
func staleDemand(d *demand.TableDemand, m *manifest.Manifest) bool {
	inc := d.IncarnationSince()
	return m != nil && m.IncarnationSince != 0 && inc != 0 && inc < m.IncarnationSince
}

// deletedHigh is compaction's rule for rewriting a fragment for its deletions: deleted /
// physical rows above ratio (ratio already defaulted by NewPlan; negative: any deleted
// row; 1 or more: never).
func deletedHigh(f *manifest.Fragment, ratio float64) bool {
	if f.Deletion == nil || f.Deletion.Deleted == 0 || f.PhysicalRows == 0 || ratio >= 1 {
		return false
	}
	return ratio < 0 || float64(f.Deletion.Deleted)/float64(f.PhysicalRows) > ratio
}

// uncovered counts m's live fragments that some index does not cover (over all of the
// index's segments) and the bytes of their data files. No index: nothing is uncovered.
func uncovered(m *manifest.Manifest) (n int, bytes int64) {
	if len(m.Indexes) == 0 {
		return 0, 0
	}
	covered := map[string]map[uint32]bool{} // index name -> fragments its segments cover
	for _, ix := range m.Indexes {
		c := covered[ix.Name]
		if c == nil {
			c = map[uint32]bool{}
			covered[ix.Name] = c
		}
		for _, id := range ix.Fragments {
			c[id] = true
		}
	}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		for _, c := range covered {
			if !c[f.ID] {
				n++
				for _, df := range f.Files {
					bytes += df.Size
				}
				break
			}
		}
	}
	return n, bytes
}
