package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/oklog/ulid/v2"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/index/btree"
	"github.com/shale-db/shale/index/zonemap"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// Errors of index management.
var (
	// ErrIndexExists: CreateIndex of a name the table already has (set IndexSpec.Replace
	// to replace it).
	ErrIndexExists = errors.New("index already exists")
	// ErrIndexNotFound: the table has no index of that name.
	ErrIndexNotFound = errors.New("index not found")
	// ErrInvalidIndexSpec: an IndexSpec that describes no index this table can have: no
	// column, a BTree of several columns, a column named twice, an unknown kind, or a name
	// that is not usable (the rules of table names). An unknown column is
	// filter.ErrUnknownColumn and an unsupported type index.ErrUnsupportedType instead.
	ErrInvalidIndexSpec = errors.New("invalid index")
	// ErrStalePreparation: the index was built against a read version and is invalid at
	// the version it would commit on (a covered fragment removed or rewritten, the schema
	// changed, an index of the same name changed); build it again. The same value as
	// manifest.ErrStalePreparation and index.ErrStalePreparation's meaning.
	ErrStalePreparation = manifest.ErrStalePreparation
)

// HoldKindIndex is the catalog hold kind of a running index build.
const HoldKindIndex = "index"

// Defaults of an index build's watchdog.
const (
	// DefaultIndexIdleTimeout: a build that completes no storage read or write for this
	// long is cancelled (Options.IndexIdleTimeout).
	DefaultIndexIdleTimeout = 10 * time.Minute
	// DefaultIndexCheckInterval: how often the watchdog looks at the build's progress.
	DefaultIndexCheckInterval = 2 * time.Second
)

// MaxIndexSegments: UpdateIndex merges a BTree's segments into one when an update would
// leave more than this many.
const MaxIndexSegments = 4

// IndexSpec describes an index to build.
type IndexSpec struct {
	// Name of the index (default: "<column>_idx" for a BTree, "<columns>_zonemap" for a
	// zone map). Letters, digits, '_', '-' and '.'.
	Name string
	// Kind is index.KindBTree (default) or index.KindZoneMap.
	Kind string
	// Columns to index: exactly one for a BTree, one or more for a zone map (one pass).
	Columns []string
	// Replace an index of the same name in the same commit (else ErrIndexExists).
	Replace bool
	// Progress, when set, is called as rows are read (done rows of total), from the
	// building goroutine.
	Progress func(done, total int64)
}

// IndexIntent is what an index build may leave behind, for its recovery sidecar: every
// object it writes has a key starting with Prefix, and the version it may commit carries
// TxnID. Options.IndexSidecars stores it before the first object (recovery.IndexSidecars).
type IndexIntent struct {
	OperationID string    // the build's id (a ULID); also its catalog hold id, so recovery skips a live build
	Table       string    // the table indexed
	Created     time.Time // when the build began (UTC)
	TxnID       string    // the pre-minted id of the transaction the build may commit
	ReadVersion uint64    // the version the build reads and plans against
	Prefix      string    // <table>/_indices/<txn-id>/: every object the build writes is below it
}

// IndexSidecars stores the recovery sidecars of index builds (recovery implements it).
type IndexSidecars interface {
	// Arm durably records in before the build writes its first object; an error fails
	// the build with nothing written.
	Arm(ctx context.Context, in *IndexIntent) error
	// Disarm removes the sidecar after the build committed and published, or was
	// rejected (its files are then unreferenced: garbage collection fences and deletes
	// them).
	Disarm(ctx context.Context, in *IndexIntent) error
}

// IndexInfo describes one index of a version.
type IndexInfo struct {
	Name     string   `json:"name"`     // the index name (IndexSpec.Name)
	Kind     string   `json:"kind"`     // index.KindBTree or index.KindZoneMap
	Columns  []string `json:"columns"`  // indexed columns, by their current names
	Segments int      `json:"segments"` // separately built parts (CreateIndex makes one, each UpdateIndex adds one)
	// FragmentsCovered of Fragments (the version's live fragments); RowsCovered of Rows
	// (physical rows, deleted ones included). Uncovered fragments are scanned.
	FragmentsCovered int   `json:"fragments_covered"`
	Fragments        int   `json:"fragments"`    // live fragments of the version
	RowsCovered      int64 `json:"rows_covered"` // physical rows of the covered fragments
	Rows             int64 `json:"rows"`         // physical rows of the version (deleted ones included)
	Bytes            int64 `json:"bytes"`        // stored size of every segment's objects, in bytes
	// BuiltFrom is the newest version a segment was built from.
	BuiltFrom uint64 `json:"built_from"`
}

// Indexes describes the indexes of this handle's version, in name order. No I/O.
func (t *Table) Indexes() []IndexInfo { return IndexesOf(t.m) }

// IndexesOf describes the indexes of manifest m, in name order (Table.Indexes for a
// manifest read some other way, such as a stored version shown as it is). No I/O.
func IndexesOf(m *manifest.Manifest) []IndexInfo {
	schema := m.Schema.MustArrow()
	names := map[int32]string{}
	for i, id := range m.Schema.FieldIDs {
		names[id] = schema.Field(i).Name
	}
	out := []IndexInfo{}
	for _, g := range groupIndexes(m) {
		info := IndexInfo{Name: g.name, Kind: g.kind, Segments: len(g.segs), Fragments: len(m.Fragments), Columns: []string{}}
		for _, id := range g.fieldIDs {
			info.Columns = append(info.Columns, names[id])
		}
		covered := map[uint32]bool{}
		for _, s := range g.segs {
			info.Bytes += s.Bytes
			info.BuiltFrom = max(info.BuiltFrom, s.Version)
			for _, f := range s.Fragments {
				covered[f] = true
			}
		}
		for _, f := range m.Fragments {
			info.Rows += f.PhysicalRows
			if covered[f.ID] {
				info.FragmentsCovered++
				info.RowsCovered += f.PhysicalRows
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b IndexInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// IndexResult describes a committed index build.
type IndexResult struct {
	CommitResult           // the index version's commit
	Index        IndexInfo // the index as the committed version describes it
	// RowsIndexed and BytesWritten by this build (a delta: only the fragments it covered).
	RowsIndexed  int64 // physical rows read and indexed
	BytesWritten int64 // bytes of index objects stored
	// Merged: the build replaced the index's segments by one (UpdateIndex past
	// MaxIndexSegments).
	Merged bool
}

// CreateIndex builds an index over every live fragment of HEAD and commits it (DESIGN §7:
// outside write ownership). The build pins the version it reads (a catalog hold), stores
// its recovery sidecar first (Options.IndexSidecars), reads the indexed columns and
// writes its objects under <table>/_indices/<txn-id>/<uuid>/ without blocking any writer,
// then commits an index version from that read version: appends committed meanwhile stay
// uncovered (scanned), deletions are applied at query time, and a covered fragment removed
// or rewritten, a schema change, or a same-name index committed meanwhile rejects it with
// ErrStalePreparation. It is cancelled (index.ErrNoProgress) when it completes no storage
// read or write for Options.IndexIdleTimeout; a slow build that keeps progressing never
// is. The version is published by fast-forward.
//
// Errors (nothing committed): ErrIndexExists, ErrInvalidIndexSpec, filter.ErrUnknownColumn
// (naming the table's columns), index.ErrUnsupportedType, ErrReadOnly, ErrStalePreparation (with
// *manifest.ConflictError), ErrTableDropped, index.ErrNoProgress, store errors.
func (t *Table) CreateIndex(ctx context.Context, spec IndexSpec) (IndexResult, error) {
	if t.readOnly {
		return IndexResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	if err := t.refreshHead(ctx); err != nil {
		return IndexResult{}, err
	}
	spec, fieldIDs, err := t.checkIndexSpec(spec)
	if err != nil {
		return IndexResult{}, err
	}
	exists := slices.ContainsFunc(t.m.Indexes, func(ix manifest.Index) bool { return ix.Name == spec.Name })
	if exists && !spec.Replace {
		return IndexResult{}, fmt.Errorf("table %q: %w: %q (replace it, or drop it first)", t.name, ErrIndexExists, spec.Name)
	}
	var frags []*manifest.Fragment
	for i := range t.m.Fragments {
		frags = append(frags, &t.m.Fragments[i])
	}
	return t.buildIndex(ctx, spec, fieldIDs, frags, exists)
}

// UpdateIndex indexes the live fragments of HEAD that the index does not cover yet
// (appended since it was built, or produced by compaction): a new delta segment beside
// the index's others, committed as CreateIndex is. When that would leave more than
// MaxIndexSegments segments, it rebuilds the whole index as one segment instead. Nothing
// to cover commits nothing. Errors: ErrIndexNotFound, and CreateIndex's.
func (t *Table) UpdateIndex(ctx context.Context, name string) (IndexResult, error) {
	return t.UpdateIndexProgress(ctx, name, nil)
}

// UpdateIndexProgress is UpdateIndex calling progress (when not nil) as rows are read,
// as IndexSpec.Progress: done rows of total, the rows of the fragments the update reads,
// from the building goroutine.
func (t *Table) UpdateIndexProgress(ctx context.Context, name string, progress func(done, total int64)) (IndexResult, error) {
	if t.readOnly {
		return IndexResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	if err := t.refreshHead(ctx); err != nil {
		return IndexResult{}, err
	}
	g := findGroup(t.m, name)
	if g == nil {
		return IndexResult{}, fmt.Errorf("table %q: %w: %q", t.name, ErrIndexNotFound, name)
	}
	spec := IndexSpec{Name: g.name, Kind: g.kind, Progress: progress}
	covered := map[uint32]bool{}
	for _, s := range g.segs {
		for _, f := range s.Fragments {
			covered[f] = true
		}
	}
	var todo, all []*manifest.Fragment
	for i := range t.m.Fragments {
		f := &t.m.Fragments[i]
		all = append(all, f)
		if !covered[f.ID] {
			todo = append(todo, f)
		}
	}
	if len(todo) == 0 {
		return IndexResult{CommitResult: CommitResult{Version: t.m.Version}, Index: t.indexInfo(name)}, nil
	}
	if len(g.segs)+1 > MaxIndexSegments {
		res, err := t.buildIndex(ctx, spec, g.fieldIDs, all, true)
		res.Merged = err == nil
		return res, err
	}
	return t.buildIndex(ctx, spec, g.fieldIDs, todo, false)
}

// DropIndex removes the index name in a new version (its objects are collected by gc
// once no retained version names them). Errors: ErrIndexNotFound, ErrReadOnly, commit
// errors.
func (t *Table) DropIndex(ctx context.Context, name string) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	if err := t.refreshHead(ctx); err != nil {
		return CommitResult{}, err
	}
	if findGroup(t.m, name) == nil {
		return CommitResult{}, fmt.Errorf("table %q: %w: %q", t.name, ErrIndexNotFound, name)
	}
	txn := t.newTxn(manifest.OpCreateIndex, writeOptions{})
	txn.Op.RemovedIndexes = []string{name}
	return t.commit(ctx, txn)
}

func findGroup(m *manifest.Manifest, name string) *indexGroup {
	for _, g := range groupIndexes(m) {
		if g.name == name {
			return g
		}
	}
	return nil
}

func (t *Table) indexInfo(name string) IndexInfo {
	for _, info := range t.Indexes() {
		if info.Name == name {
			return info
		}
	}
	return IndexInfo{Name: name}
}

// checkIndexSpec fills in defaults and resolves the columns to field ids. Errors:
// ErrInvalidIndexSpec, filter.ErrUnknownColumn, index.ErrUnsupportedType.
func (t *Table) checkIndexSpec(spec IndexSpec) (IndexSpec, []int32, error) {
	if spec.Kind == "" {
		spec.Kind = index.KindBTree
	}
	if spec.Kind != index.KindBTree && spec.Kind != index.KindZoneMap {
		return spec, nil, fmt.Errorf("table %q: %w: unknown kind %q (want %s or %s)", t.name, ErrInvalidIndexSpec, spec.Kind, index.KindBTree, index.KindZoneMap)
	}
	if len(spec.Columns) == 0 {
		return spec, nil, fmt.Errorf("table %q: %w: an index needs a column", t.name, ErrInvalidIndexSpec)
	}
	if spec.Kind == index.KindBTree && len(spec.Columns) != 1 {
		return spec, nil, fmt.Errorf("table %q: %w: a btree index has exactly one column, not %d (a zonemap can cover several)", t.name, ErrInvalidIndexSpec, len(spec.Columns))
	}
	schema := t.Schema()
	var ids []int32
	var names []string
	for _, c := range spec.Columns {
		idx, err := filter.ResolveColumn(schema, c)
		if err != nil {
			return spec, nil, fmt.Errorf("table %q: index: %w", t.name, err) // names the column and lists the schema's
		}
		f := schema.Field(idx)
		if err := index.Supported(spec.Kind, f.Type); err != nil {
			return spec, nil, fmt.Errorf("table %q: index column %q: %w", t.name, f.Name, err)
		}
		if slices.Contains(ids, t.m.Schema.FieldIDs[idx]) {
			return spec, nil, fmt.Errorf("table %q: %w: column %q named twice", t.name, ErrInvalidIndexSpec, f.Name)
		}
		ids = append(ids, t.m.Schema.FieldIDs[idx])
		names = append(names, f.Name)
	}
	if spec.Name == "" {
		if spec.Kind == index.KindBTree {
			spec.Name = names[0] + "_idx"
		} else {
			spec.Name = strings.Join(names, "_") + "_zonemap"
		}
	}
	if err := manifest.ValidateTableName(spec.Name); err != nil {
		// The table-name rules, worded for an index: `"a/b": contains '/'`.
		why := strings.TrimPrefix(err.Error(), manifest.ErrInvalidTableName.Error()+" ")
		return spec, nil, fmt.Errorf("table %q: %w: index name %s", t.name, ErrInvalidIndexSpec, why)
	}
	return spec, ids, nil
}

// Failpoint seams of an index build.
var (
	seamIndexRead   = failpoint.Seam("engine.index_read")   // before each batch the build reads
	seamIndexCommit = failpoint.Seam("engine.index_commit") // objects written, before the commit
)

// buildIndex builds a segment of spec over frags of the handle's version (HEAD) and
// commits it, dropping the name's segments first when replace is set.
func (t *Table) buildIndex(ctx context.Context, spec IndexSpec, fieldIDs []int32, frags []*manifest.Fragment, replace bool) (IndexResult, error) {
	base := t.m
	txn := t.newTxn(manifest.OpCreateIndex, writeOptions{})
	seg := ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
	dir := index.Dir(t.name, txn.ID, seg)
	in := &IndexIntent{OperationID: manifest.NewTransactionID(), Table: t.name, Created: time.Now().UTC(),
		TxnID: txn.ID, ReadVersion: base.Version, Prefix: manifest.IndicesDir(t.name) + "/" + txn.ID + "/"}
	// The hold pins the read version against gc and tells recovery the build is alive.
	if cat := t.db.cat; cat != nil {
		h, err := cat.AcquireHold(ctx, catalog.Hold{ID: in.OperationID, Table: t.name, Kind: HoldKindIndex, Version: base.ContentVersion()}, 0)
		if err != nil {
			return IndexResult{}, fmt.Errorf("table %q: index %q: acquire hold: %w", t.name, spec.Name, err)
		}
		defer func() { _ = h.Release(context.WithoutCancel(ctx)) }()
	}
	sc := t.db.opts.IndexSidecars
	if sc != nil {
		if err := sc.Arm(ctx, in); err != nil {
			return IndexResult{}, fmt.Errorf("table %q: index %q: write recovery sidecar: %w", t.name, spec.Name, err)
		}
	}
	res, err := t.prepareAndCommit(ctx, spec, fieldIDs, frags, replace, base, txn, dir, seg)
	if sc != nil && (err == nil || OutcomeOf(err) == Rejected) {
		// Committed and published, or decided not to be: the sidecar has done its job
		// (unreferenced files go to gc, which fences before deleting). An undecided
		// outcome keeps it for recovery.
		_ = sc.Disarm(context.WithoutCancel(ctx), in)
	}
	return res, err
}

func (t *Table) prepareAndCommit(ctx context.Context, spec IndexSpec, fieldIDs []int32, frags []*manifest.Fragment, replace bool,
	base *manifest.Manifest, txn manifest.Transaction, dir, seg string) (IndexResult, error) {
	idle := t.db.opts.IndexIdleTimeout
	if idle <= 0 {
		idle = DefaultIndexIdleTimeout
	}
	interval := t.db.opts.IndexCheckInterval
	if interval <= 0 {
		interval = min(DefaultIndexCheckInterval, idle/4+1)
	}
	ps := &progressStore{Store: t.db.store}
	stalled := fmt.Errorf("%w: no storage read or write completed for %s", index.ErrNoProgress, idle)
	bctx, stop := watchProgress(ctx, ps.Progress, idle, interval, stalled)
	ix, rows, err := t.writeIndex(bctx, ps, spec, fieldIDs, frags, base, dir)
	stop()
	if err != nil {
		if cause := context.Cause(bctx); errors.Is(cause, index.ErrNoProgress) && ctx.Err() == nil {
			return IndexResult{}, fmt.Errorf("table %q: index %q: cancelled after %d completed requests: %w", t.name, spec.Name, ps.Progress(), cause)
		}
		return IndexResult{}, fmt.Errorf("table %q: index %q: %w", t.name, spec.Name, err)
	}
	ix.UUID, ix.Version = seg, base.Version
	if err := seamIndexCommit.Inject(ctx); err != nil {
		return IndexResult{}, err
	}
	txn.Op.NewIndexes = []manifest.Index{ix}
	if replace {
		txn.Op.RemovedIndexes = []string{spec.Name}
	}
	cr, err := t.commit(ctx, txn)
	out := IndexResult{CommitResult: cr, RowsIndexed: rows, BytesWritten: ix.Bytes, Index: t.indexInfo(spec.Name)}
	switch {
	case err != nil && errors.Is(err, ErrStalePreparation):
		err = fmt.Errorf("table %q: index %q built from version %d is stale (build it again): %w", t.name, spec.Name, base.Version, err)
	case err != nil && errors.Is(err, manifest.ErrRetryable):
		err = fmt.Errorf("table %q: index %q built from version %d: %w", t.name, spec.Name, base.Version, err)
	}
	return out, err
}

// writeIndex reads the indexed columns of frags (every physical row: deletion vectors
// are applied when a query reads the index's candidates) and writes the segment's
// objects under dir. It returns the segment (without uuid and version) and the rows it
// indexed.
func (t *Table) writeIndex(ctx context.Context, s *progressStore, spec IndexSpec, fieldIDs []int32, frags []*manifest.Fragment,
	base *manifest.Manifest, dir string) (manifest.Index, int64, error) {
	schema := base.Schema.MustArrow()
	cols := make([]int, len(fieldIDs))
	for i, id := range fieldIDs {
		cols[i] = slices.Index(base.Schema.FieldIDs, id)
	}
	var total int64
	for _, f := range frags {
		total += f.PhysicalRows
	}
	ix := manifest.Index{Name: spec.Name, Kind: spec.Kind, FieldIDs: fieldIDs}
	var chunks []btree.Chunk
	zb := zonemap.NewBuilder(fieldIDs, 0)
	var done int64
	release := func() {
		for _, c := range chunks {
			c.Values.Release()
		}
	}
	defer release()
	for _, f := range frags {
		ix.Fragments = append(ix.Fragments, f.ID)
		if len(f.Files) != 1 {
			return ix, 0, t.dataError(fmt.Sprint(f.Files), fmt.Errorf("fragment %d has %d data files; this build reads one per fragment", f.ID, len(f.Files)))
		}
		df := f.Files[0]
		rd, err := fragment.OpenFile(ctx, s, df, t.db.opts.Allocator)
		if err != nil {
			return ix, 0, t.dataError(df.Key, err)
		}
		if err := rd.CheckSchema(schema, base.Schema.FieldIDs); err != nil {
			rd.Close()
			return ix, 0, t.dataError(df.Key, err)
		}
		var start int64
		for b := range rd.NumBatches() {
			if err := seamIndexRead.Inject(ctx); err != nil {
				rd.Close()
				return ix, 0, err
			}
			arrs, n, err := readColumns(rd, df, b, cols, fieldIDs, schema, t.db.opts.Allocator)
			if err != nil {
				rd.Close()
				return ix, 0, t.dataError(df.Key, err)
			}
			if spec.Kind == index.KindBTree {
				addrs := make([]uint64, n)
				for i := range addrs {
					addrs[i] = manifest.RowAddress(f.ID, uint32(start)+uint32(i))
				}
				chunks = append(chunks, btree.Chunk{Values: arrs[0], Addrs: addrs})
			} else {
				err := zb.Add(f.ID, uint32(start), arrs)
				for _, a := range arrs {
					a.Release()
				}
				if err != nil {
					rd.Close()
					return ix, 0, err
				}
			}
			start += n
			done += n
			if spec.Progress != nil {
				spec.Progress(done, total)
			}
		}
		rd.Close()
	}
	switch spec.Kind {
	case index.KindBTree:
		field := schema.Field(cols[0])
		built, err := btree.Build(ctx, s, dir, field, chunks, btree.BuildOptions{Write: t.db.opts.Write, Allocator: t.db.opts.Allocator})
		if err != nil {
			return ix, 0, err
		}
		ix.Files, ix.Bytes, ix.Rows = built.Files, built.Bytes, built.Lookup.Rows
	default:
		key, size, err := zonemap.Store(ctx, s, dir, zb.Map())
		if err != nil {
			return ix, 0, err
		}
		ix.Files, ix.Bytes, ix.Rows = []string{key}, size, done
	}
	return ix, done, nil
}

// readColumns reads batch b of a data file and returns the table columns cols (schema
// indices; field ids ids) in that order, a column the file lacks (added later) as nulls.
func readColumns(rd *fragment.FileReader, df fragment.DataFile, b int, cols []int, ids []int32, schema *arrow.Schema, mem memory.Allocator) ([]arrow.Array, int64, error) {
	var fileCols []int
	pos := make([]int, len(cols))
	for i := range cols {
		pos[i] = -1
		if fc := indexOf(df.FieldIDs, ids[i]); fc >= 0 {
			pos[i] = len(fileCols)
			fileCols = append(fileCols, fc)
		}
	}
	rec, err := rd.ReadBatch(b, fileCols)
	if err != nil {
		return nil, 0, err
	}
	defer rec.Release()
	out := make([]arrow.Array, len(cols))
	for i, c := range cols {
		if pos[i] >= 0 {
			out[i] = rec.Column(pos[i])
			out[i].Retain()
		} else {
			out[i] = array.MakeArrayOfNull(mem, schema.Field(c).Type, int(rec.NumRows()))
		}
	}
	return out, rec.NumRows(), nil
}
