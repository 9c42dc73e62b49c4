// Package compaction rewrites a table's small fragments, and fragments with many deleted
// rows, into fewer, larger fragments, as one maintenance (OpRewrite) version that preserves
// the table's content and row order (DESIGN §7; shared/reference/lance-format.md §5).
//
// The work splits into a pure planner (NewPlan: a function of one manifest and Options)
// and an executor (Executor.Run) that pins the plan's read version, writes the new fragments
// without holding any lock, commits one OpRewrite transaction through manifest.Commit and
// publishes it by fast-forward. Concurrent appends rebase over it; a concurrent delete or
// update of a fragment being rewritten is a retryable conflict that replans at HEAD.
//
// Where to start: Compact(ctx, db, table, Options{}) compacts one table with the DB's
// settings and returns its Stats. For crash safety wrap the executor with recovery.Enable
// (recovery.Enable(compaction.New(db)).Run(…)), which stores a recovery sidecar before
// the first data file; Executor.Plan shows what a run would do without writing.
package compaction

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shale-db/shale/manifest"
)

// Defaults for Options.
const (
	DefaultTargetRows   = 1 << 20 // 1,048,576 rows: the data writer's default rows per file
	DefaultDeletedRatio = 0.1
	DefaultMaxAttempts  = 3
	DefaultParallelism  = 2
)

// Options tune planning and execution. Zero values take the defaults.
type Options struct {
	// TargetRows is the target number of rows of an output fragment (default
	// DefaultTargetRows). A fragment with fewer physical rows is small, and a group's live
	// rows never exceed it unless the group is one fragment rewritten for its deletions.
	TargetRows int64
	// DeletedRatio (deleted / physical rows) above which a fragment is rewritten to drop
	// its deleted rows even alone (default DefaultDeletedRatio = 0.1). Negative: any
	// deleted row qualifies. 1 or more: never.
	DeletedRatio float64
	// MaxAttempts bounds plan-write-commit attempts; a retryable conflict (a concurrent
	// delete, update or rewrite of a fragment we rewrite) replans at HEAD (default
	// DefaultMaxAttempts = 3).
	MaxAttempts int
	// Parallelism is how many groups are rewritten at once (default DefaultParallelism).
	// Memory is bounded by Parallelism × one output data file (the writer encodes a file
	// in memory before its single Put) plus one input batch per worker.
	Parallelism int
}

func (o Options) withDefaults() Options {
	if o.TargetRows <= 0 {
		o.TargetRows = DefaultTargetRows
	}
	if o.DeletedRatio == 0 {
		o.DeletedRatio = DefaultDeletedRatio
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	return o
}

// Group is one planned rewrite: adjacent fragments (table order) whose live rows become
// one or more new fragments in their place.
type Group struct {
	Old          []uint32 `json:"old"`           // fragment ids, in table order
	PhysicalRows int64    `json:"physical_rows"` // rows stored in the old fragments
	LiveRows     int64    `json:"live_rows"`     // rows the new fragments will hold
	Bytes        int64    `json:"bytes"`         // bytes of the old data files
	// Indexes names the indexes covering every old fragment (none cover any of them if
	// empty); a group never mixes fragments covered by different index sets.
	Indexes []string `json:"indexes,omitempty"`
}

// Plan is a compaction planned against one version. Txn is minted at planning time and
// carries the ids of the fragments each group replaces; Execute fills in the new
// fragments and commits it unchanged otherwise, so a recovery sidecar written before the
// first data file (Hooks.BeforeFirstWrite) can name the transaction that may land.
type Plan struct {
	Table       string               // the table planned
	ReadVersion uint64               // the version the plan reads; its fragments are the ones rewritten
	Groups      []Group              // the rewrites, in table order; none means nothing to do (Empty)
	Txn         manifest.Transaction // Kind OpRewrite; ReadVersion = Plan.ReadVersion
	Options     Options              // with defaults applied

	// FragmentsBefore is the table's fragment count at ReadVersion.
	FragmentsBefore int
}

// Empty reports whether the plan rewrites nothing.
func (p *Plan) Empty() bool { return len(p.Groups) == 0 }

// Rows is the number of live rows the plan rewrites.
func (p *Plan) Rows() int64 {
	var n int64
	for _, g := range p.Groups {
		n += g.LiveRows
	}
	return n
}

// OldFragments is the number of fragments the plan replaces.
func (p *Plan) OldFragments() int {
	n := 0
	for _, g := range p.Groups {
		n += len(g.Old)
	}
	return n
}

// NewPlan plans the compaction of m. It is pure: no I/O, and the same manifest and options
// give the same groups (the transaction id differs per call).
//
// Fragments are walked in table order. A fragment is a candidate when it is small
// (physical rows < TargetRows) or its deleted ratio exceeds DeletedRatio. Runs of
// adjacent candidates covered by the same set of indexes form bins; a bin closes at a
// non-candidate, when the covering index set changes, or when the next fragment would take
// its live rows past TargetRows. A bin of one fragment is dropped unless that fragment's
// deleted ratio exceeds the threshold (rewriting it alone would change nothing else).
func NewPlan(m *manifest.Manifest, opts Options) *Plan {
	opts = opts.withDefaults()
	p := &Plan{Table: m.Table, ReadVersion: m.Version, Options: opts, FragmentsBefore: len(m.Fragments)}
	var (
		cur     []int // indices into m.Fragments
		curCov  string
		curLive int64
	)
	flush := func() {
		if len(cur) > 0 && (len(cur) > 1 || heavyDeletes(&m.Fragments[cur[0]], opts.DeletedRatio)) {
			g := Group{}
			for _, i := range cur {
				f := &m.Fragments[i]
				g.Old = append(g.Old, f.ID)
				g.PhysicalRows += f.PhysicalRows
				g.LiveRows += f.LiveRows()
				for _, df := range f.Files {
					g.Bytes += df.Size
				}
			}
			g.Indexes = covering(m, m.Fragments[cur[0]].ID)
			p.Groups = append(p.Groups, g)
		}
		cur, curLive = nil, 0
	}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		heavy := heavyDeletes(f, opts.DeletedRatio)
		if f.PhysicalRows >= opts.TargetRows && !heavy {
			flush()
			continue
		}
		cov := strings.Join(covering(m, f.ID), "\x00")
		if len(cur) > 0 && (cov != curCov || curLive+f.LiveRows() > opts.TargetRows) {
			flush()
		}
		cur = append(cur, i)
		curCov = cov
		curLive += f.LiveRows()
	}
	flush()
	groups := make([]manifest.RewriteGroup, len(p.Groups))
	for i, g := range p.Groups {
		groups[i] = manifest.RewriteGroup{Old: slices.Clone(g.Old)}
	}
	p.Txn = manifest.NewTransaction(m.Version, manifest.Operation{Kind: manifest.OpRewrite, Groups: groups})
	return p
}

// heavyDeletes reports whether f's deleted ratio exceeds threshold (negative: any
// deleted row; 1 or more: never).
func heavyDeletes(f *manifest.Fragment, threshold float64) bool {
	if f.Deletion == nil || f.Deletion.Deleted == 0 || f.PhysicalRows == 0 || threshold >= 1 {
		return false
	}
	return threshold < 0 || float64(f.Deletion.Deleted)/float64(f.PhysicalRows) > threshold
}

// covering lists the names of the indexes covering fragment id, sorted.
func covering(m *manifest.Manifest, id uint32) []string {
	var names []string
	for _, ix := range m.Indexes {
		if slices.Contains(ix.Fragments, id) {
			names = append(names, ix.Name)
		}
	}
	slices.Sort(names)
	return names
}

// String summarises the plan: "<table> v<R>: <n> groups, <f> fragments, <rows> rows".
func (p *Plan) String() string {
	return fmt.Sprintf("%s v%d: %d groups, %d fragments, %d live rows", p.Table, p.ReadVersion, len(p.Groups), p.OldFragments(), p.Rows())
}
