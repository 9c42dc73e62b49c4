package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// ErrAttemptsExhausted: every attempt met a retryable conflict (a concurrent delete,
// update or rewrite of fragments the plan rewrites). Nothing was committed; the data
// files the attempts wrote are referenced by no version (garbage for gc).
var ErrAttemptsExhausted = errors.New("compaction: conflict retry budget exhausted")

// ErrNotPublished: the rewrite committed (Stats.Version) but the catalog pointer could not
// be moved to it; the next write to the table publishes it.
var ErrNotPublished = errors.New("compaction: committed but not published")

// unknownRetries is how often one attempt re-runs the commit loop with the same
// transaction after an undecided manifest put.
const unknownRetries = 3

// Hooks are called at the seams of each attempt. A hook's error aborts the compaction
// and is returned wrapped.
type Hooks struct {
	// BeforeFirstWrite runs after the attempt is planned and before it writes its first
	// data file: the place for a recovery sidecar naming p.Txn.ID, p.ReadVersion and the
	// groups. It is not called for an empty plan.
	BeforeFirstWrite func(ctx context.Context, p *Plan) error
	// BeforeCommit runs after every new data file of the attempt is stored and before
	// the commit loop starts (the last moment a concurrent writer can get in first).
	BeforeCommit func(ctx context.Context, p *Plan) error
}

// Executor runs compactions against one store and (optionally) its catalog. Build one
// with New (the DB's settings) and adjust fields before the first Run; it is then safe
// for concurrent Runs on different tables. Two Runs on the same table are safe too (the
// loser meets a retryable conflict and replans) but wasteful.
type Executor struct {
	Store   store.Store      // the table's store
	Catalog *catalog.Catalog // nil: commit without publishing (a bare store)
	// Write tunes the new data files; MaxRowsPerFile defaults to the plan's TargetRows.
	Write engine.WriteOptions
	// Commit bounds the commit loop (its Groups resolver is set by the executor when a
	// catalog is present).
	Commit manifest.CommitOptions
	// Allocator for Arrow memory (default memory.DefaultAllocator).
	Allocator memory.Allocator
	// GroupTimeout is how long to wait for a pending multi-table group met while reading
	// forward before aborting it (default 30 s).
	GroupTimeout time.Duration
	// PublishTimeout bounds the publish (default 30 s).
	PublishTimeout time.Duration
	Hooks          Hooks // called at each attempt's seams (recovery sidecars, tests)
	// Sidecars, when set, makes each run crash-recoverable: a sidecar naming the run's
	// transactions and data prefixes is stored before every attempt's first data file
	// (Phase A), each attempt writes its data files under their own prefix, and the
	// sidecar is removed after the publish (Phase D; a failed removal is logged, not
	// returned). recovery.Store implements it.
	Sidecars Sidecars
	// Logger receives the Phase D warning (default slog.Default()).
	Logger *slog.Logger
}

// New returns an Executor on db's store and catalog with default settings.
func New(db *engine.DB) *Executor {
	o := db.Options()
	return &Executor{Store: db.Store(), Catalog: db.Catalog(), Write: o.Write, Commit: o.Commit,
		Allocator: o.Allocator, GroupTimeout: o.GroupTimeout, PublishTimeout: o.PublishTimeout}
}

// Stats describe one compaction.
type Stats struct {
	Table       string   // the table compacted
	ReadVersion uint64   // the version the committed (or last) attempt was planned on
	Version     uint64   // the committed version (0: nothing committed)
	TxnID       string   // the transaction of the last attempt
	Attempts    int      // plan-write-commit attempts (1 without conflicts)
	Rebased     []uint64 // versions by others the commit was rebuilt on top of
	Published   bool     // the catalog pointer is at or past Version (false without a catalog)
	// Operation is the id of the run's recovery sidecar (_recovery/<Operation>.json), ""
	// without sidecars (Executor.Sidecars nil). After a failed Run the sidecar stays for
	// recovery; a caller that knows the run has ended can resolve it at once by passing
	// the id in recovery.Options.Exited.
	Operation string

	Groups           int   // rewrite groups of the committed plan (Plan.Groups)
	FragmentsBefore  int   // the table's fragments at ReadVersion
	FragmentsAfter   int   // the table's fragments at Version
	FragmentsRemoved int   // old fragments replaced
	FragmentsAdded   int   // new fragments written
	RowsRewritten    int64 // live rows copied into new fragments
	RowsDropped      int64 // deleted rows left behind (deletion vectors materialized)
	BytesRead        int64 // data file bytes of the old fragments
	BytesWritten     int64 // data file bytes of the new fragments

	// ZoneMaps is the number of zone-map indexes whose zones of the new fragments the
	// committed version holds (built in the same commit). One of the read version's may
	// be missing when the index was dropped meanwhile, or the rewrite was rebuilt on top
	// of an append: its new fragments are then uncovered (scanned).
	ZoneMaps     int
	ZoneMapBytes int64 // bytes of the zone-map objects the last attempt wrote
}

// Compact plans and runs one compaction of table with New(db)'s defaults (no recovery
// sidecar: use recovery.Enable(New(db)).Run for crash safety). Errors: as Executor.Run.
func Compact(ctx context.Context, db *engine.DB, table string, opts Options) (Stats, error) {
	return New(db).Run(ctx, table, opts)
}

// Head returns the manifest a compaction of table should plan against: the published
// version read forward to HEAD (prepared versions of aborted multi-table groups count as
// empty). Errors: manifest.ErrTableNotFound, corruption errors naming the manifest object,
// etcd errors.
func (e *Executor) Head(ctx context.Context, table string) (*manifest.Manifest, error) {
	if err := manifest.ValidateTableName(table); err != nil {
		return nil, err
	}
	var m *manifest.Manifest
	if e.Catalog != nil {
		p, _, err := e.Catalog.Get(ctx, table)
		switch {
		case err == nil:
			if m, err = manifest.LoadVerified(ctx, e.Store, table, p.Version, p.Checksum); err != nil {
				return nil, err
			}
		case !errors.Is(err, catalog.ErrNoPointer):
			return nil, fmt.Errorf("table %q: read published version: %w", table, err)
		}
	}
	if m == nil {
		var err error
		if m, err = manifest.LoadHead(ctx, e.Store, table); err != nil {
			return nil, err
		}
	}
	return manifest.CatchUp(ctx, e.Store, table, m, e.groups())
}

// Plan plans a compaction of table at HEAD (see Head and NewPlan) without writing: a dry
// run. Errors: as Head.
func (e *Executor) Plan(ctx context.Context, table string, opts Options) (*Plan, error) {
	m, err := e.Head(ctx, table)
	if err != nil {
		return nil, err
	}
	return NewPlan(m, opts), nil
}

// Run compacts table: plan at HEAD, rewrite each group's live rows into new fragments
// (Parallelism groups at once, streaming), commit one OpRewrite version from the pinned
// read version, and publish it by fast-forward. Appends committed meanwhile are rebased
// over; a retryable conflict replans at HEAD, at most MaxAttempts attempts in all. An
// empty plan commits nothing (Stats.Version = 0).
//
// Errors: ErrAttemptsExhausted (wrapping the last *manifest.ConflictError);
// manifest.ErrCommitUnknown when the commit's outcome stays undecided (Stats.TxnID names
// the transaction); ErrNotPublished after a commit; hook errors; store and corruption
// errors naming the object key, table and version.
func (e *Executor) Run(ctx context.Context, table string, opts Options) (Stats, error) {
	opts = opts.withDefaults()
	st := Stats{Table: table}
	var in *Intent
	var err error
	if e.Sidecars != nil {
		if in, err = e.newIntent(ctx, table); err != nil {
			return st, err
		}
		st.Operation = in.ID
	}
	hold, err := e.acquireHold(ctx, table, in) // before reading the version it protects
	if err != nil {
		return st, err
	}
	defer hold.release(ctx)
	ctx = withHold(ctx, hold)
	m, err := e.Head(ctx, table)
	if err != nil {
		return st, err
	}
	var lastConflict error
	for st.Attempts < opts.MaxAttempts {
		st.Attempts++
		if err := hold.move(ctx, m.Version); err != nil {
			return st, err
		}
		p := NewPlan(m, opts)
		st.ReadVersion, st.TxnID, st.FragmentsBefore, st.Groups = p.ReadVersion, p.Txn.ID, p.FragmentsBefore, len(p.Groups)
		if p.Empty() {
			st.FragmentsAfter = st.FragmentsBefore
			e.disarm(ctx, in)
			return st, nil
		}
		committed, cstats, err := e.attempt(ctx, m, p, &st, in)
		if errors.Is(err, manifest.ErrRetryable) {
			lastConflict = err
			if in != nil && len(in.Attempts) > 0 {
				in.Attempts[len(in.Attempts)-1].Rejected = true
			}
			if m, err = manifest.CatchUp(ctx, e.Store, table, m, e.groups()); err != nil {
				return st, err
			}
			continue
		}
		if err != nil {
			return st, err
		}
		st.Version, st.Rebased, st.FragmentsAfter = committed.Version, cstats.Rebased, len(committed.Fragments)
		st.ZoneMaps = zoneMapsCommitted(committed)
		if err := seamAfterCommit.Inject(ctx); err != nil {
			return st, err
		}
		if err := e.publish(ctx, committed, cstats.Checksum); err != nil {
			return st, err
		}
		st.Published = e.Catalog != nil
		if err := seamAfterPublish.Inject(ctx); err != nil {
			return st, err
		}
		e.disarm(ctx, in)
		return st, nil
	}
	// Nothing committed: the sidecar stays for recovery to remove the attempts' files.
	return st, fmt.Errorf("table %q: %w after %d attempts: %w", table, ErrAttemptsExhausted, st.Attempts, lastConflict)
}

// attempt writes the plan's groups and commits them on top of m (the plan's read version).
func (e *Executor) attempt(ctx context.Context, m *manifest.Manifest, p *Plan, st *Stats, in *Intent) (*manifest.Manifest, manifest.CommitStats, error) {
	if h := e.Hooks.BeforeFirstWrite; h != nil {
		if err := h(ctx, p); err != nil {
			return nil, manifest.CommitStats{}, fmt.Errorf("table %q: compaction %s: before first write: %w", p.Table, p.Txn.ID, err)
		}
	}
	// Every attempt writes under its transaction's data directory, so garbage collection
	// can fence the transaction by id before deleting the files (invariant 15).
	dataDir := AttemptDataDir(p.Table, p.Txn.ID)
	if in != nil {
		if err := e.arm(ctx, in, p, dataDir); err != nil {
			return nil, manifest.CommitStats{}, err
		}
	}
	schema, err := m.Schema.Arrow()
	if err != nil {
		return nil, manifest.CommitStats{}, err
	}
	w, err := engine.TableWriteOptions(e.Write, m.Config)
	if err != nil {
		return nil, manifest.CommitStats{}, fmt.Errorf("table %q version %d: %w", p.Table, m.Version, err)
	}
	if w.MaxRowsPerFile == 0 {
		w.MaxRowsPerFile = int(p.Options.TargetRows)
	}
	if w.Allocator == nil {
		w.Allocator = e.alloc()
	}
	specs := zoneIndexes(m)
	rw := &rewriter{store: e.Store, m: m, dir: dataDir, schema: schema, write: w, mem: e.alloc(), zones: specs}
	results, err := rw.rewriteAll(ctx, p.Groups, p.Options.Parallelism)
	if err != nil {
		return nil, manifest.CommitStats{}, err
	}
	// Zone maps of the new fragments, committed with them (under the transaction's index
	// directory, which the recovery sidecar owns too). BTrees are not remapped: see the
	// package documentation.
	segs, zoneBytes, err := storeZoneMaps(ctx, rw, specs, results, p.Txn.ID)
	if err != nil {
		return nil, manifest.CommitStats{}, err
	}
	txn := p.Txn
	txn.Op.NewIndexes = segs
	st.ZoneMapBytes = zoneBytes
	txn.Op.Groups = make([]manifest.RewriteGroup, len(p.Groups))
	st.FragmentsRemoved, st.FragmentsAdded = 0, 0
	st.RowsRewritten, st.RowsDropped, st.BytesRead, st.BytesWritten = 0, 0, 0, 0
	for i, g := range p.Groups {
		r := results[i]
		txn.Op.Groups[i] = manifest.RewriteGroup{Old: g.Old, New: r.New}
		st.FragmentsRemoved += len(g.Old)
		st.FragmentsAdded += len(r.New)
		st.RowsRewritten += r.Rows
		st.RowsDropped += r.Dropped
		st.BytesRead += r.BytesRead
		st.BytesWritten += r.Written
	}
	if h := e.Hooks.BeforeCommit; h != nil {
		if err := h(ctx, p); err != nil {
			return nil, manifest.CommitStats{}, fmt.Errorf("table %q: compaction %s: before commit: %w", p.Table, p.Txn.ID, err)
		}
	}
	if err := holdLost(ctx); err != nil {
		return nil, manifest.CommitStats{}, err
	}
	cctx, cancel := holdOf(ctx).bound(ctx)
	defer cancel()
	next, cst, err := e.commit(cctx, m, txn)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(cctx)) // the hold was lost mid-commit
	}
	return next, cst, err
}

// commit runs the commit loop, re-running it with the same transaction after an
// undecided manifest put (it finds an earlier attempt that landed by its id, or commits
// once). After an undecided attempt only a conflict proves ours did not land.
func (e *Executor) commit(ctx context.Context, m *manifest.Manifest, txn manifest.Transaction) (*manifest.Manifest, manifest.CommitStats, error) {
	opts := e.Commit
	opts.Groups = e.groups()
	unknown := false
	for try := 0; ; try++ {
		next, stats, err := manifest.Commit(ctx, e.Store, m.Table, m, txn, opts)
		switch {
		case err == nil:
			return next, stats, nil
		case errors.Is(err, manifest.ErrCommitUnknown):
			unknown = true
			if try >= unknownRetries || ctx.Err() != nil {
				return nil, stats, err
			}
			t := time.NewTimer(time.Duration(try+1) * 20 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, stats, fmt.Errorf("%w (then: %w)", err, ctx.Err())
			case <-t.C:
			}
		case unknown && !errors.Is(err, manifest.ErrConflict):
			return nil, stats, fmt.Errorf("table %q: transaction %s: %w: %w", m.Table, txn.ID, manifest.ErrCommitUnknown, err)
		default:
			return nil, stats, err
		}
	}
}

func (e *Executor) publish(ctx context.Context, m *manifest.Manifest, checksum uint32) error {
	if e.Catalog == nil {
		return nil
	}
	d := e.PublishTimeout
	if d <= 0 {
		d = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := seamBeforePublish.Inject(ctx); err != nil {
		return fmt.Errorf("table %q: version %d: %w: %w", m.Table, m.Version, ErrNotPublished, err)
	}
	_, err := engine.PublishVersion(ctx, e.Store, e.Catalog, m, checksum)
	if errors.Is(err, engine.ErrTableDropped) {
		// The table was dropped: the rewrite is in no table (its sidecar stays for
		// recovery, which deletes what it wrote).
		return fmt.Errorf("table %q: compaction version %d: %w", m.Table, m.Version, err)
	}
	if err != nil {
		return fmt.Errorf("table %q: version %d: %w: %w", m.Table, m.Version, ErrNotPublished, err)
	}
	return nil
}

func (e *Executor) alloc() memory.Allocator {
	if e.Allocator == nil {
		return memory.DefaultAllocator
	}
	return e.Allocator
}

func (e *Executor) groups() manifest.GroupResolver {
	if e.Catalog == nil {
		return nil
	}
	d := e.GroupTimeout
	if d <= 0 {
		d = 30 * time.Second
	}
	return catalog.GroupWaiter{Catalog: e.Catalog, Timeout: d}
}

// zoneMapsCommitted counts the zone-map segments the rewrite m committed added.
func zoneMapsCommitted(m *manifest.Manifest) int {
	n := 0
	for _, ix := range m.Indexes {
		if ix.Kind == index.KindZoneMap && slices.ContainsFunc(m.Txn.Op.NewIndexes, func(s manifest.Index) bool { return s.UUID == ix.UUID }) {
			n++
		}
	}
	return n
}
