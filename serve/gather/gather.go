// Package gather folds the per-table picture the maintenance planner (package serve/plan)
// needs: each table's WAL demand, the shape of its published manifest (small fragments,
// deleted rows, fragments no index covers), committed maintenance waiting to be
// published (drift), pending recovery sidecars, and whether it was dropped or cannot be
// read (issue 12, item 2).
//
// The decisions are a pure fold from inputs already read to a plan.TableState; Tables and
// Table do the reading around it, at scale:
//
//   - demand: one paged read of every table's records at one etcd revision
//     (demand.Records.ReadAll);
//   - published pointers: one read of every pointer at one etcd revision
//     (catalog.Snapshot);
//   - manifests: read in parallel (Options.Concurrency) through the DB's manifest cache
//     (engine.DB.LoadPublished), so an unchanged table costs no manifest GET;
//   - drift: one store HEAD request per table, for the version above the published one;
//     only a table that has one is inspected further (repair.Inspect, which reads its
//     drifting versions);
//   - sidecars: one listing of every pending recovery sidecar (recovery.PendingSidecars)
//     and, when there are any, one read of the catalog's holds, so that a running
//     operation's own sidecar does not count as recovery work.
//
// Nothing per table costs work proportional to its number of versions, except a table
// with drift. Reconcile republishes a table's WAL demand from storage (what `shale wal
// scan` does), so demand events that were lost heal.
//
// Where to start: Tables(ctx, db, Options{}) is one planning pass's picture of every
// table; Table reads one (for `shale why` and the admin endpoint).
package gather

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/repair"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/store"
)

// DefaultConcurrency is how many tables' manifests are read at once when
// Options.Concurrency is zero or negative.
const DefaultConcurrency = 8

// Options tune a gathering pass. Zero values take the defaults.
type Options struct {
	// Tables to read (nil: every table: with a catalog, every table with a published
	// pointer or demand records; without one, DB.Tables). A name that is not a table is
	// reported Dropped.
	Tables []string
	// Compaction decides what counts as a small fragment and a high deleted ratio (as the
	// compactions the planner places will run: pass the same options).
	Compaction compaction.Options
	// Concurrency bounds the tables read in parallel (default DefaultConcurrency).
	Concurrency int
}

// Stats describe one gathering pass.
type Stats struct {
	Tables        int           // tables folded
	DemandBytes   int64         // etcd bytes read for demand (demand.Snapshot.Bytes)
	ManifestReads int           // manifests loaded: published ones (through the manifest cache: a hit costs no GET) and HEADs of tables never published
	Duration      time.Duration // wall time of the pass
}

// ErrGather wraps every error Tables and Table return: a read the whole pass depends on
// failed (demand, the catalog's pointers or holds, the sidecar listing, the context).
// Errors reading one table's manifest are not returned: they are that table's
// TableState.Unreadable.
var ErrGather = errors.New("gather")

// Tables reads every table (or opts.Tables) and folds each one's picture, in table name
// order. Cost: one paged etcd read of demand, one etcd read of the pointers, one LIST of
// recovery sidecars (plus a GET per sidecar and one etcd read of holds when there are
// sidecars), and per table a manifest read through the manifest cache and one store
// HEAD request (drift); a table with drift is inspected (repair.Inspect).
// Errors: ErrGather wrapping demand, catalog, store and context errors; a table that
// cannot be read is reported in its state, never as an error.
func Tables(ctx context.Context, db *engine.DB, opts Options) ([]plan.TableState, Stats, error) {
	start := time.Now()
	g := &gatherer{db: db, opts: opts}
	var names []string
	if opts.Tables != nil {
		names = slices.Clone(opts.Tables)
		for _, n := range names {
			if err := manifest.ValidateTableName(n); err != nil {
				return nil, Stats{}, fmt.Errorf("%w: table %q: %w", ErrGather, n, err)
			}
		}
	}
	// Demand is read beside the manifests: it is only needed by the fold.
	demandErr := make(chan error, 1)
	go func() { demandErr <- g.readDemand(ctx, "") }()
	err := g.readShared(ctx, names, "")
	if err == nil && names == nil {
		names, err = g.allTables(ctx)
	}
	var ins []inputs
	if err == nil {
		ins = g.readAll(ctx, names)
	}
	if derr := <-demandErr; err == nil {
		err = derr
	}
	if err != nil {
		return nil, Stats{}, err
	}
	if opts.Tables == nil && db.Catalog() != nil {
		// Tables with demand records and no pointer: dropped ones (or never published).
		var extra []string
		for n := range g.demand {
			if _, ok := g.pointers[n]; !ok {
				extra = append(extra, n)
			}
		}
		ins = append(ins, g.readAll(ctx, extra)...)
	}
	if err := ctx.Err(); err != nil {
		return nil, Stats{}, fmt.Errorf("%w: %w", ErrGather, err)
	}
	slices.SortFunc(ins, func(a, b inputs) int { return strings.Compare(a.table, b.table) })
	states := make([]plan.TableState, len(ins))
	for i := range ins {
		ins[i].demand = g.demand[ins[i].table]
		states[i] = fold(ins[i])
	}
	return states, g.stats(len(states), start), nil
}

// Table reads and folds one table's picture, as Tables does for each (reading only that
// table's demand, pointer, sidecars and holds). A name that is not a table is Dropped.
// Errors: ErrGather wrapping manifest.ErrInvalidTableName, demand, catalog, store and
// context errors, naming the table.
func Table(ctx context.Context, db *engine.DB, name string, opts Options) (plan.TableState, error) {
	if err := manifest.ValidateTableName(name); err != nil {
		return plan.TableState{}, fmt.Errorf("%w: table %q: %w", ErrGather, name, err)
	}
	g := &gatherer{db: db, opts: opts}
	err := g.readDemand(ctx, name)
	if err == nil {
		err = g.readShared(ctx, []string{name}, name)
	}
	if err != nil {
		return plan.TableState{}, fmt.Errorf("table %q: %w", name, err)
	}
	in := g.read(ctx, name)
	in.demand = g.demand[name]
	st := fold(in)
	if err := ctx.Err(); err != nil {
		return plan.TableState{}, fmt.Errorf("%w: table %q: %w", ErrGather, name, err)
	}
	return st, nil
}

// Reconcile republishes table's WAL demand from storage (engine.Table.ScanWALDemand, what
// `shale wal scan` does): each shard's sealed generation and bytes from its shard
// manifest and the published merged watermark, joined into its demand record, so that
// demand a lost flush or merge event left behind heals. A scan only raises records. It
// returns how many shard records changed; a table without a WAL changes nothing.
// Cost: one etcd read and a manifest read (cached) to open the table, then a LIST and a
// GET per shard and one etcd read-join-put per shard.
// Errors, naming the table: manifest.ErrTableNotFound (dropped), wal, store and etcd errors.
func Reconcile(ctx context.Context, db *engine.DB, table string) (int, error) {
	t, err := db.OpenTable(ctx, table)
	if err != nil {
		return 0, fmt.Errorf("reconcile demand of table %q: %w", table, err)
	}
	if engine.WALShards(t.Manifest().Config) == 0 {
		return 0, nil
	}
	_, changed, err := t.ScanWALDemand(ctx)
	if err != nil {
		return 0, fmt.Errorf("reconcile demand of table %q: %w", table, err)
	}
	n := 0
	for _, c := range changed {
		if c {
			n++
		}
	}
	return n, nil
}

// gatherer holds what one pass read once for every table.
type gatherer struct {
	db   *engine.DB
	opts Options

	demand   map[string]*demand.TableDemand
	dBytes   int64
	pointers map[string]catalog.Pointer
	sidecars []recovery.Keyed
	live     map[string]bool // operation ids with a live catalog hold

	mu            sync.Mutex
	manifestReads int
}

// readDemand reads the demand of table ("": of every table, one paged read).
func (g *gatherer) readDemand(ctx context.Context, table string) error {
	if recs := g.db.Demand(); recs != nil {
		var snap *demand.Snapshot
		var err error
		if table == "" {
			snap, err = recs.ReadAll(ctx)
		} else {
			snap, err = recs.ReadTable(ctx, table)
		}
		if err != nil {
			return fmt.Errorf("%w: read demand: %w", ErrGather, err)
		}
		g.demand, g.dBytes = snap.Tables, snap.Bytes
	}
	return nil
}

// readShared reads what every table's read shares: the pointers of names (nil: every
// pointer), the pending sidecars of table ("": of every table) and, when there are any,
// the live holds.
func (g *gatherer) readShared(ctx context.Context, names []string, table string) error {
	if cat := g.db.Catalog(); cat != nil {
		ptrs, _, err := cat.Snapshot(ctx, names)
		if err != nil {
			return fmt.Errorf("%w: read published pointers: %w", ErrGather, err)
		}
		g.pointers = ptrs
	}
	sc, err := recovery.PendingSidecars(ctx, g.db.Store(), table)
	if err != nil {
		return fmt.Errorf("%w: list recovery sidecars: %w", ErrGather, err)
	}
	g.sidecars = sc
	if cat := g.db.Catalog(); cat != nil && len(sc) > 0 {
		holds, err := cat.Holds(ctx, table)
		if err != nil {
			return fmt.Errorf("%w: read holds: %w", ErrGather, err)
		}
		g.live = map[string]bool{}
		for _, h := range holds {
			g.live[h.ID] = true
		}
	}
	return nil
}

// allTables is every table: with a catalog, those with a published pointer (Tables adds
// those with demand records only); without one, DB.Tables.
func (g *gatherer) allTables(ctx context.Context) ([]string, error) {
	if g.db.Catalog() == nil {
		names, err := g.db.Tables(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: list tables: %w", ErrGather, err)
		}
		return names, nil
	}
	names := make([]string, 0, len(g.pointers))
	for n := range g.pointers {
		names = append(names, n)
	}
	return names, nil
}

// readAll reads names' inputs (without demand) with at most Options.Concurrency tables
// at once, each name once.
func (g *gatherer) readAll(ctx context.Context, names []string) []inputs {
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]inputs, len(names))
	workers := g.opts.Concurrency
	if workers <= 0 {
		workers = DefaultConcurrency
	}
	workers = min(workers, len(names))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = g.read(ctx, names[i])
			}
		}()
	}
	for i := range names {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// read reads one table's inputs but its demand: its published manifest (the pointer's,
// through the cache; HEAD when it has no pointer), the drift above it, and the shared
// reads.
func (g *gatherer) read(ctx context.Context, name string) inputs {
	in := inputs{table: name, sidecars: g.sidecars, live: g.live, compaction: g.opts.Compaction}
	s := g.db.Store()
	p, ok := g.pointers[name]
	if !ok {
		g.countRead()
		m, err := manifest.LoadHead(ctx, s, name)
		switch {
		case errors.Is(err, manifest.ErrTableNotFound):
			in.dropped = true
		case err != nil:
			in.unreadable = err
		default:
			in.published = m
		}
		return in
	}
	g.countRead()
	m, err := g.db.LoadPublished(ctx, name, p)
	if err != nil {
		in.dropped, in.unreadable = g.gone(ctx, name, err)
		return in
	}
	if m.Dropped() {
		in.dropped = true
		return in
	}
	in.published = m
	// Drift: versions are linear, so HEAD is above the published version exactly when the
	// next version exists.
	if _, err := s.Head(ctx, manifest.ManifestKey(name, p.Version+1)); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			in.unreadable = fmt.Errorf("table %q: check for drift above version %d: %w", name, p.Version, err)
		}
		return in
	}
	dp, err := repair.Inspect(ctx, s, g.db.Catalog(), name)
	switch {
	case errors.Is(err, manifest.ErrTableNotFound):
		in.dropped = true
	case err != nil:
		in.unreadable = fmt.Errorf("table %q: inspect drift: %w", name, err)
	default:
		in.drift = &dp
	}
	return in
}

// gone tells a published manifest that could not be read because the table was dropped
// (its objects deleted; HEAD a drop marker or nothing) from one that is unreadable.
func (g *gatherer) gone(ctx context.Context, name string, err error) (dropped bool, unreadable error) {
	if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, manifest.ErrVersionNotFound) && !errors.Is(err, manifest.ErrTableNotFound) {
		return false, err
	}
	if _, herr := manifest.LoadHead(ctx, g.db.Store(), name); errors.Is(herr, manifest.ErrTableNotFound) {
		return true, nil
	}
	return false, err
}

func (g *gatherer) countRead() {
	g.mu.Lock()
	g.manifestReads++
	g.mu.Unlock()
}

func (g *gatherer) stats(tables int, start time.Time) Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Tables: tables, DemandBytes: g.dBytes, ManifestReads: g.manifestReads, Duration: time.Since(start)}
}
