package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

var (
	seamEntryDurable = failpoint.Seam("wal.entry_durable") // an entry is durable, its rows not yet in the memtable, nothing acknowledged
	seamFlushFiles   = failpoint.Seam("wal.flush_files")   // a flush wrote its generation's files, not yet its shard manifest
	seamFlushed      = failpoint.Seam("wal.flushed")       // a flush's shard manifest landed, covered entries not yet deleted
)

// Defaults of Options' zero values.
const (
	DefaultMaxEntryBytes = 8 << 20  // group commit: bytes of records in one entry
	DefaultFlushBytes    = 64 << 20 // memtable bytes that start a flush
	// DefaultMaxAdmissionDelay is the delay an append waits at the hard backlog limit
	// (it grows linearly from 0 at the soft limit).
	DefaultMaxAdmissionDelay = time.Second
)

// Options configure a Writer.
type Options struct {
	// Schema and FieldIDs are the base table's columns and their field ids at open:
	// appended records must have exactly these columns (names and types, in order), and
	// generations are written with these field ids. Required.
	Schema   *arrow.Schema // the columns
	FieldIDs []int32       // their field ids, one per column
	// Incarnation is the base table's incarnation (manifest.Manifest.Incarnation).
	Incarnation string
	// MaxEntryBytes bounds the records of one group-commit entry (default
	// DefaultMaxEntryBytes); a record larger than it is an entry of its own.
	MaxEntryBytes int64
	// MaxEntryDelay is how long the committer waits for more appends before writing an
	// entry smaller than MaxEntryBytes. Default 0: it writes what arrived while the
	// previous entry was being written, after waiting (at most a quarter of the last
	// put's time, and 1 ms) for the appenders the previous entry acknowledged to append
	// again, so concurrent appenders share one entry instead of alternating between two.
	MaxEntryDelay time.Duration
	// FlushBytes: a memtable reaching it is flushed in the background (default
	// DefaultFlushBytes; < 0: only Flush and Close flush).
	FlushBytes int64
	// FlushInterval: a memtable holding rows for longer is flushed in the background
	// (0: no age limit).
	FlushInterval time.Duration
	// BacklogSoftBytes and BacklogHardBytes bound the shard's unmerged backlog (unmerged
	// generations plus memtables, bytes): above the soft limit an append waits, longer
	// the nearer the backlog is to the hard limit (up to MaxAdmissionDelay); at the hard
	// limit it fails with ErrBacklog. 0 = no limit.
	BacklogSoftBytes, BacklogHardBytes int64
	MaxAdmissionDelay                  time.Duration // default DefaultMaxAdmissionDelay
	// MergedWatermark returns the shard's merged watermark in the base table's published
	// version (nil: 0). A flush calls it to drop merged generations from the shard
	// manifest and to measure the backlog.
	MergedWatermark func(ctx context.Context) (uint64, error)
	// OnFlush is called (on the flushing goroutine; it must not block) with the shard
	// manifest each flush wrote, e.g. to publish demand.
	OnFlush func(*ShardManifest)
	// Compression of generation files (default ZSTD); Allocator for records (default
	// memory.DefaultAllocator).
	Compression manifest.Compression // codec of generation files ("" = ZSTD)
	Allocator   memory.Allocator     // Arrow memory (nil = memory.DefaultAllocator)
}

// Ack says where an acknowledged append is durable.
type Ack struct {
	Position Position // the entry holding the rows
	Rows     int64    // rows appended
}

// Writer appends to one WAL shard as its current writer epoch. Append, Flush, Close and
// Snapshot are safe for concurrent use; appends from many goroutines are group-committed.
// Once fenced (ErrFenced) or closed every call fails; another Writer of the same process is
// unaffected.
type Writer struct {
	s            store.Store
	table, shard string
	epoch        uint64 // this writer's epoch (immutable)
	opts         Options
	mem          memory.Allocator

	ctx    context.Context // the writer's own; cancelled by Close
	cancel context.CancelFunc

	mu         sync.Mutex
	man        *ShardManifest // the newest version this writer wrote
	active     *memtable
	frozen     []*memtable // oldest first; flushed in order
	queue      []*pendingAppend
	queueBytes int64
	nextPos    uint64 // the next entry position in this epoch
	merged     uint64 // the merged watermark last read
	err        error  // sticky: fenced, failed or closed
	closing    bool

	wake      chan struct{} // the committer has work
	flushWake chan struct{} // the background flusher has work
	flushMu   sync.Mutex    // one flush at a time
	wg        sync.WaitGroup
}

type pendingAppend struct {
	rec   arrow.RecordBatch
	bytes int64
	done  chan struct{}
	ack   Ack
	err   error
	taken bool // in an entry being written: its outcome is no longer the caller's to cancel
}

// Open claims shard of table as a new writer epoch, fences the epochs before it, replays
// every entry above the replay position into the memtable, and returns the Writer. Costs
// a LIST and a GET of the shard manifest, a PUT per claim, a LIST and a PUT per epoch
// fenced, and a LIST plus a GET per entry replayed. Errors: *ObjectError wrapping
// ErrCorrupt or ErrFormatTooNew (a replayed entry or the shard manifest; nothing is
// skipped), store errors; the claim is still in place then (the next Open claims again).
func Open(ctx context.Context, s store.Store, table, shard string, opts Options) (*Writer, error) {
	if opts.Schema == nil || len(opts.FieldIDs) != opts.Schema.NumFields() {
		return nil, fmt.Errorf("table %q WAL shard %s: Options.Schema and FieldIDs are required and must match", table, shard)
	}
	if opts.MaxEntryBytes <= 0 {
		opts.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if opts.FlushBytes == 0 {
		opts.FlushBytes = DefaultFlushBytes
	}
	if opts.MaxAdmissionDelay <= 0 {
		opts.MaxAdmissionDelay = DefaultMaxAdmissionDelay
	}
	mem := opts.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	m, err := claim(ctx, s, table, shard, opts.Incarnation)
	if err != nil {
		return nil, err
	}
	if err := seamClaimed.Inject(ctx); err != nil {
		return nil, err
	}
	if err := fence(ctx, s, m, mem); err != nil {
		return nil, err
	}
	if err := seamFenced.Inject(ctx); err != nil {
		return nil, err
	}
	w := &Writer{s: s, table: table, shard: shard, epoch: m.Epoch, opts: opts, mem: mem, man: m, nextPos: 1,
		active: &memtable{last: m.Replay}, wake: make(chan struct{}, 1), flushWake: make(chan struct{}, 1)}
	err = replay(ctx, s, m, mem, func(e *Entry) error {
		recs, err := Conform(table, shard, e, opts.Schema, opts.FieldIDs, mem)
		if err != nil {
			return err
		}
		w.active.insert(recs, e.Position)
		for _, r := range recs {
			r.Release()
		}
		return nil
	})
	if err != nil {
		w.active.release()
		return nil, err
	}
	// Everything of the earlier epochs is in the memtable now: a flush of it covers them.
	w.active.last = Position{Epoch: m.Epoch}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.wg.Add(2)
	go w.commitLoop()
	go w.flushLoop()
	return w, nil
}

// Epoch is the writer's epoch.
func (w *Writer) Epoch() uint64 { return w.epoch }

// Table and Shard name what the writer writes.
func (w *Writer) Table() string { return w.table }

// FieldIDs are the field ids of the writer's columns (Options.FieldIDs).
func (w *Writer) FieldIDs() []int32 { return w.opts.FieldIDs }

// Shard is the shard id.
func (w *Writer) Shard() string { return w.shard }

// Append adds rec's rows to the shard and returns once an entry holding them is durable
// (and they are visible to Snapshot). rec must have the writer's columns. Errors:
// ErrSchemaMismatch, ErrBacklog (nothing appended), ErrFenced, ErrClosed, the store's
// errors for the entry put (nothing appended: the position is still free), ctx's error when
// it ends before the append was taken into an entry (nothing appended); *UnknownError when
// ctx ends or the put's outcome stays unknown after it was taken (the rows may be in the
// log: a later writer would replay them).
func (w *Writer) Append(ctx context.Context, rec arrow.RecordBatch) (Ack, error) {
	if err := w.checkSchema(rec.Schema()); err != nil {
		return Ack{}, err
	}
	if rec.NumRows() == 0 {
		return Ack{}, nil
	}
	if err := w.admit(ctx, recordBytes(rec)); err != nil {
		return Ack{}, err
	}
	p := &pendingAppend{rec: rec, bytes: recordBytes(rec), done: make(chan struct{})}
	rec.Retain()
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		rec.Release()
		return Ack{}, err
	}
	w.queue = append(w.queue, p)
	w.queueBytes += p.bytes
	w.mu.Unlock()
	w.signal(w.wake)
	select {
	case <-p.done:
		return p.ack, p.err
	case <-ctx.Done():
	}
	w.mu.Lock()
	if !p.taken {
		w.queue = slices.DeleteFunc(w.queue, func(q *pendingAppend) bool { return q == p })
		w.queueBytes -= p.bytes
		w.mu.Unlock()
		rec.Release()
		return Ack{}, ctx.Err()
	}
	w.mu.Unlock()
	return Ack{}, &UnknownError{Table: w.table, Shard: w.shard, Err: ctx.Err()}
}

// UnknownError: an append's rows may or may not be in the log (ctx ended while its entry
// was being written, or the put's outcome could not be decided). It is never acknowledged;
// if the entry landed, the next writer of the shard replays it.
type UnknownError struct {
	Table string // the table
	Shard string // the shard id
	Err   error  // what left the outcome open
}

// Error says the append's outcome is unknown.
func (e *UnknownError) Error() string {
	return fmt.Sprintf("table %q WAL shard %s: append outcome unknown (its rows may be in the log): %v", e.Table, e.Shard, e.Err)
}

// Unwrap returns the cause and store.ErrOutcomeUnknown.
func (e *UnknownError) Unwrap() []error { return []error{e.Err, store.ErrOutcomeUnknown} }

func (w *Writer) checkSchema(s *arrow.Schema) error {
	want := w.opts.Schema
	if s.NumFields() != want.NumFields() {
		return fmt.Errorf("table %q WAL shard %s: %w: %d columns, the table has %d", w.table, w.shard, ErrSchemaMismatch, s.NumFields(), want.NumFields())
	}
	for i := range s.NumFields() {
		a, b := s.Field(i), want.Field(i)
		if a.Name != b.Name || !arrow.TypeEqual(a.Type, b.Type) {
			return fmt.Errorf("table %q WAL shard %s: %w: column %d is %s %s, the table has %s %s", w.table, w.shard, ErrSchemaMismatch, i, a.Name, a.Type, b.Name, b.Type)
		}
	}
	return nil
}

// BacklogError is ErrBacklog with the numbers.
type BacklogError struct {
	Table   string // the table
	Shard   string // the shard id
	Backlog int64  // unmerged bytes (generations and memtables)
	Hard    int64  // the hard limit
}

// Error gives the backlog and the limit.
func (e *BacklogError) Error() string {
	return fmt.Sprintf("table %q WAL shard %s: unmerged backlog %d bytes at the hard limit %d (merge the WAL)", e.Table, e.Shard, e.Backlog, e.Hard)
}

// Unwrap returns ErrBacklog.
func (e *BacklogError) Unwrap() error { return ErrBacklog }

// AdmissionDelay is how long an append waits at backlog bytes: 0 up to soft, growing
// linearly to max at hard (a smooth ramp, never a cliff). soft or hard <= 0, or hard <=
// soft, disable it. Pure.
func AdmissionDelay(backlog, soft, hard int64, max time.Duration) time.Duration {
	if soft <= 0 || hard <= soft || backlog <= soft {
		return 0
	}
	if backlog >= hard {
		return max
	}
	return time.Duration(float64(max) * float64(backlog-soft) / float64(hard-soft))
}

// Backlog is the shard's unmerged bytes as this writer sees them: generations above the
// merged watermark last read, plus memtables and queued appends.
func (w *Writer) Backlog() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.backlogLocked()
}

func (w *Writer) backlogLocked() int64 {
	n := w.active.bytes + w.queueBytes
	for _, m := range w.frozen {
		n += m.bytes
	}
	for _, g := range w.man.Unmerged(w.merged) {
		n += g.Bytes
	}
	return n
}

func (w *Writer) admit(ctx context.Context, add int64) error {
	w.mu.Lock()
	backlog := w.backlogLocked()
	w.mu.Unlock()
	if hard := w.opts.BacklogHardBytes; hard > 0 && backlog+add >= hard {
		return &BacklogError{Table: w.table, Shard: w.shard, Backlog: backlog, Hard: hard}
	}
	d := AdmissionDelay(backlog+add, w.opts.BacklogSoftBytes, w.opts.BacklogHardBytes, w.opts.MaxAdmissionDelay)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Writer) signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// fail makes err sticky and fails every queued append with it.
func (w *Writer) failLocked(err error) {
	if w.err == nil {
		w.err = err
	}
	for _, p := range w.queue {
		p.err = w.err
		p.rec.Release()
		close(p.done)
	}
	w.queue, w.queueBytes = nil, 0
}

// commitLoop is the group committer: it writes the queued appends as one entry at the
// next position, inserts their rows into the memtable and acknowledges them, one entry at
// a time (positions have no holes).
func (w *Writer) commitLoop() {
	defer w.wg.Done()
	var (
		expect  int           // appends the next entry is expected to carry
		lastPut time.Duration // how long the last entry's put took
	)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && w.err == nil && !w.closing {
			w.mu.Unlock()
			select {
			case <-w.wake:
			case <-w.ctx.Done():
			}
			w.mu.Lock()
			if w.ctx.Err() != nil && w.err == nil {
				w.failLocked(ErrClosed)
			}
		}
		if w.err != nil || (w.closing && len(w.queue) == 0) {
			w.failLocked(ErrClosed)
			w.mu.Unlock()
			return
		}
		if d := w.opts.MaxEntryDelay; d > 0 && w.queueBytes < w.opts.MaxEntryBytes {
			w.mu.Unlock()
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-w.ctx.Done():
			}
			t.Stop()
			w.mu.Lock()
			if w.err != nil || len(w.queue) == 0 {
				w.mu.Unlock()
				continue
			}
		} else if d == 0 {
			w.gatherLocked(expect, gatherWait(lastPut))
			if w.err != nil || len(w.queue) == 0 {
				w.mu.Unlock()
				continue
			}
		}
		var batch []*pendingAppend
		var bytes int64
		for len(w.queue) > 0 && (len(batch) == 0 || bytes+w.queue[0].bytes <= w.opts.MaxEntryBytes) {
			p := w.queue[0]
			w.queue = w.queue[1:]
			p.taken = true
			batch = append(batch, p)
			bytes += p.bytes
		}
		w.queueBytes -= bytes
		pos := Position{Epoch: w.epoch, Pos: w.nextPos}
		gen := w.man.NextGeneration + uint64(len(w.frozen))
		w.mu.Unlock()

		recs := make([]arrow.RecordBatch, len(batch))
		var rows int64
		for i, p := range batch {
			recs[i] = p.rec
			rows += p.rec.NumRows()
		}
		putStart := time.Now()
		err := w.writeEntry(pos, gen, recs)
		lastPut = time.Since(putStart)
		if err == nil {
			err = seamEntryDurable.Inject(w.ctx)
			if err != nil {
				err = &UnknownError{Table: w.table, Shard: w.shard, Err: err}
			}
		}
		w.mu.Lock()
		if err == nil {
			w.active.insert(recs, pos)
			w.nextPos++
			if w.opts.FlushBytes > 0 && w.active.bytes >= w.opts.FlushBytes {
				w.freezeLocked()
				w.signal(w.flushWake)
			}
		} else if sticky(err) {
			w.failLocked(err)
		}
		// The appenders acknowledged now are likely to append again at once; with those
		// already queued they make the next entry (gatherLocked waits for them briefly).
		expect = len(batch) + len(w.queue)
		w.mu.Unlock()
		for _, p := range batch {
			p.ack, p.err = Ack{Position: pos, Rows: p.rec.NumRows()}, err
			if err != nil {
				p.ack = Ack{}
			}
			p.rec.Release()
			close(p.done)
		}
	}
}

// maxGatherWait bounds how long the committer waits for expected appends (gatherWait).
const maxGatherWait = time.Millisecond

// gatherWait is how long the committer may wait for the appends it expects before writing
// an entry: a quarter of the last put's duration, at most maxGatherWait. Only batching
// depends on it, never what is durable or acknowledged.
func gatherWait(lastPut time.Duration) time.Duration { return min(lastPut/4, maxGatherWait) }

// gatherLocked (Options.MaxEntryDelay 0) waits, up to d, until the queue holds expect
// appends or Options.MaxEntryBytes: the appenders an entry acknowledged come back a few
// microseconds after their acknowledgement, and without the wait the next entry would
// leave while they were on their way, splitting concurrent appenders into two cohorts that
// alternate, each entry half as large as it could be. A lone appender (expect 1, already
// queued) never waits. Called with w.mu held; returns with it held.
func (w *Writer) gatherLocked(expect int, d time.Duration) {
	if d <= 0 || len(w.queue) >= expect || w.queueBytes >= w.opts.MaxEntryBytes || w.closing {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for len(w.queue) < expect && w.queueBytes < w.opts.MaxEntryBytes && w.err == nil && !w.closing {
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-t.C:
			w.mu.Lock()
			return
		case <-w.ctx.Done():
			w.mu.Lock()
			return
		}
		w.mu.Lock()
	}
}

// sticky: after err the writer cannot go on (fenced, or a position whose outcome is
// unknown: writing the next one could leave a hole).
func sticky(err error) bool {
	var ue *UnknownError
	return errors.Is(err, ErrFenced) || errors.As(err, &ue) || errors.Is(err, store.ErrOutcomeUnknown) || errors.Is(err, ErrCorrupt)
}

// writeEntry puts recs as the entry at pos. A lost position means a claimant fenced this
// epoch there: the shard manifest tells (ErrFenced).
func (w *Writer) writeEntry(pos Position, gen uint64, recs []arrow.RecordBatch) error {
	withIDs := w.opts.Schema
	b, err := encodeEntry(withIDs, w.opts.FieldIDs, recs, entryHeader{pos: pos, generation: gen, incarnation: w.opts.Incarnation}, w.mem)
	if err != nil {
		return fmt.Errorf("table %q WAL shard %s: encode entry %s: %w", w.table, w.shard, pos, err)
	}
	key := EntryKey(w.table, w.shard, pos)
	const attempts = 4
	for i := range attempts {
		err = w.s.PutIfAbsent(w.ctx, key, b)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, store.ErrPreconditionFailed):
			return w.fencedOr(w.ctx, key, fmt.Errorf("%w: position %s holds another object though this epoch is the newest", ErrCorrupt, pos))
		case errors.Is(err, store.ErrOutcomeUnknown) && i < attempts-1:
			// The same bytes again at the same position: put-if-absent decides it.
			if w.ctx.Err() != nil {
				return &UnknownError{Table: w.table, Shard: w.shard, Err: err}
			}
			continue
		case errors.Is(err, store.ErrOutcomeUnknown):
			return &UnknownError{Table: w.table, Shard: w.shard, Err: &ObjectError{Table: w.table, Shard: w.shard, Key: key, Err: err}}
		default:
			return &ObjectError{Table: w.table, Shard: w.shard, Key: key, Err: err}
		}
	}
	return err
}

// fenceCheckTimeout bounds fencedOr's read of the shard manifest.
const fenceCheckTimeout = 30 * time.Second

// fencedOr reads the newest shard manifest after a put at key collided: a higher epoch
// than ours is a *FencedError; otherwise other is returned. The read is detached from
// ctx's cancellation (bounded by fenceCheckTimeout): the collision already happened, and
// a Close cancelling the writer's context meanwhile must not turn a fence into an
// undecided error. When the read fails the error says so, wrapping the read's error (not
// other: nothing showed the object is corrupt).
func (w *Writer) fencedOr(ctx context.Context, key string, other error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fenceCheckTimeout)
	defer cancel()
	latest, err := LoadShard(ctx, w.s, w.table, w.shard)
	if err != nil {
		return &ObjectError{Table: w.table, Shard: w.shard, Key: key, Err: fmt.Errorf("the put collided and reading the shard manifest to check for a fence failed: %w", err)}
	}
	if latest.Epoch > w.epoch {
		return &FencedError{Table: w.table, Shard: w.shard, Epoch: w.epoch, By: latest.Epoch}
	}
	return &ObjectError{Table: w.table, Shard: w.shard, Key: key, Err: other}
}

// freezeLocked moves the active memtable to the flush queue when it holds anything a
// flush would change.
func (w *Writer) freezeLocked() {
	if w.active.rows == 0 && !w.man.Replay.Less(w.active.last) {
		return
	}
	w.frozen = append(w.frozen, w.active)
	w.active = &memtable{last: w.active.last}
}

// Flush writes everything acknowledged so far as generations and returns once their shard
// manifest is durable. Errors: ErrFenced (the generation is not listed; a new writer
// replays its rows from the entries), store errors (the rows stay in the memtable and in
// the log; the next Flush tries again).
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	if w.err != nil && !errors.Is(w.err, ErrClosed) {
		err := w.err
		w.mu.Unlock()
		return err
	}
	w.freezeLocked()
	w.mu.Unlock()
	return w.flushFrozen(ctx)
}

func (w *Writer) flushLoop() {
	defer w.wg.Done()
	var tick <-chan time.Time
	if w.opts.FlushInterval > 0 {
		t := time.NewTicker(w.opts.FlushInterval / 2)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.flushWake:
		case <-tick:
			w.mu.Lock()
			if !w.active.since.IsZero() && time.Since(w.active.since) >= w.opts.FlushInterval {
				w.freezeLocked()
			}
			w.mu.Unlock()
		}
		_ = w.flushFrozen(w.ctx) // a failure leaves the memtable queued; Flush and Close report it
	}
}

// flushFrozen flushes the frozen memtables, oldest first.
func (w *Writer) flushFrozen(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	for {
		w.mu.Lock()
		if w.err != nil && !errors.Is(w.err, ErrClosed) {
			err := w.err
			w.mu.Unlock()
			return err
		}
		if len(w.frozen) == 0 {
			w.mu.Unlock()
			return nil
		}
		m, man := w.frozen[0], w.man
		w.mu.Unlock()
		next, err := w.flushOne(ctx, man, m)
		w.mu.Lock()
		if err != nil {
			if errors.Is(err, ErrFenced) || errors.Is(err, store.ErrOutcomeUnknown) {
				w.failLocked(err)
			}
			w.mu.Unlock()
			return err
		}
		w.man = next
		w.frozen = w.frozen[1:]
		w.mu.Unlock()
		m.release()
		if w.opts.OnFlush != nil {
			w.opts.OnFlush(next)
		}
	}
}

// flushOne writes memtable m as generation man.NextGeneration (when it has rows) and puts
// the next shard manifest: the generation listed, the replay position at m.last, merged
// generations dropped.
func (w *Writer) flushOne(ctx context.Context, man *ShardManifest, m *memtable) (*ShardManifest, error) {
	next := man.clone()
	next.Version++
	next.FencedThrough = man.Epoch - 1
	if man.Replay.Less(m.last) {
		next.Replay = m.last
	}
	if m.rows > 0 {
		g, err := w.writeGeneration(ctx, man.NextGeneration, m)
		if err != nil {
			return nil, err
		}
		g.Covers = next.Replay
		next.Generations = append(next.Generations, g)
		next.NextGeneration++
		next.SealedBytes += uint64(g.Bytes)
	}
	if err := seamFlushFiles.Inject(ctx); err != nil {
		return nil, err
	}
	if w.opts.MergedWatermark != nil {
		if merged, err := w.opts.MergedWatermark(ctx); err == nil {
			w.mu.Lock()
			w.merged = max(w.merged, merged)
			merged = w.merged
			w.mu.Unlock()
			next.Generations = slices.DeleteFunc(next.Generations, func(g Generation) bool { return g.Generation <= merged })
		}
	}
	err := putShardManifest(ctx, w.s, next)
	if errors.Is(err, store.ErrPreconditionFailed) {
		return nil, w.fencedOr(ctx, ManifestKey(w.table, w.shard, next.Version),
			fmt.Errorf("%w: shard manifest version %d is taken though this epoch is the newest", ErrCorrupt, next.Version))
	}
	if err != nil {
		return nil, err
	}
	if err := seamFlushed.Inject(ctx); err != nil {
		return nil, err
	}
	w.collectEntries(man.Replay, next.Replay)
	return next, nil
}

// writeGeneration writes m's rows as the data files of generation gen.
func (w *Writer) writeGeneration(ctx context.Context, gen uint64, m *memtable) (Generation, error) {
	dir := GenerationDir(w.table, w.shard, gen, w.epoch)
	fw, err := fragment.NewWriter(ctx, w.s, dir, w.opts.Schema, w.opts.FieldIDs, fragment.WriterOptions{Compression: w.opts.Compression, Allocator: w.mem})
	if err != nil {
		return Generation{}, err
	}
	for _, r := range m.recs {
		if err := fw.Write(r); err != nil {
			_, _ = fw.Close()
			return Generation{}, fmt.Errorf("table %q WAL shard %s: write generation %d: %w", w.table, w.shard, gen, err)
		}
	}
	files, err := fw.Close()
	if err != nil {
		return Generation{}, fmt.Errorf("table %q WAL shard %s: write generation %d: %w", w.table, w.shard, gen, err)
	}
	g := Generation{Generation: gen, Epoch: w.epoch, Dir: dir, Files: files, FlushedAt: time.Now().UnixMilli()}
	for _, f := range files {
		g.Rows += f.Rows
		g.Bytes += f.Size
	}
	return g, nil
}

// collectEntries deletes the entries at or before the replay position to that a flush
// moved it to from from: those in [from, to], keeping the last one of each epoch (for a
// fenced epoch that is its fence, which must stay; see the package doc). The entry at
// from is included: the previous flush kept it when it was its epoch's last, and it no
// longer is once later entries exist. Best effort, in the background: gc collects what is
// left.
func (w *Writer) collectEntries(from, to Position) {
	if !from.Less(to) {
		return
	}
	after := from
	if after.Pos > 0 {
		after.Pos-- // list from the entry at from itself
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		ps, err := listEntries(w.ctx, w.s, w.table, w.shard, after, 0)
		if err != nil {
			return
		}
		last := map[uint64]uint64{}
		for _, p := range ps {
			last[p.Epoch] = max(last[p.Epoch], p.Pos)
		}
		for _, p := range ps {
			if to.Less(p) || p.Pos == last[p.Epoch] {
				continue
			}
			_ = w.s.Delete(w.ctx, EntryKey(w.table, w.shard, p))
		}
	}()
}

// Snapshot is what the writing process reads of the shard: the shard manifest it last
// wrote and the rows of every entry above its replay position (the memtables). The
// records are retained: call Release.
type Snapshot struct {
	Manifest *ShardManifest      // the shard manifest the writer last wrote
	Records  []arrow.RecordBatch // the rows above its replay position, in the writer's columns
	Rows     int64               // rows in Records
}

// Release releases the snapshot's records.
func (s *Snapshot) Release() {
	for _, r := range s.Records {
		r.Release()
	}
	s.Records = nil
}

// Snapshot returns the shard as this writer sees it, atomically: every acknowledged row is
// in Manifest's generations or in Records, and none in both. Errors: the writer's sticky
// error (ErrFenced: a newer writer owns the shard; read it with ReadShard instead).
func (w *Writer) Snapshot() (*Snapshot, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	s := &Snapshot{Manifest: w.man}
	for _, m := range append(slices.Clone(w.frozen), w.active) {
		for _, r := range m.recs {
			r.Retain()
			s.Records = append(s.Records, r)
			s.Rows += r.NumRows()
		}
	}
	return s, nil
}

// Close stops taking appends, waits for those already taken, flushes the memtables and
// releases the writer. It returns the flush's error (the rows are still in the log then:
// the next writer replays them). Calling it twice returns ErrClosed.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closing = true
	w.mu.Unlock()
	w.signal(w.wake)
	// Wait for the committer to drain the queue.
	for {
		w.mu.Lock()
		drained := len(w.queue) == 0
		w.mu.Unlock()
		if drained {
			break
		}
		select {
		case <-ctx.Done():
			w.cancel()
			w.wg.Wait()
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	err := w.Flush(ctx)
	w.cancel()
	w.wg.Wait()
	// A Flush of another goroutine may still be writing a frozen memtable (this Flush
	// returns at once when the writer already failed, say fenced): wait for it before
	// releasing the memtables.
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	if w.err == nil {
		w.err = ErrClosed
	}
	w.active.release()
	for _, m := range w.frozen {
		m.release()
	}
	w.frozen = nil
	w.mu.Unlock()
	return err
}

// Conform maps an entry's records (columns named by field id) onto schema/fieldIDs: a
// column the entry lacks (added since it was written) is null, a column the schema lacks
// (dropped since) is left out. A column of another type under the same id is corrupt.
func Conform(table, shard string, e *Entry, schema *arrow.Schema, fieldIDs []int32, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	idx := make([]int, len(fieldIDs))
	for i, id := range fieldIDs {
		idx[i] = slices.Index(e.FieldIDs, id)
		if idx[i] >= 0 && !arrow.TypeEqual(e.Schema.Field(idx[i]).Type, schema.Field(i).Type) {
			return nil, &ObjectError{Table: table, Shard: shard, Key: e.Key, Err: fmt.Errorf("%w: field id %d is %s in the entry, %s in the table", ErrCorrupt, id, e.Schema.Field(idx[i]).Type, schema.Field(i).Type)}
		}
	}
	out := make([]arrow.RecordBatch, 0, len(e.Records))
	for _, r := range e.Records {
		cols := make([]arrow.Array, len(fieldIDs))
		var nulls []arrow.Array
		for i := range fieldIDs {
			if idx[i] >= 0 {
				cols[i] = r.Column(idx[i])
			} else {
				cols[i] = array.MakeArrayOfNull(mem, schema.Field(i).Type, int(r.NumRows()))
				nulls = append(nulls, cols[i])
			}
		}
		out = append(out, array.NewRecordBatch(schema, cols, r.NumRows()))
		for _, a := range nulls {
			a.Release()
		}
	}
	return out, nil
}
