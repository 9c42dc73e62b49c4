package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/wal"
)

// Table configuration keys of the write-ahead log (see package wal). A table has a WAL
// once ConfigWALShards is set to a shard count of at least 1.
const (
	ConfigWALShards        = "shale.wal.shards"             // number of shards (ids "0" … "N-1"); 0 or absent: no WAL
	ConfigWALFlushBytes    = "shale.wal.flush_bytes"        // memtable bytes that start a flush (default wal.DefaultFlushBytes)
	ConfigWALFlushInterval = "shale.wal.flush_interval"     // a memtable holding rows longer is flushed (Go duration; default DefaultWALFlushInterval)
	ConfigWALBacklogSoft   = "shale.wal.backlog_soft_bytes" // unmerged bytes above which appends wait (default DefaultWALBacklogSoft)
	ConfigWALBacklogHard   = "shale.wal.backlog_hard_bytes" // unmerged bytes at which appends fail with wal.ErrBacklog (default DefaultWALBacklogHard)
)

// Defaults of the WAL configuration keys.
const (
	DefaultWALFlushInterval = time.Minute
	DefaultWALBacklogSoft   = 1 << 30
	DefaultWALBacklogHard   = 4 << 30
)

var (
	// ErrNoWAL: the table has no WAL shards (set ConfigWALShards with UpdateConfig).
	ErrNoWAL = errors.New("table has no WAL (set " + ConfigWALShards + ")")
	// ErrShardOutOfRange: a shard number outside [0, ConfigWALShards).
	ErrShardOutOfRange = errors.New("WAL shard out of range")
	// ErrWALPending: a delete, update or overwrite met rows still in the table's WAL (not
	// merged into the base table). It would not apply to them; merge the WAL first
	// (Table.MergeWAL, shale wal merge). Nothing was written.
	ErrWALPending = errors.New("rows are in the WAL, not yet merged into the table")
	// ErrWALAhead: the handle's version is older than generations the WAL has merged and
	// its writer has dropped from the shard manifest, so a read at the handle's version
	// cannot include them. Refresh the handle (or read with ScanOptions.NoWAL).
	ErrWALAhead = errors.New("the WAL merged generations newer than the handle's version")
)

// WALShards is the shard count config sets (0: no WAL, also for a malformed value).
func WALShards(config map[string]string) int {
	n, err := strconv.Atoi(config[ConfigWALShards])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func configBytes(config map[string]string, key string, def int64) int64 {
	if n, err := strconv.ParseInt(config[key], 10, 64); err == nil {
		return n
	}
	return def
}

// WALWriter is a Table's writer of one WAL shard (a *wal.Writer: Append returns once the
// rows are durable in the log; Flush; Close). While it is open, scans of the table in this
// process read its memtables instead of the entries in storage. Safe for concurrent use.
type WALWriter struct {
	*wal.Writer
	db   *DB
	key  string
	once sync.Once
}

// Close flushes and releases the writer (wal.Writer.Close) and stops scans of this DB
// from reading its memtables.
func (w *WALWriter) Close(ctx context.Context) error {
	err := w.Writer.Close(ctx)
	w.once.Do(func() { w.db.wals.remove(w.key, w.Writer) })
	return err
}

// walRegistry holds the open WAL writers of a DB, by table and shard.
type walRegistry struct {
	mu sync.Mutex
	m  map[string]*wal.Writer
}

func walKey(table, shard string) string { return table + "\x00" + shard }

func (r *walRegistry) put(key string, w *wal.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*wal.Writer{}
	}
	r.m[key] = w
}

func (r *walRegistry) get(key string) *wal.Writer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key]
}

func (r *walRegistry) remove(key string, w *wal.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[key] == w {
		delete(r.m, key)
	}
}

// WAL opens shard (0 ≤ shard < ConfigWALShards) of the table's write-ahead log for
// writing: it claims the shard as a new writer epoch (fencing any earlier writer, in any
// process: its next append fails with wal.ErrFenced) and replays what that writer left
// unflushed. Appends take the columns of the table's latest published version. How rows
// map to shards is the caller's choice: the WAL is append-only, so any row may go to any
// shard; give each writing process (or each independent stream) its own shard, because
// opening a shard fences its previous writer. Errors: ErrNoWAL, ErrShardOutOfRange,
// ErrReadOnly, wal errors (a corrupt entry or shard manifest, named), store errors.
func (t *Table) WAL(ctx context.Context, shard int) (*WALWriter, error) {
	if t.readOnly {
		return nil, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	if err := t.Refresh(ctx); err != nil {
		return nil, err
	}
	n := WALShards(t.m.Config)
	if n == 0 {
		return nil, fmt.Errorf("table %q: %w", t.name, ErrNoWAL)
	}
	if shard < 0 || shard >= n {
		return nil, fmt.Errorf("table %q: %w: shard %d of %d (0 to %d)", t.name, ErrShardOutOfRange, shard, n, n-1)
	}
	id := wal.ShardID(shard)
	cfg := t.m.Config
	interval := DefaultWALFlushInterval
	if d, err := time.ParseDuration(cfg[ConfigWALFlushInterval]); err == nil {
		interval = d
	}
	opts := wal.Options{
		Schema: t.Schema(), FieldIDs: t.m.Schema.FieldIDs, Incarnation: t.m.Incarnation,
		FlushBytes:       configBytes(cfg, ConfigWALFlushBytes, wal.DefaultFlushBytes),
		FlushInterval:    interval,
		BacklogSoftBytes: configBytes(cfg, ConfigWALBacklogSoft, DefaultWALBacklogSoft),
		BacklogHardBytes: configBytes(cfg, ConfigWALBacklogHard, DefaultWALBacklogHard),
		Compression:      t.db.opts.Write.Compression,
		Allocator:        t.db.opts.Allocator,
		MergedWatermark: func(ctx context.Context) (uint64, error) {
			m, err := t.db.latest(ctx, t.name)
			if err != nil {
				return 0, err
			}
			return m.WALMerged[id], nil
		},
		OnFlush: func(m *wal.ShardManifest) {
			t.db.pub.Publish(t.name, writerEvent(m, t.m.IncarnationSince))
			if f := t.db.opts.OnWALFlush; f != nil {
				f(t.name, m)
			}
		},
	}
	w, err := wal.Open(ctx, t.db.store, t.name, id, opts)
	if err != nil {
		return nil, err
	}
	key := walKey(t.name, id)
	t.db.wals.put(key, w)
	return &WALWriter{Writer: w, db: t.db, key: key}, nil
}

// walShard is what a read takes from one shard: the generations above the handle's merged
// watermark and the rows above the replay position (entries or the local memtables).
type walShard struct {
	shard   string
	gens    []wal.Generation
	recs    []arrow.RecordBatch
	ids     [][]int32 // field ids of each rec's columns
	rows    int64     // rows in recs
	release func()
}

// readWAL reads every shard of the table's WAL for a read at the handle's version: one
// shard manifest and the entries above its replay position per shard (or the memtables of
// this process's writer). Nothing for a handle at an older version (Checkout: time travel
// reads the base table), or a table without a WAL. Errors: ErrWALAhead, wal errors naming
// the object, store errors.
func (t *Table) readWAL(ctx context.Context) ([]walShard, error) {
	n := WALShards(t.m.Config)
	if n == 0 || t.readOnly {
		return nil, nil
	}
	var out []walShard
	release := func() {
		for _, s := range out {
			s.release()
		}
	}
	for i := range n {
		s, ok, err := t.readShard(ctx, wal.ShardID(i))
		if err != nil {
			release()
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

func (t *Table) readShard(ctx context.Context, id string) (walShard, bool, error) {
	s := walShard{shard: id, release: func() {}}
	var m *wal.ShardManifest
	if w := t.db.wals.get(walKey(t.name, id)); w != nil {
		// The writer's memtables hold the entries above its manifest's replay position,
		// as long as no other writer claimed the shard since: one LIST tells (a writer
		// learns of a fence only at its next put).
		if snap, err := w.Snapshot(); err == nil {
			if v, err := wal.LatestVersion(ctx, t.db.store, t.name, id); err == nil && v == snap.Manifest.Version {
				m = snap.Manifest
				s.recs, s.rows, s.release = snap.Records, snap.Rows, snap.Release
				ids := w.FieldIDs()
				for range s.recs {
					s.ids = append(s.ids, ids)
				}
			} else {
				snap.Release()
			}
		}
	}
	if m == nil {
		v, err := wal.ReadShard(ctx, t.db.store, t.name, id, t.db.opts.Allocator)
		if errors.Is(err, wal.ErrNoShard) {
			return s, false, nil
		}
		if err != nil {
			return s, false, fmt.Errorf("table %q version %d: %w", t.name, t.m.Version, err)
		}
		m = v.Manifest
		for _, e := range v.Entries {
			for _, r := range e.Records {
				s.recs = append(s.recs, r)
				s.ids = append(s.ids, e.FieldIDs)
			}
		}
		s.rows, s.release = v.Rows, v.Release
	}
	if m.Incarnation != "" && t.m.Incarnation != "" && m.Incarnation != t.m.Incarnation {
		s.release()
		return s, false, nil // a dropped incarnation's shard: no rows of this table
	}
	merged := t.m.WALMerged[id]
	s.gens = m.Unmerged(merged)
	first := merged + 1
	if len(s.gens) > 0 {
		first = s.gens[0].Generation
	} else if m.Sealed() > merged {
		first = m.Sealed() + 1
	}
	if first != merged+1 {
		s.release()
		return s, false, fmt.Errorf("table %q version %d: %w: shard %s merged up to generation %d here, its manifest (version %d) lists from %d; refresh the handle",
			t.name, t.m.Version, ErrWALAhead, id, merged, m.Version, first)
	}
	return s, true, nil
}

// walPending fails with ErrWALPending when a shard holds rows the base table at the
// handle's version does not: generations above its merged watermark or entries above the
// replay position. A delete, update or overwrite planned on the handle would not see them.
func (t *Table) walPending(ctx context.Context) error {
	shards, err := t.readWAL(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range shards {
			s.release()
		}
	}()
	for _, s := range shards {
		if len(s.gens) > 0 || s.rows > 0 {
			var rows int64 = s.rows
			for _, g := range s.gens {
				rows += g.Rows
			}
			gens := fmt.Sprintf("%d generations", len(s.gens))
			if len(s.gens) == 1 {
				gens = "1 generation"
			}
			return fmt.Errorf("table %q: %w: shard %s holds %d rows in %s and its log (merge the WAL first: Table.MergeWAL, shale wal merge %s)",
				t.name, ErrWALPending, s.shard, rows, gens, t.name)
		}
	}
	return nil
}

// walFragmentID is the id a read gives the i-th WAL data file it scans: counted down from
// the top of the id space, where no base fragment's id reaches.
func walFragmentID(i int) uint32 { return math.MaxUint32 - uint32(i) }

// addWAL adds the WAL's rows to the plan: each generation's data files as fragments
// (pruned by their statistics like base fragments; no index covers them) and the rows
// above the replay position as in-memory batches.
func (p *scanPlan) addWAL(ctx context.Context) error {
	shards, err := p.t.readWAL(ctx)
	if err != nil {
		return err
	}
	for _, s := range shards {
		p.release = append(p.release, s.release)
	}
	m := p.t.m
	n := 0
	for _, s := range shards {
		p.wal.Shards++
		for _, g := range s.gens {
			p.wal.Generations++
			for _, df := range g.Files {
				f := &manifest.Fragment{ID: walFragmentID(n), Files: []manifest.DataFile{df}, PhysicalRows: df.Rows}
				n++
				p.pruned.Fragments++
				if p.expr != nil && !p.expr.MayMatch(df.Rows, statsLookup(m, df.FieldIDs, df.Stats)) {
					p.pruned.FragmentsPruned++
					continue
				}
				var start int64
				for bi, b := range df.Batches {
					p.pruned.Batches++
					if p.expr != nil && !p.expr.MayMatch(b.Rows, statsLookup(m, df.FieldIDs, df.BatchStats(bi))) {
						p.pruned.BatchesPruned++
					} else {
						p.tasks = append(p.tasks, batchTask{frag: f, fileIdx: 0, batch: bi, rowStart: start, rows: b.Rows})
					}
					start += b.Rows
				}
			}
		}
		for i, r := range s.recs {
			p.wal.LogRows += r.NumRows()
			p.tasks = append(p.tasks, batchTask{mem: r, memIDs: s.ids[i], rows: r.NumRows()})
		}
	}
	return nil
}

// walRows is the number of rows the WAL adds to a read at the handle's version.
func (t *Table) walRows(ctx context.Context) (int64, error) {
	shards, err := t.readWAL(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range shards {
		n += s.rows
		for _, g := range s.gens {
			n += g.Rows
		}
		s.release()
	}
	return n, nil
}

// WALPlan says what a scan read from the WAL (ScanPlan.WAL).
type WALPlan struct {
	Shards      int   `json:"shards"`      // shards read
	Generations int   `json:"generations"` // unmerged generations scanned
	LogRows     int64 `json:"log_rows"`    // rows above the replay position (entries, or this process's memtables)
}

// readMem is readBatch for a batch in memory (WAL rows above the replay position): its
// columns are matched to readCols by field id (a column added since it was written reads
// as nulls) and the filter evaluated.
func (p *scanPlan) readMem(ctx context.Context, task batchTask) (arrow.RecordBatch, *array.Boolean, error) {
	t := p.t
	schema := t.Schema()
	rec := task.mem
	fields := make([]arrow.Field, len(p.readCols))
	cols := make([]arrow.Array, len(p.readCols))
	for i, c := range p.readCols {
		fields[i] = schema.Field(c)
		if j := indexOf(task.memIDs, t.m.Schema.FieldIDs[c]); j >= 0 {
			if !arrow.TypeEqual(rec.Column(j).DataType(), fields[i].Type) {
				return nil, nil, fmt.Errorf("table %q version %d: %w: a WAL column of field id %d is %s, the table's %q is %s",
					t.name, t.m.Version, manifest.ErrCorrupt, t.m.Schema.FieldIDs[c], rec.Column(j).DataType(), fields[i].Name, fields[i].Type)
			}
			cols[i] = rec.Column(j)
		} else if !fields[i].Nullable {
			return nil, nil, fmt.Errorf("table %q version %d: WAL rows lack non-nullable column %q", t.name, t.m.Version, fields[i].Name)
		} else {
			cols[i] = array.MakeArrayOfNull(t.db.opts.Allocator, fields[i].Type, int(rec.NumRows()))
			defer cols[i].Release()
		}
	}
	named := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	if p.expr == nil {
		return named, nil, nil
	}
	mask, err := p.expr.Evaluate(ctx, named)
	if err != nil {
		named.Release()
		return nil, nil, fmt.Errorf("table %q: WHERE %q: %w", t.name, p.where, err)
	}
	return named, mask, nil
}

// writerEvent is the demand a flush that wrote m publishes: the shard's sealed generation,
// its running byte total and when its newest generation was flushed (demand package).
func writerEvent(m *wal.ShardManifest, incarnationSince uint64) demand.Event {
	e := demand.Event{Shard: m.Shard, IncarnationSince: incarnationSince, WriterEpoch: m.Epoch,
		SealedThrough: m.Sealed(), SealedBytesThrough: m.SealedBytes, Source: demand.SourceWriter}
	if n := len(m.Generations); n > 0 && m.Generations[n-1].Generation == m.Sealed() {
		e.FlushedAtMs = m.Generations[n-1].FlushedAt
	}
	return e
}

// Demand is the DB's WAL demand records (nil without a catalog): what a planner folds.
func (db *DB) Demand() *demand.Records { return db.demand }

// DemandStats counts what the DB's detached demand publisher did (zero without a catalog).
func (db *DB) DemandStats() demand.PublisherStats { return db.pub.Stats() }

// ScanWALDemand re-reads every shard of the table's WAL from storage and publishes what it
// finds as scan events (demand.SourceScan: the shard manifest's sealed generation and
// bytes, the published version's merged watermark), correcting any flush or merge event
// that was lost; a scan can only raise a record, never lower it. It returns the events
// and whether each changed its record. Cost: a LIST and a GET per shard, one etcd
// read-join-put per shard. Errors: ErrNoWAL, wal and etcd errors; nothing is published
// without a catalog (the events are still returned).
func (t *Table) ScanWALDemand(ctx context.Context) ([]demand.Event, []bool, error) {
	pub, err := t.db.latest(ctx, t.name)
	if err != nil {
		return nil, nil, err
	}
	n := WALShards(pub.Config)
	if n == 0 {
		return nil, nil, fmt.Errorf("table %q: %w", t.name, ErrNoWAL)
	}
	var events []demand.Event
	var wrote []bool
	for i := range n {
		id := wal.ShardID(i)
		m, err := wal.LoadShard(ctx, t.db.store, t.name, id)
		if errors.Is(err, wal.ErrNoShard) {
			continue
		}
		if err != nil {
			return events, wrote, err
		}
		if m.Incarnation != "" && pub.Incarnation != "" && m.Incarnation != pub.Incarnation {
			continue
		}
		e := writerEvent(m, pub.IncarnationSince)
		e.Source = demand.SourceScan
		merged := pub.WALMerged[id]
		e.MergedThrough = &merged
		changed := false
		if t.db.demand != nil {
			if changed, err = t.db.demand.Publish(ctx, t.name, e); err != nil {
				return events, wrote, err
			}
		}
		events, wrote = append(events, e), append(wrote, changed)
	}
	return events, wrote, nil
}
