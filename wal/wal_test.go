package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

var testIDs = []int32{1, 2}

func batch(from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
	}
	return b.NewRecordBatch()
}

func opts() Options {
	return Options{Schema: testSchema, FieldIDs: testIDs, Incarnation: "inc", FlushBytes: -1}
}

func open(t *testing.T, s store.Store, o Options) *Writer {
	t.Helper()
	w, err := Open(context.Background(), s, "t", "0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

func appendRange(t *testing.T, w *Writer, from, to int64) Ack {
	t.Helper()
	r := batch(from, to)
	defer r.Release()
	a, err := w.Append(context.Background(), r)
	if err != nil {
		t.Fatalf("append [%d,%d): %v", from, to, err)
	}
	return a
}

// idsOf collects the id column of records.
func idsOf(recs []arrow.RecordBatch) []int64 {
	var out []int64
	for _, r := range recs {
		out = append(out, r.Column(0).(*array.Int64).Int64Values()...)
	}
	return out
}

// generationIDs reads the ids in every generation of m above merged.
func generationIDs(t *testing.T, s store.Store, m *ShardManifest, merged uint64) []int64 {
	t.Helper()
	var out []int64
	for _, g := range m.Unmerged(merged) {
		for _, df := range g.Files {
			rd, err := fragment.OpenFile(context.Background(), s, df, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			for b := range df.Batches {
				r, err := rd.ReadBatch(b, nil)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, r.Column(0).(*array.Int64).Int64Values()...)
				r.Release()
			}
			rd.Close()
		}
	}
	return out
}

// shardRows is every row id the shard holds in storage: generations plus entries above the
// replay position, as another process reads it.
func shardRows(t *testing.T, s store.Store) []int64 {
	t.Helper()
	v, err := ReadShard(context.Background(), s, "t", "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	out := generationIDs(t, s, v.Manifest, 0)
	for _, e := range v.Entries {
		out = append(out, idsOf(e.Records)...)
	}
	slices.Sort(out)
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestAppendIsDurableAndVisible(t *testing.T) {
	s := storetest.Local(t)
	w := open(t, s, opts())
	a := appendRange(t, w, 0, 10)
	if a.Position != (Position{Epoch: 1, Pos: 1}) || a.Rows != 10 {
		t.Fatalf("ack %+v", a)
	}
	appendRange(t, w, 10, 20)
	snap, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(snap.Records); !slices.Equal(got, seq(0, 20)) {
		t.Fatalf("snapshot rows %v", got)
	}
	snap.Release()
	// Another process sees the entries.
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 20)) {
		t.Fatalf("storage rows %v", got)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap, _ = w.Snapshot()
	if snap.Rows != 0 || len(snap.Manifest.Generations) != 1 || snap.Manifest.Replay != (Position{1, 2}) {
		t.Fatalf("after flush: %d rows in memtables, manifest %+v", snap.Rows, snap.Manifest)
	}
	snap.Release()
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 20)) {
		t.Fatalf("storage rows after flush %v", got)
	}
}

func TestReopenReplaysUnflushedEntries(t *testing.T) {
	s := storetest.Local(t)
	w1, err := Open(context.Background(), s, "t", "0", opts())
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, w1, 0, 5)
	if err := w1.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendRange(t, w1, 5, 8)
	appendRange(t, w1, 8, 9)
	// w1 is abandoned (a crash): a new writer replays entries 2 and 3.
	w2 := open(t, s, opts())
	if w2.Epoch() != 2 {
		t.Fatalf("epoch %d", w2.Epoch())
	}
	snap, err := w2.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(snap.Records); !slices.Equal(got, seq(5, 9)) {
		t.Fatalf("replayed %v", got)
	}
	snap.Release()
	if err := w2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	m, _ := LoadShard(context.Background(), s, "t", "0")
	if m.Replay != (Position{Epoch: 2}) || m.FencedThrough != 1 || len(m.Generations) != 2 || m.Generations[1].Generation != 2 {
		t.Fatalf("manifest after the replayed flush: %+v", m)
	}
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 9)) {
		t.Fatalf("rows %v", got)
	}
	// The fenced writer learns it on its next put.
	r := batch(100, 101)
	defer r.Release()
	if _, err := w1.Append(context.Background(), r); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale append: %v", err)
	}
	var fe *FencedError
	if _, err := w1.Append(context.Background(), r); !errors.As(err, &fe) || fe.Epoch != 1 || fe.By != 2 {
		t.Fatalf("second stale append: %v", err)
	}
	if err := w1.Flush(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale flush: %v", err)
	}
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 9)) {
		t.Fatalf("rows after the stale writer tried %v", got)
	}
}

// TestStaleFlushIsFenced: a writer fenced while its memtable holds rows cannot list its
// generation; the new writer replays the same rows from the entries, once.
func TestStaleFlushIsFenced(t *testing.T) {
	s := storetest.Local(t)
	w1, err := Open(context.Background(), s, "t", "0", opts())
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, w1, 0, 4)
	w2 := open(t, s, opts())
	if err := w1.Flush(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale flush: %v", err)
	}
	if err := w2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 4)) {
		t.Fatalf("rows %v", got)
	}
}

// TestFenceHoldsAfterEntriesAreCollected: once the entries a flush covered are deleted
// (keeping each epoch's last), a stale writer still collides with its fence and no entry of
// it lands in a collected position (invariant 7: positions, not leases).
func TestFenceHoldsAfterEntriesAreCollected(t *testing.T) {
	s := storetest.Local(t)
	ctx := context.Background()
	w1, err := Open(ctx, s, "t", "0", opts())
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(5) {
		appendRange(t, w1, i*10, i*10+10)
	}
	if err := w1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w2 := open(t, s, opts())
	appendRange(t, w2, 100, 101)
	if err := w2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Collect everything below each epoch's last entry (what gc may do).
	objs, err := s.List(ctx, EntriesDir("t", "0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	last := map[uint64]uint64{}
	for _, o := range objs {
		p, _ := ParseEntryKey("t", "0", o.Key)
		last[p.Epoch] = max(last[p.Epoch], p.Pos)
	}
	for _, o := range objs {
		p, _ := ParseEntryKey("t", "0", o.Key)
		if p.Pos != last[p.Epoch] {
			if err := s.Delete(ctx, o.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if last[1] != 6 {
		t.Fatalf("epoch 1's last entry is %d, want the fence at 6", last[1])
	}
	r := batch(200, 201)
	defer r.Release()
	if _, err := w1.Append(ctx, r); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale append after collection: %v", err)
	}
	if got := shardRows(t, s); !slices.Equal(got, append(seq(0, 50), 100)) {
		t.Fatalf("rows %v", got)
	}
}

// TestConcurrentAppendsAreGroupCommitted: 16 goroutines × 50 appends of 10 rows: every
// acknowledged row once, in fewer entries than appends.
func TestConcurrentAppendsAreGroupCommitted(t *testing.T) {
	s := storetest.Local(t)
	w := open(t, s, opts())
	var wg sync.WaitGroup
	var mu sync.Mutex
	positions := map[Position]int{}
	for g := range int64(16) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range int64(50) {
				from := (g*50 + i) * 10
				r := batch(from, from+10)
				a, err := w.Append(context.Background(), r)
				r.Release()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				positions[a.Position]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(positions) >= 800 {
		t.Errorf("%d entries for 800 appends: no group commit", len(positions))
	}
	t.Logf("800 appends in %d entries", len(positions))
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 8000)) {
		t.Fatalf("%d rows, want 8000", len(got))
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 8000)) {
		t.Fatalf("after flush %d rows, want 8000", len(got))
	}
}

// TestClaimRaceLosesNoAcknowledgedAppend: a writer appends continuously while another
// claims the shard; every append acknowledged before the fence is replayed by the new writer
// exactly once, and every later one fails.
func TestClaimRaceLosesNoAcknowledgedAppend(t *testing.T) {
	s := storetest.Local(t)
	ctx := context.Background()
	w1, err := Open(ctx, s, "t", "0", opts())
	if err != nil {
		t.Fatal(err)
	}
	var acked []int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := batch(i, i+1)
			_, err := w1.Append(ctx, r)
			r.Release()
			if errors.Is(err, ErrFenced) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			acked = append(acked, i)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, _ := ReadShard(ctx, s, "t", "0", nil); v != nil {
			n := v.Rows
			v.Release()
			if n >= 20 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the first writer made no progress")
		}
	}
	w2 := open(t, s, opts())
	<-done // fenced
	close(stop)
	if err := w2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := shardRows(t, s)
	// Every acknowledged append is there once; an unacknowledged one may be too (its entry
	// won a position before the fence), at most one.
	if len(got) < len(acked) || len(got) > len(acked)+1 || !slices.Equal(got[:len(acked)], acked) {
		t.Fatalf("%d rows in storage for %d acknowledged appends", len(got), len(acked))
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Fatal("a row twice")
	}
}

// TestFlushNeverCoversAnEntryNotInItsMemtable (issue 11 acceptance): an entry durable but
// paused before its memtable insert while a flush runs stays above the replay position, so
// a crash after that flush replays it.
func TestFlushNeverCoversAnEntryNotInItsMemtable(t *testing.T) {
	s := storetest.Local(t)
	ctx := context.Background()
	w, err := Open(ctx, s, "t", "0", opts())
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, w, 0, 3) // entry 1
	release := make(chan struct{})
	reached := make(chan struct{})
	t.Cleanup(failpoint.Enable("wal.entry_durable", failpoint.Call(func(context.Context) error {
		close(reached)
		<-release
		return nil
	}).Once()))
	ackc := make(chan error, 1)
	go func() {
		r := batch(3, 6)
		defer r.Release()
		_, err := w.Append(ctx, r) // entry 2: durable, then paused
		ackc <- err
	}()
	<-reached
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m, _ := LoadShard(ctx, s, "t", "0")
	if m.Replay != (Position{1, 1}) {
		t.Fatalf("replay position %s moved past the paused entry 2", m.Replay)
	}
	close(release)
	if err := <-ackc; err != nil {
		t.Fatal(err)
	}
	// Crash now (w abandoned): the next writer replays entry 2.
	w2 := open(t, s, opts())
	snap, _ := w2.Snapshot()
	defer snap.Release()
	if got := idsOf(snap.Records); !slices.Equal(got, seq(3, 6)) {
		t.Fatalf("replayed %v", got)
	}
	if got := shardRows(t, s); !slices.Equal(got, seq(0, 6)) {
		t.Fatalf("rows %v", got)
	}
}

func TestBadInput(t *testing.T) {
	s := storetest.Local(t)
	ctx := context.Background()
	w := open(t, s, opts())
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	b.Field(0).(*array.Int32Builder).Append(1)
	r := b.NewRecordBatch()
	b.Release()
	defer r.Release()
	if _, err := w.Append(ctx, r); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("append of another schema: %v", err)
	}
	appendRange(t, w, 0, 2)

	// A truncated entry: replay stops naming it.
	key := EntryKey("t", "0", Position{1, 1})
	data, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, key, data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, s, "t", "0", opts())
	var oe *ObjectError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &oe) || oe.Key != key {
		t.Fatalf("open over a truncated entry: %v", err)
	}
	if _, err := ReadShard(ctx, s, "t", "0", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read over a truncated entry: %v", err)
	}

	// A shard manifest from a newer format.
	m, err := LoadShard(ctx, s, "u", "0")
	if !errors.Is(err, ErrNoShard) || m != nil {
		t.Fatalf("missing shard: %v", err)
	}
	newer := &ShardManifest{Table: "u", Shard: "0", Version: 1, Epoch: 1, NextGeneration: 1, Status: StatusActive}
	newer.Format = FormatVersion + 1
	enc, err := newer.encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, ManifestKey("u", "0", 1), enc); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadShard(ctx, s, "u", "0"); !errors.Is(err, ErrFormatTooNew) {
		t.Fatalf("newer format: %v", err)
	}
	if _, err := Open(ctx, s, "u", "0", Options{Schema: testSchema, FieldIDs: testIDs}); !errors.Is(err, ErrFormatTooNew) {
		t.Fatalf("open of a newer format: %v", err)
	}
}

func TestBacklogAdmission(t *testing.T) {
	if d := AdmissionDelay(50, 100, 200, time.Second); d != 0 {
		t.Fatalf("below soft: %v", d)
	}
	if d := AdmissionDelay(150, 100, 200, time.Second); d != 500*time.Millisecond {
		t.Fatalf("halfway: %v", d)
	}
	if d := AdmissionDelay(250, 100, 200, time.Second); d != time.Second {
		t.Fatalf("at hard: %v", d)
	}
	// Smooth: the delay never jumps by more than the ramp's slope allows.
	prev := time.Duration(0)
	for b := int64(0); b <= 300; b++ {
		d := AdmissionDelay(b, 100, 200, time.Second)
		if d < prev || d-prev > 11*time.Millisecond {
			t.Fatalf("delay jumps from %v to %v at %d", prev, d, b)
		}
		prev = d
	}
	s := storetest.Local(t)
	o := opts()
	o.BacklogHardBytes = 1000
	w := open(t, s, o)
	appendRange(t, w, 0, 10) // ~ 160 bytes
	var err error
	for i := int64(1); i < 100 && err == nil; i++ {
		r := batch(i*10, i*10+10)
		_, err = w.Append(context.Background(), r)
		r.Release()
	}
	var be *BacklogError
	if !errors.Is(err, ErrBacklog) || !errors.As(err, &be) || be.Hard != 1000 {
		t.Fatalf("append past the hard limit: %v", err)
	}
}
