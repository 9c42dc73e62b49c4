package fragment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/panics"
	"github.com/shale-db/shale/store"
)

// readWithArrow reads every batch of a stored data file with arrow-go's own IPC file
// reader (not this package's): the files the Writer encodes itself must be plain Arrow.
func readWithArrow(t *testing.T, data []byte) arrow.RecordBatch {
	t.Helper()
	fr, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatalf("arrow-go cannot open the file: %v", err)
	}
	defer fr.Close()
	var recs []arrow.RecordBatch
	for i := 0; i < fr.NumRecords(); i++ {
		rec, err := fr.RecordBatchAt(i)
		if err != nil {
			t.Fatalf("arrow-go cannot read batch %d: %v", i, err)
		}
		recs = append(recs, rec)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return concatRecords(t, recs)
}

// TestEncodedFilesAreArrowAtEveryLevel: every codec and ZSTD level writes files that
// arrow-go's reader and this package's reader (whole and projected) both read back as the
// input, with statistics matching the values.
func TestEncodedFilesAreArrowAtEveryLevel(t *testing.T) {
	r := seeded(t)
	schema := allTypesSchema()
	var recs []arrow.RecordBatch
	for _, n := range []int{1, 300, 0, 129, 700} {
		recs = append(recs, randRecord(r, schema, n, 15))
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	want := concatRecords(t, recs)
	defer want.Release()
	sizes := map[string]int64{}
	for _, c := range []struct {
		comp  Compression
		level int
	}{{"", 0}, {CompressionZstd, 1}, {CompressionZstd, 3}, {CompressionZstd, 9}, {CompressionZstd, 19}, {CompressionLZ4, 0}, {CompressionNone, 0}} {
		name := fmt.Sprintf("%s-%d", c.comp, c.level)
		t.Run(name, func(t *testing.T) {
			s := memStore(t)
			files := writeRecords(t, s, "t/data", schema, recs, WriterOptions{Compression: c.comp, CompressionLevel: c.level, MaxRowsPerBatch: 100, MaxRowsPerFile: 600})
			var parts []arrow.RecordBatch
			for _, df := range files {
				data, err := s.Get(context.Background(), df.Key)
				if err != nil {
					t.Fatal(err)
				}
				sizes[name] += int64(len(data))
				parts = append(parts, readWithArrow(t, data))
			}
			viaArrow := concatRecords(t, parts)
			for _, p := range parts {
				p.Release()
			}
			defer viaArrow.Release()
			recordsEqual(t, want, viaArrow)
			got := readAll(t, s, files)
			defer got.Release()
			recordsEqual(t, want, got)
			checkStats(t, s, files)
			for _, df := range files {
				fr, err := OpenFile(context.Background(), s, df, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < fr.NumBatches(); i++ {
					whole, err := fr.ReadBatch(i, nil)
					if err != nil {
						t.Fatal(err)
					}
					proj, err := fr.ReadBatch(i, []int{5, 0, 9})
					if err != nil {
						t.Fatal(err)
					}
					for j, c := range []int{5, 0, 9} {
						if !array.ApproxEqual(whole.Column(c), proj.Column(j), array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
							t.Fatalf("%s batch %d: projected column %d differs", df.Key, i, c)
						}
					}
					whole.Release()
					proj.Release()
				}
				fr.Close()
			}
		})
	}
	if sizes["zstd-19"] >= sizes["none-0"] || sizes["zstd-1"] >= sizes["none-0"] {
		t.Fatalf("zstd did not compress: sizes %v", sizes)
	}
}

// TestBadCompressionLevel: a ZSTD level outside 1..MaxZstdLevel is refused by NewWriter.
func TestBadCompressionLevel(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, level := range []int{-1, MaxZstdLevel + 1} {
		_, err := NewWriter(context.Background(), memStore(t), "t", schema, []int32{1}, WriterOptions{CompressionLevel: level})
		if !errors.Is(err, ErrBadLevel) {
			t.Fatalf("level %d: %v, want ErrBadLevel", level, err)
		}
	}
	if _, err := NewWriter(context.Background(), memStore(t), "t", schema, []int32{1}, WriterOptions{Compression: CompressionLZ4, CompressionLevel: 5}); err != nil {
		t.Fatalf("lz4 ignores the level: %v", err)
	}
}

// TestIncompressibleBuffersStoredRaw: a buffer ZSTD does not shrink (random bytes) is
// stored behind the -1 length prefix, and reads back through both readers.
func TestIncompressibleBuffersStoredRaw(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	schema := arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.BinaryTypes.Binary}, {Name: "z", Type: arrow.PrimitiveTypes.Int64}}, nil)
	bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	zb := array.NewInt64Builder(memory.DefaultAllocator)
	for i := 0; i < 1000; i++ {
		v := make([]byte, 64)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		bb.Append(v)
		zb.Append(0)
	}
	b, z := bb.NewArray(), zb.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{b, z}, 1000)
	b.Release()
	z.Release()
	defer rec.Release()
	s := memStore(t)
	files := writeRecords(t, s, "t", schema, []arrow.RecordBatch{rec}, WriterOptions{})
	data, err := s.Get(context.Background(), files[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := parseFooter(data[len(data)-ipcTrailerLen-int(binary.LittleEndian.Uint32(data[len(data)-ipcTrailerLen:])) : len(data)-ipcTrailerLen])
	if err != nil {
		t.Fatal(err)
	}
	blk := fi.Batches[0]
	meta, err := stripMetaPrefix(data[blk.Offset : blk.Offset+int64(blk.MetaLen)])
	if err != nil {
		t.Fatal(err)
	}
	bm, err := parseBatchMeta(meta)
	if err != nil {
		t.Fatal(err)
	}
	body := data[blk.Offset+int64(blk.MetaLen):]
	var raw, compressed int
	for _, buf := range bm.Buffers {
		if buf.Length == 0 {
			continue
		}
		if int64(binary.LittleEndian.Uint64(body[buf.Offset:])) == -1 {
			raw++
		} else {
			compressed++
		}
	}
	if raw == 0 || compressed == 0 {
		t.Fatalf("%d raw and %d compressed buffers, want both (random bytes raw, zeros compressed)", raw, compressed)
	}
	viaArrow := readWithArrow(t, data)
	defer viaArrow.Release()
	recordsEqual(t, rec, viaArrow)
	got := readAll(t, s, files)
	defer got.Release()
	recordsEqual(t, rec, got)
}

// TestParallelEncodingKeepsOrderAndBytes: batches encoded on several goroutines at once
// land in the file in input order, with the same bytes (hence the same checksums and
// statistics) as encoding one at a time.
func TestParallelEncodingKeepsOrderAndBytes(t *testing.T) {
	r := seeded(t)
	schema := allTypesSchema()
	var recs []arrow.RecordBatch
	for i := 0; i < 12; i++ {
		recs = append(recs, randRecord(r, schema, 50+r.IntN(400), 10))
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	want := concatRecords(t, recs)
	defer want.Release()
	var first [][]byte
	var firstFiles []DataFile
	for _, cc := range []int{1, 2, 8} {
		s := memStore(t)
		files := writeRecords(t, s, "t/data", schema, recs, WriterOptions{CompressConcurrency: cc, MaxRowsPerBatch: 97, MaxRowsPerFile: 1500})
		got := readAll(t, s, files)
		recordsEqual(t, want, got)
		got.Release()
		var bodies [][]byte
		for _, df := range files {
			b, err := s.Get(context.Background(), df.Key)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, b)
		}
		if first == nil {
			first, firstFiles = bodies, files
			continue
		}
		if len(bodies) != len(first) {
			t.Fatalf("concurrency %d: %d files, want %d", cc, len(bodies), len(first))
		}
		for i := range bodies {
			if !bytes.Equal(bodies[i], first[i]) {
				t.Fatalf("concurrency %d: file %d differs from concurrency 1", cc, i)
			}
			a, b := files[i], firstFiles[i]
			a.Key, b.Key = "", ""
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("concurrency %d: description of file %d differs:\n%+v\n%+v", cc, i, a, b)
			}
		}
	}
}

// TestPanicOnEncodingGoroutine: a panic while a batch is encoded on its own goroutine
// fails the Writer with an error wrapping panics.ErrInternal, leaves no goroutine behind,
// and keeps the files stored before it in Written.
func TestPanicOnEncodingGoroutine(t *testing.T) {
	s := memStore(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := randRecord(seeded(t), schema, 100, 0)
	defer rec.Release()
	before := runtime.NumGoroutine()
	// Batches of 10 rows, files of 20: the first file is written and stored (in the
	// background; polled for) before the failpoint is enabled, then a batch of the
	// second file panics.
	w, err := NewWriter(context.Background(), s, "f", schema, fieldIDsFor(schema), WriterOptions{MaxRowsPerBatch: 10, MaxRowsPerFile: 20, CompressConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	first := rec.NewSlice(0, 20)
	defer first.Release()
	if err := w.Write(first); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		objs, err := s.List(context.Background(), "f/", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files stored 10 s after the first file filled up, want 1", len(objs))
		}
		runtime.Gosched()
	}
	disable := failpoint.Enable("fragment.encode_job", failpoint.Panic("encode"))
	defer disable()
	rest := rec.NewSlice(20, rec.NumRows())
	defer rest.Release()
	err = w.Write(rest)
	if err == nil {
		_, err = w.Close()
	}
	if !errors.Is(err, panics.ErrInternal) || !strings.Contains(err.Error(), "encode data file under f") {
		t.Fatalf("Write/Close: %v, want ErrInternal naming the directory", err)
	}
	if n := len(w.Written()); n != 1 {
		t.Fatalf("%d files written before the panic, want 1", n)
	}
	if err := w.Write(rec); !errors.Is(err, panics.ErrInternal) {
		t.Fatalf("Write after the failure: %v, want the writer failed", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the failed writer, %d before", n, before)
	}
}

// TestLargeBuffersDecodeInParallel: a batch whose buffers are large enough to be decoded on
// helper goroutines (helpMinBytes) reads back exactly, whole and projected, again and again
// (a decoder once used the spare capacity after its own buffer, the next buffer's bytes,
// as scratch space while another goroutine filled them).
func TestLargeBuffersDecodeInParallel(t *testing.T) {
	const n = 100_000
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.LargeString},
		{Name: "c", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	ab := array.NewInt64Builder(memory.DefaultAllocator)
	sb := array.NewLargeStringBuilder(memory.DefaultAllocator)
	cb := array.NewInt64Builder(memory.DefaultAllocator)
	codes := []string{"SEA", "SFO", "LAX", "JFK", "ORD", "ATL"}
	for i := 0; i < n; i++ {
		ab.Append(int64(i / 7))
		sb.Append(codes[(i*7919)%len(codes)])
		cb.Append(int64((i * 31) % 1000))
	}
	a, s, c := ab.NewArray(), sb.NewArray(), cb.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{a, s, c}, n)
	for _, x := range []arrow.Array{a, s, c} {
		x.Release()
	}
	defer rec.Release()
	st := memStore(t)
	files := writeRecords(t, st, "t", schema, []arrow.RecordBatch{rec}, WriterOptions{MaxRowsPerBatch: n})
	fr, err := OpenFile(context.Background(), st, files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	for round := 0; round < 20; round++ {
		got, err := fr.ReadBatch(0, nil)
		if err != nil {
			t.Fatal(err)
		}
		recordsEqual(t, rec, got)
		got.Release()
		proj, err := fr.ReadBatch(0, []int{1, 2})
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(proj.Column(0), rec.Column(1)) || !array.Equal(proj.Column(1), rec.Column(2)) {
			t.Fatalf("round %d: projected columns differ", round)
		}
		proj.Release()
	}
}

// failFirstPut fails the first Put (with errFirstPut) and passes on the rest.
type failFirstPut struct {
	store.Store
	puts atomic.Int32
}

var errFirstPut = errors.New("first put refused")

func (s *failFirstPut) Put(ctx context.Context, key string, data []byte) error {
	if s.puts.Add(1) == 1 {
		return errFirstPut
	}
	return s.Store.Put(ctx, key, data)
}

// TestBackgroundStoreFailure: a full file is stored on its own goroutine while the next
// is encoded; its store error fails the Writer (returned by a later Write or by Close),
// it is not listed by Written, and no goroutine is left behind. A Writer whose files all
// store lists every one, in order, only after Close.
func TestBackgroundStoreFailure(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := randRecord(seeded(t), schema, 100, 0)
	defer rec.Release()
	before := runtime.NumGoroutine()
	fs := &failFirstPut{Store: memStore(t)}
	w, err := NewWriter(context.Background(), fs, "f", schema, fieldIDsFor(schema), WriterOptions{MaxRowsPerBatch: 10, MaxRowsPerFile: 20, CompressConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(rec)
	if err == nil {
		_, err = w.Close()
	}
	if !errors.Is(err, errFirstPut) {
		t.Fatalf("Write/Close: %v, want the first Put's error", err)
	}
	if n := len(w.Written()); n != 0 {
		t.Fatalf("Written lists %d files after the first file's Put failed, want 0", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the failed writer, %d before", n, before)
	}

	s := memStore(t)
	w, err = NewWriter(context.Background(), s, "g", schema, fieldIDsFor(schema), WriterOptions{MaxRowsPerBatch: 10, MaxRowsPerFile: 20, CompressConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Fatalf("%d files, want 5", len(files))
	}
	for i, df := range files {
		if df.Rows != 20 {
			t.Fatalf("file %d has %d rows, want 20", i, df.Rows)
		}
	}
	got := readAll(t, s, files)
	defer got.Release()
	for c := range int(rec.NumCols()) {
		if !array.Equal(got.Column(c), rec.Column(c)) {
			t.Fatalf("column %d read back differs from the rows written", c)
		}
	}
}

// gatedPut holds every Put until release is closed, after telling entered.
type gatedPut struct {
	store.Store
	entered  chan string
	release  chan struct{}
	returned atomic.Int32 // Puts returned
}

func (s *gatedPut) Put(ctx context.Context, key string, data []byte) error {
	s.entered <- key
	<-s.release
	defer s.returned.Add(1)
	return s.Store.Put(ctx, key, data)
}

// TestCloseWaitsForEveryStore: while a full file's Put is held, Write goes on encoding
// the next file (a file filling up while the previous one is still being stored would
// wait for it), and Close does not return until that Put (and the last file's) has
// returned; Close then lists every file, in write order.
func TestCloseWaitsForEveryStore(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := randRecord(seeded(t), schema, 35, 0)
	defer rec.Release()
	gs := &gatedPut{Store: memStore(t), entered: make(chan string, 8), release: make(chan struct{})}
	w, err := NewWriter(context.Background(), gs, "f", schema, fieldIDsFor(schema), WriterOptions{MaxRowsPerBatch: 10, MaxRowsPerFile: 20, CompressConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	first := rec.NewSlice(0, 30) // a full file (held in its Put) and a batch of the next
	defer first.Release()
	if err := w.Write(first); err != nil {
		t.Fatal(err)
	}
	firstKey := <-gs.entered
	rest := rec.NewSlice(30, 35) // the second file stays partial: Write does not wait
	defer rest.Release()
	if err := w.Write(rest); err != nil {
		t.Fatal(err)
	}
	type closed struct {
		files []DataFile
		err   error
		puts  int32 // Puts returned when Close returned
	}
	done := make(chan closed, 1)
	go func() {
		files, err := w.Close()
		done <- closed{files, err, gs.returned.Load()}
	}()
	select {
	case c := <-done:
		t.Fatalf("Close returned (%v) while the first file's Put was held", c.err)
	default:
	}
	close(gs.release)
	c := <-done
	if c.err != nil {
		t.Fatal(c.err)
	}
	if c.puts != 2 {
		t.Fatalf("Close returned after %d Puts had returned, want 2", c.puts)
	}
	if len(c.files) != 2 || c.files[0].Key != firstKey {
		t.Fatalf("Close listed %+v, want 2 files, the first %s", c.files, firstKey)
	}
	got := readAll(t, gs.Store, c.files)
	defer got.Release()
	if !array.Equal(got.Column(0), rec.Column(0)) {
		t.Fatal("rows read back differ from the rows written")
	}
}

// TestTransientMemoryLeavesNoStaleBytes: batches are compressed into, and their messages
// assembled in, pooled memory that is not zeroed; every byte of a file (the padding
// included) must still be written, so a file comes out the same when the pools hold
// garbage as when they are empty.
func TestTransientMemoryLeavesNoStaleBytes(t *testing.T) {
	recs := flightsRecords(t, 3*DefaultMaxRowsPerBatch+1000, DefaultMaxRowsPerBatch)
	schema := recs[0].Schema()
	write := func() []byte {
		s := memStore(t)
		files := writeRecords(t, s, "t/data", schema, recs, WriterOptions{})
		if len(files) != 1 {
			t.Fatalf("%d files, want 1", len(files))
		}
		b, err := s.Get(context.Background(), files[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	clean := write()
	// Fill the pools with garbage of every class a flights batch's buffers and
	// messages use.
	var held [][]byte
	for n := scratchMinBytes; n <= 2<<20; n += n / scratchSubClasses {
		for range 4 {
			b := scratch.Allocate(n)
			for i := range b {
				b[i] = 0xEE
			}
			held = append(held, b)
		}
	}
	for _, b := range held {
		scratch.Free(b)
	}
	if dirty := write(); !bytes.Equal(dirty, clean) {
		t.Fatal("a file written with garbage in the transient pools differs from one written without")
	}
}
