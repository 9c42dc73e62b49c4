package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/panics"
	"github.com/shale-db/shale/manifest"
)

// ScanOptions select what a scan returns.
type ScanOptions struct {
	// Columns to return, in this order (nil = every column in schema order).
	Columns []string
	// Filter is a SQL WHERE expression ("" = all rows). Errors: filter.ErrSyntax,
	// filter.ErrUnknownColumn, filter.ErrType.
	Filter string
	// Limit stops after this many rows (0 = no limit).
	Limit int64
	// NoIndex scans without the table's indexes (results are the same; for comparison).
	NoIndex bool
	// NoStatistics reads every batch of every live fragment without pruning by the
	// fragments' and batches' min/max statistics (results are the same; with NoIndex it
	// is a full scan, the baseline of index benchmarks).
	NoStatistics bool
	// ForceIndexes uses every usable index whatever the cost estimates say (results are
	// the same; for tests and comparisons that must exercise the indexes).
	ForceIndexes bool
	// NoWAL reads the base table alone, without the rows still in the table's WAL
	// (unmerged generations and entries). A handle at an older version (Checkout) always
	// reads the base table alone: the WAL is not versioned with it.
	NoWAL bool
	// forceIndexes (tests) uses every usable index whatever the cost estimates say.
	forceIndexes bool
	// noLate (tests) decodes every column of a batch before evaluating the filter.
	noLate bool
}

// batchTask is one record batch of one fragment's data file that statistics could not rule
// out. rowStart is the offset of the batch's first row within the fragment.
type batchTask struct {
	frag     *manifest.Fragment
	fileIdx  int
	batch    int
	rowStart int64
	rows     int64
	// sel, when set, holds the fragment row offsets an index allows (candidates; the
	// filter is still evaluated on them); rows outside it are not returned.
	sel *roaring.Bitmap
	// mem, when set, is a batch already in memory (rows of the WAL above its replay
	// position), its columns named by memIDs; frag is nil then.
	mem    arrow.RecordBatch
	memIDs []int32
}

// scanPlan is a pruned list of batches plus what to read from each.
type scanPlan struct {
	t        *Table
	expr     *filter.Expr // nil: no filter
	where    string       // the filter's text, for errors
	outCols  []int        // table schema indices of the returned columns
	readCols []int        // table schema indices read (outCols ∪ filter columns)
	out      *arrow.Schema
	readSch  *arrow.Schema // the fields of readCols
	// Late materialization: with a filter, a batch read from a data file decodes the
	// readCols positions in filterPos, evaluates the filter, and decodes restPos only when
	// a row is selected. late is false when restPos is empty (or ScanOptions.noLate).
	filterPos, restPos []int
	late               bool
	// transient decodes batches read from data files into pooled memory
	// (fragment.Batch.DecodeTransient), which returns to the pool when the last reference
	// to it is released: set where every holder follows arrow's reference counts (a
	// Scanner, whose caller releases what it got or retains it; Count only counts).
	transient bool
	tasks     []batchTask
	pruned    ScanStats
	// indexUses says how the planner used each index it considered.
	indexUses   []IndexUse
	indexPruned int  // batches statistics kept that the indexes skipped
	force       bool // ScanOptions.forceIndexes
	// wal says what the plan takes from the WAL; release frees what it read (close).
	wal     WALPlan
	release []func()
}

// close releases what planning read (WAL batches). Idempotent.
func (p *scanPlan) close() {
	for _, f := range p.release {
		f()
	}
	p.release = nil
}

// ScanStats count what a scan's pruning skipped (ScanPlan has the same counts and more).
type ScanStats struct {
	Fragments, FragmentsPruned int // fragments of the version; of those, skipped whole (no live rows, or statistics exclude every row)
	Batches, BatchesPruned     int // record batches of the fragments kept; of those, skipped by statistics or an index
}

func (t *Table) plan(ctx context.Context, opts ScanOptions) (*scanPlan, error) {
	schema := t.Schema()
	p := &scanPlan{t: t}
	if opts.Filter != "" {
		e, err := filter.Parse(opts.Filter, schema)
		if err != nil {
			return nil, fmt.Errorf("table %q: WHERE %q: %w", t.name, opts.Filter, err)
		}
		p.expr, p.where = e, opts.Filter
	}
	if opts.Columns == nil {
		for i := range schema.NumFields() {
			p.outCols = append(p.outCols, i)
		}
	} else {
		for _, c := range opts.Columns {
			// The same rule as column names in WHERE: exact, else a unique
			// case-insensitive match.
			idx, err := filter.ResolveColumn(schema, c)
			if err != nil {
				return nil, fmt.Errorf("table %q: %w", t.name, err) // names the column and lists the schema's
			}
			p.outCols = append(p.outCols, idx)
		}
	}
	fields := make([]arrow.Field, len(p.outCols))
	for i, c := range p.outCols {
		fields[i] = schema.Field(c)
	}
	p.out = arrow.NewSchema(fields, nil)
	p.readCols = append([]int(nil), p.outCols...)
	var filterCols []int
	if p.expr != nil {
		for _, c := range p.expr.Columns() {
			idx := schema.FieldIndices(c)[0]
			filterCols = append(filterCols, idx)
			if !containsInt(p.readCols, idx) {
				p.readCols = append(p.readCols, idx)
			}
		}
	}
	readFields := make([]arrow.Field, len(p.readCols))
	for i, c := range p.readCols {
		readFields[i] = schema.Field(c)
		if containsInt(filterCols, c) {
			p.filterPos = append(p.filterPos, i)
		} else {
			p.restPos = append(p.restPos, i)
		}
	}
	p.readSch = arrow.NewSchema(readFields, nil)
	p.late = p.expr != nil && len(p.restPos) > 0 && !opts.noLate
	m := t.m
	for fi := range m.Fragments {
		f := &m.Fragments[fi]
		p.pruned.Fragments++
		if f.LiveRows() == 0 {
			p.pruned.FragmentsPruned++
			continue
		}
		if len(f.Files) != 1 {
			return nil, fmt.Errorf("table %q version %d: fragment %d has %d data files; this build reads one per fragment", t.name, m.Version, f.ID, len(f.Files))
		}
		df := &f.Files[0]
		prune := p.expr != nil && !opts.NoStatistics
		if prune && !p.expr.MayMatch(df.Rows, statsLookup(m, df.FieldIDs, df.Stats)) {
			p.pruned.FragmentsPruned++
			continue
		}
		var start int64
		for bi, b := range df.Batches {
			p.pruned.Batches++
			if prune && !p.expr.MayMatch(b.Rows, statsLookup(m, df.FieldIDs, df.BatchStats(bi))) {
				p.pruned.BatchesPruned++
			} else {
				p.tasks = append(p.tasks, batchTask{frag: f, fileIdx: 0, batch: bi, rowStart: start, rows: b.Rows})
			}
			start += b.Rows
		}
	}
	if !opts.NoIndex {
		p.force = opts.forceIndexes || opts.ForceIndexes
		if err := p.useIndexes(ctx); err != nil {
			return nil, err
		}
	}
	if !opts.NoWAL {
		if err := p.addWAL(ctx); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// statsLookup adapts a data file's per-column statistics to the filter's pruning interface.
func statsLookup(m *manifest.Manifest, fileFieldIDs []int32, stats []fragment.ColumnStats) filter.StatsFunc {
	return func(column string) (filter.ColumnStats, bool) {
		id, ok := m.Schema.FieldID(column)
		if !ok {
			return filter.ColumnStats{}, false
		}
		for i, fid := range fileFieldIDs {
			if fid != id || i >= len(stats) {
				continue
			}
			s := stats[i]
			cs := filter.ColumnStats{NullCount: s.NullCount}
			lo, okLo := statValue(s.Min)
			hi, okHi := statValue(s.Max)
			if s.HasMinMax && okLo && okHi {
				cs.HasMinMax, cs.Min, cs.Max = true, lo, hi
			}
			return cs, true
		}
		return filter.ColumnStats{}, false
	}
}

func statValue(v fragment.Value) (any, bool) {
	switch v.Kind {
	case fragment.KindInt:
		return v.Int, true
	case fragment.KindUint:
		return v.Uint, true
	case fragment.KindFloat:
		return v.Float, true
	case fragment.KindString, fragment.KindBinary: // binary: the raw bytes, compared bytewise
		return v.Str, true
	case fragment.KindBool:
		return v.Bool, true
	}
	return nil, false
}

// fragmentState caches what a scan needs per fragment: its open file reader and its
// deletion vector, each loaded once.
type fragmentState struct {
	once sync.Once
	rd   *fragment.FileReader
	dv   *roaring.Bitmap
	err  error
}

type scanState struct {
	t     *Table
	mu    sync.Mutex
	frags map[uint32]*fragmentState
}

func (t *Table) newScanState() *scanState {
	return &scanState{t: t, frags: map[uint32]*fragmentState{}}
}

// fragment opens f's data file (checked against the table schema: a column whose type
// differs from the schema field of its field id is a corrupt file) and reads its deletion
// vector, once per scan. Errors name the table, version and object (*manifest.ObjectError):
// fragment.ErrCorrupt, store errors, ErrInternal for a panic.
func (s *scanState) fragment(ctx context.Context, f *manifest.Fragment) (*fragmentState, error) {
	s.mu.Lock()
	st, ok := s.frags[f.ID]
	if !ok {
		st = &fragmentState{}
		s.frags[f.ID] = st
	}
	s.mu.Unlock()
	st.once.Do(func() {
		// A panic here would leave the Once done with neither a reader nor an error.
		defer func() {
			if v := recover(); v != nil {
				st.err = s.t.dataError(f.Files[0].Key, panics.New("open", "", v))
			}
		}()
		db := s.t.db
		st.rd, st.err = fragment.OpenFile(ctx, db.store, f.Files[0], db.opts.Allocator)
		if st.err != nil {
			st.err = s.t.dataError(f.Files[0].Key, st.err)
			return
		}
		if err := st.rd.CheckSchema(s.t.Schema(), s.t.m.Schema.FieldIDs); err != nil {
			st.err = s.t.dataError(f.Files[0].Key, err)
			return
		}
		if f.Deletion != nil {
			st.dv, st.err = fragment.ReadDeletionVector(ctx, db.store, f.Deletion.Key)
			if st.err != nil {
				st.err = s.t.dataError(f.Deletion.Key, st.err)
			}
		}
	})
	return st, st.err
}

func (s *scanState) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.frags {
		if st.rd != nil {
			st.rd.Close()
		}
	}
}

// dataError names the table and version in an error about one of its objects.
func (t *Table) dataError(key string, err error) error {
	return &manifest.ObjectError{Table: t.name, Version: t.m.Version, Key: key, Err: err}
}

// recoverTask, deferred directly by the code a scan goroutine runs for task, turns a
// panic into an error wrapping ErrInternal that names the table, version and the task's
// data file: a panic on a goroutine the engine started would otherwise end the process.
func (p *scanPlan) recoverTask(errp *error, task batchTask) {
	if v := recover(); v != nil {
		key := "the WAL"
		if task.frag != nil {
			key = task.frag.Files[task.fileIdx].Key
		}
		*errp = p.t.dataError(key, panics.New(fmt.Sprintf("batch %d", task.batch), "", v))
	}
}

// seamReadBatch is hit by every batch a scan, count, delete or update reads, on the
// goroutine that reads it.
var seamReadBatch = failpoint.Seam("engine.read_batch")

// readBatch reads task's batch with the columns of readCols (table schema indices) and
// returns it in readCols order, plus the selection mask: rows not deleted and (with a
// filter) matching it. A nil mask selects every row.
func (p *scanPlan) readBatch(ctx context.Context, st *scanState, task batchTask) (arrow.RecordBatch, *array.Boolean, error) {
	if err := seamReadBatch.Inject(ctx); err != nil {
		return nil, nil, err
	}
	if task.mem != nil {
		return p.readMem(ctx, task)
	}
	t := p.t
	fs, err := st.fragment(ctx, task.frag)
	if err != nil {
		return nil, nil, err
	}
	df := &task.frag.Files[task.fileIdx]
	schema := t.Schema()
	// A nullable column added (AddColumns) after the file was written reads as nulls.
	fileCols := make([]int, 0, len(p.readCols))
	for _, c := range p.readCols {
		if fc := indexOf(df.FieldIDs, t.m.Schema.FieldIDs[c]); fc >= 0 {
			fileCols = append(fileCols, fc)
		} else if !schema.Field(c).Nullable {
			return nil, nil, t.dataError(df.Key, fmt.Errorf("data file lacks non-nullable column %q", schema.Field(c).Name))
		}
	}
	bd, err := fs.rd.FetchBatch(task.batch, fileCols)
	if err != nil {
		return nil, nil, t.dataError(df.Key, err)
	}
	defer bd.Release() // decoded columns hold no reference to the fetched bytes
	if bd.Rows() != task.rows {
		return nil, nil, t.dataError(df.Key, fmt.Errorf("%w: batch %d has %d rows, manifest says %d", fragment.ErrCorrupt, task.batch, bd.Rows(), task.rows))
	}
	cols := make([]arrow.Array, len(p.readCols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	decode := func(pos []int) error {
		return p.decodeColumns(bd, df, pos, cols)
	}
	mask := p.rowMask(fs, task)
	release := func() {
		if mask != nil {
			mask.Release()
		}
	}
	if p.expr != nil {
		first := p.filterPos
		if !p.late {
			first = nil // every position, in one decode
			for i := range p.readCols {
				first = append(first, i)
			}
		}
		if err := decode(first); err != nil {
			release()
			return nil, nil, err
		}
		frec := p.record(cols, first, task.rows)
		fm, err := p.expr.Evaluate(ctx, frec)
		frec.Release()
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("table %q: WHERE %q: %w", t.name, p.where, err)
		}
		if mask == nil {
			mask = fm
		} else {
			both := andMasks(t.db.opts.Allocator, mask, fm)
			mask.Release()
			fm.Release()
			mask = both
		}
		if p.late {
			if countTrue(mask) == 0 {
				// No row of the batch is selected: its other columns are never decoded.
				mask.Release()
				return p.emptyRecord(), nil, nil
			}
			if err := decode(p.restPos); err != nil {
				release()
				return nil, nil, err
			}
		}
	} else {
		all := make([]int, len(p.readCols))
		for i := range all {
			all[i] = i
		}
		if err := decode(all); err != nil {
			release()
			return nil, nil, err
		}
	}
	return array.NewRecordBatch(p.readSch, cols, task.rows), mask, nil
}

// decodeColumns decodes the readCols positions pos of batch bd into cols (a column the
// file lacks is all nulls).
func (p *scanPlan) decodeColumns(bd *fragment.Batch, df *fragment.DataFile, pos []int, cols []arrow.Array) error {
	t := p.t
	var fileCols, at []int
	for _, i := range pos {
		if fc := indexOf(df.FieldIDs, t.m.Schema.FieldIDs[p.readCols[i]]); fc >= 0 {
			fileCols = append(fileCols, fc)
			at = append(at, i)
		} else {
			cols[i] = array.MakeArrayOfNull(t.db.opts.Allocator, p.readSch.Field(i).Type, int(bd.Rows()))
		}
	}
	if len(fileCols) == 0 {
		return nil
	}
	decode := bd.Decode
	if p.transient {
		decode = bd.DecodeTransient
	}
	rec, err := decode(fileCols)
	if err != nil {
		return t.dataError(df.Key, err)
	}
	defer rec.Release()
	for j, i := range at {
		cols[i] = rec.Column(j)
		cols[i].Retain()
	}
	return nil
}

// record is the readCols positions pos of cols as a record (the filter finds its columns
// by name), valid while cols are.
func (p *scanPlan) record(cols []arrow.Array, pos []int, rows int64) arrow.RecordBatch {
	fields := make([]arrow.Field, len(pos))
	arrs := make([]arrow.Array, len(pos))
	for j, i := range pos {
		fields[j], arrs[j] = p.readSch.Field(i), cols[i]
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rows)
}

// emptyRecord is a batch of no rows with the readCols fields.
func (p *scanPlan) emptyRecord() arrow.RecordBatch {
	cols := make([]arrow.Array, len(p.readCols))
	for i := range cols {
		cols[i] = array.MakeArrayOfNull(p.t.db.opts.Allocator, p.readSch.Field(i).Type, 0)
		defer cols[i].Release()
	}
	return array.NewRecordBatch(p.readSch, cols, 0)
}

// rowMask is the rows of task's batch that neither its fragment's deletion vector nor the
// index selection excludes (nil: every row).
func (p *scanPlan) rowMask(fs *fragmentState, task batchTask) *array.Boolean {
	mem := p.t.db.opts.Allocator
	var mask *array.Boolean
	if fs.dv != nil && !fs.dv.IsEmpty() {
		mask = deletionMask(mem, fs.dv, task.rowStart, task.rows)
	}
	if task.sel != nil {
		sm := selectionMask(mem, task.sel, task.rowStart, task.rows)
		if mask == nil {
			mask = sm
		} else {
			both := andMasks(mem, mask, sm)
			mask.Release()
			sm.Release()
			mask = both
		}
	}
	return mask
}

// selectionMask is true at the rows of [start, start+n) in sel (one pass over sel's
// members in the range, not a lookup per row).
func selectionMask(mem memory.Allocator, sel *roaring.Bitmap, start, n int64) *array.Boolean {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(n)))
	bits := buf.Bytes()
	clear(bits)
	it := sel.Iterator()
	it.AdvanceIfNeeded(uint32(start))
	for it.HasNext() {
		r := int64(it.Next())
		if r >= start+n {
			break
		}
		bitutil.SetBit(bits, int(r-start))
	}
	data := array.NewData(arrow.FixedWidthTypes.Boolean, int(n), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	buf.Release()
	return array.NewBooleanData(data)
}

// deletionMask is true at the rows of [start, start+n) not in dv (a pass over dv's
// members in the range on a bitmap of all ones).
func deletionMask(mem memory.Allocator, dv *roaring.Bitmap, start, n int64) *array.Boolean {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(n)))
	bits := buf.Bytes()
	clear(bits)
	bitutil.SetBitsTo(bits, 0, n, true)
	it := dv.Iterator()
	it.AdvanceIfNeeded(uint32(start))
	for it.HasNext() {
		r := int64(it.Next())
		if r >= start+n {
			break
		}
		bitutil.ClearBit(bits, int(r-start))
	}
	data := array.NewData(arrow.FixedWidthTypes.Boolean, int(n), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	buf.Release()
	return array.NewBooleanData(data)
}

// andMasks is a AND b (masks have no nulls: Evaluate folds NULL to false), bitmap-wise.
func andMasks(mem memory.Allocator, a, b *array.Boolean) *array.Boolean {
	n := int64(a.Len())
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(n)))
	bitutil.BitmapAnd(a.Data().Buffers()[1].Bytes(), b.Data().Buffers()[1].Bytes(),
		int64(a.Data().Offset()), int64(b.Data().Offset()), buf.Bytes(), 0, n)
	data := array.NewData(arrow.FixedWidthTypes.Boolean, int(n), []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer data.Release()
	buf.Release()
	return array.NewBooleanData(data)
}

// countTrue is the number of rows m selects (true and not null), by popcount.
func countTrue(m *array.Boolean) int64 {
	n := m.Len()
	if n == 0 {
		return 0
	}
	off := m.Data().Offset()
	vals := m.Data().Buffers()[1].Bytes()
	if m.NullN() == 0 {
		return int64(bitutil.CountSetBits(vals, off, n))
	}
	var c int64
	valid := m.NullBitmapBytes()
	for i := range n {
		if bitutil.BitIsSet(valid, off+i) && bitutil.BitIsSet(vals, off+i) {
			c++
		}
	}
	return c
}

// Scanner streams a scan's result as Arrow record batches; it implements
// array.RecordReader. Batches are read and decoded ScanParallelism at a time and returned in
// table order. Call Err after Next returns false, and Release when done. A Scanner is used
// by one goroutine (it reads ahead on its own goroutines); the batch RecordBatch returns
// is valid until the next Next, so Retain it to keep it longer (and Release it when
// done). The batches' memory is reused by later decodes once every reference to it is
// released (arrow's reference counts), so a value that aliases a batch (a string from
// Value) must be copied to outlive it; a batch retained and never released is left to
// the garbage collector.
type Scanner struct {
	plan    *scanPlan
	state   *scanState
	ctx     context.Context
	cancel  context.CancelFunc
	results chan chan scanResult
	cur     arrow.RecordBatch
	err     error
	left    int64 // rows still allowed by Limit (-1 = unlimited)
	refs    int64
}

type scanResult struct {
	rec arrow.RecordBatch
	err error
}

// Scan returns the rows of this handle's version selected by opts. Planning (before Scan
// returns) prunes fragments and batches by statistics and indexes and reads no data file;
// the Scanner then reads the batches left, ScanParallelism at a time, with range requests.
// Errors from Scan: filter.ErrSyntax, filter.ErrUnknownColumn (a filter or Columns name,
// with the table's columns listed), filter.ErrType, filter.ErrUnsupported, and index
// read errors. Errors from Scanner.Err: *manifest.ObjectError naming the table, version
// and data file, wrapping manifest.ErrCorrupt (bytes that fail their checksum or schema
// check), a store error (store.ErrNotFound when garbage collection deleted a file of an
// old version nobody pinned: see Pin), or ErrInternal; ctx's error when it ends.
func (t *Table) Scan(ctx context.Context, opts ScanOptions) (*Scanner, error) {
	p, err := t.plan(ctx, opts)
	if err != nil {
		return nil, err
	}
	// Decoded bodies come from a pool and return to it when the caller releases the last
	// batch referencing them (a full scan no longer allocates and faults in ~140 MB of
	// fresh memory per 3M rows; a caller that retains a batch keeps its memory).
	p.transient = true
	ctx, cancel := context.WithCancel(ctx)
	s := &Scanner{plan: p, state: t.newScanState(), ctx: ctx, cancel: cancel, left: -1, refs: 1}
	if opts.Limit > 0 {
		s.left = opts.Limit
	}
	par := t.db.opts.ScanParallelism
	s.results = make(chan chan scanResult, par)
	sem := make(chan struct{}, par)
	go func() {
		defer close(s.results)
		for _, task := range p.tasks {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			ch := make(chan scanResult, 1)
			select {
			case s.results <- ch:
			case <-ctx.Done():
				<-sem
				return
			}
			go func(task batchTask) {
				defer func() { <-sem }()
				rec, err := p.produceGuarded(ctx, s.state, task)
				ch <- scanResult{rec, err}
			}(task)
		}
	}()
	return s, nil
}

// produceGuarded is produce on a scan goroutine: a panic becomes an error (recoverTask).
func (p *scanPlan) produceGuarded(ctx context.Context, st *scanState, task batchTask) (_ arrow.RecordBatch, err error) {
	defer p.recoverTask(&err, task)
	return p.produce(ctx, st, task)
}

// produce reads one batch and returns its selected rows with the output columns.
func (p *scanPlan) produce(ctx context.Context, st *scanState, task batchTask) (arrow.RecordBatch, error) {
	rec, mask, err := p.readBatch(ctx, st, task)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	if mask != nil && countTrue(mask) == rec.NumRows() {
		mask.Release() // every row selected: the batch as it is
		mask = nil
	}
	if mask != nil {
		defer mask.Release()
		// Filter copies the selected rows (arrow-go's filter is a take of the selected
		// indices into new arrays, even when every row is selected), so a batch with
		// few matches does not hold its whole decoded body.
		filtered, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
		if err != nil {
			return nil, err
		}
		defer filtered.Release()
		rec = filtered
	}
	cols := make([]arrow.Array, len(p.outCols))
	for i := range p.outCols {
		cols[i] = rec.Column(i)
	}
	return array.NewRecordBatch(p.out, cols, rec.NumRows()), nil
}

// Schema is the schema of the returned batches.
func (s *Scanner) Schema() *arrow.Schema { return s.plan.out }

// Stats reports what statistics pruning skipped.
func (s *Scanner) Stats() ScanStats { return s.plan.pruned }

// Next advances to the next non-empty batch.
func (s *Scanner) Next() bool {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	if s.err != nil || s.left == 0 {
		return false
	}
	for ch := range s.results {
		r := <-ch
		if r.err != nil {
			s.err = r.err
			s.cancel()
			s.drain()
			return false
		}
		if r.rec.NumRows() == 0 {
			r.rec.Release()
			continue
		}
		if s.left >= 0 && r.rec.NumRows() > s.left {
			sl := r.rec.NewSlice(0, s.left)
			r.rec.Release()
			r.rec = sl
		}
		if s.left >= 0 {
			s.left -= r.rec.NumRows()
		}
		s.cur = r.rec
		return true
	}
	return false
}

// drain releases results produced after the scan stopped.
func (s *Scanner) drain() {
	for ch := range s.results {
		if r := <-ch; r.rec != nil {
			r.rec.Release()
		}
	}
}

// RecordBatch is the current batch, valid until the next call to Next.
func (s *Scanner) RecordBatch() arrow.RecordBatch { return s.cur }

// Record is RecordBatch (array.RecordReader's older name).
func (s *Scanner) Record() arrow.RecordBatch { return s.cur }

// Err is the error that stopped the scan, if any.
func (s *Scanner) Err() error {
	if s.err != nil && errors.Is(s.err, context.Canceled) && s.ctx.Err() != nil && s.left == 0 {
		return nil
	}
	return s.err
}

// Retain is part of array.RecordReader.
func (s *Scanner) Retain() { s.refs++ }

// Release stops the scan and frees its resources.
func (s *Scanner) Release() {
	s.refs--
	if s.refs > 0 {
		return
	}
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	s.cancel()
	s.drain()
	s.state.close()
	s.plan.close()
}

// Count returns the number of live rows of this version matching where ("" = all rows,
// answered from the manifest without any request). A filter reads only the filter's
// columns of the batches statistics cannot prune. Errors: as Scan and Scanner.Err.
func (t *Table) Count(ctx context.Context, where string) (int64, error) {
	if where == "" {
		n, err := t.walRows(ctx)
		return t.m.LiveRows() + n, err
	}
	p, err := t.plan(ctx, ScanOptions{Filter: where, Columns: []string{}})
	if err != nil {
		return 0, err
	}
	defer p.close()
	p.transient = true // only the mask is kept
	st := p.t.newScanState()
	defer st.close()
	var n atomic.Int64
	err = p.forEach(ctx, st, func(task batchTask, rec arrow.RecordBatch, mask *array.Boolean) error {
		if mask == nil {
			n.Add(rec.NumRows())
		} else {
			n.Add(countTrue(mask))
		}
		return nil
	})
	return n.Load(), err
}

// forEach reads every planned batch, ScanParallelism at a time and in no particular order,
// and calls f with the batch (readCols order) and its selection mask (nil = all rows).
// f may be called from several goroutines at once. The first error stops the rest; a
// panic in reading or in f is an error (recoverTask).
func (p *scanPlan) forEach(ctx context.Context, st *scanState, f func(task batchTask, rec arrow.RecordBatch, mask *array.Boolean) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	tasks := make(chan batchTask)
	for range p.t.db.opts.ScanParallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for task := range tasks {
				if err := p.visit(ctx, st, task, f); err != nil {
					fail(err)
				}
			}
		}()
	}
feed:
	for _, task := range p.tasks {
		select {
		case tasks <- task:
		case <-ctx.Done():
			break feed
		}
	}
	close(tasks)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// visit reads task's batch and calls f with it (forEach's worker step), turning a panic
// into an error.
func (p *scanPlan) visit(ctx context.Context, st *scanState, task batchTask, f func(task batchTask, rec arrow.RecordBatch, mask *array.Boolean) error) (err error) {
	defer p.recoverTask(&err, task)
	rec, mask, err := p.readBatch(ctx, st, task)
	if err != nil {
		return err
	}
	defer rec.Release()
	if mask != nil {
		defer mask.Release()
	}
	return f(task, rec, mask)
}

func indexOf(ids []int32, id int32) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func fieldNames(s *arrow.Schema) string {
	out := ""
	for i, f := range s.Fields() {
		if i > 0 {
			out += ", "
		}
		out += f.Name
	}
	return out
}

var _ array.RecordReader = (*Scanner)(nil)
