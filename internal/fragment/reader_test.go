package fragment

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/store"
)

// scanSchema is the shape of the benchmark table: int64, string, float64, timestamp.
func scanSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}, nil)
}

// scanRecord builds n deterministic rows of scanSchema starting at row first.
func scanRecord(first, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, scanSchema())
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	names := b.Field(1).(*array.StringBuilder)
	scores := b.Field(2).(*array.Float64Builder)
	ats := b.Field(3).(*array.TimestampBuilder)
	ids.Reserve(n)
	scores.Reserve(n)
	ats.Reserve(n)
	names.Reserve(n)
	for i := first; i < first+n; i++ {
		ids.UnsafeAppend(int64(i))
		names.Append(cityNames[i%len(cityNames)])
		scores.UnsafeAppend(float64(i%1000) * 0.37)
		ats.UnsafeAppend(arrow.Timestamp(1_700_000_000_000_000 + int64(i)*1000))
	}
	return b.NewRecordBatch()
}

var cityNames = []string{"Oslo", "Lima", "Pune", "Accra", "Quito", "Hanoi", "Perth", "Turin", "Dakar", "Cusco"}

func TestRequestCounts(t *testing.T) {
	s := memStore(t)
	ctx := context.Background()
	rec := scanRecord(0, 8*4096)
	defer rec.Release()
	files := writeRecords(t, s, "rc", scanSchema(), []arrow.RecordBatch{rec}, WriterOptions{MaxRowsPerBatch: 4096})
	df := files[0]
	if len(df.Batches) != 8 {
		t.Fatalf("%d batches, want 8", len(df.Batches))
	}
	c := s.Counters()

	before := c.Snapshot()
	fr, err := OpenFile(ctx, s, df, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	open := c.Snapshot().Sub(before)
	if open.Total() != 1 || open.ByOp[store.OpGetRange] != 1 {
		t.Fatalf("OpenFile made %v, want one range read", open)
	}
	t.Logf("open: %v, %d bytes (file %d bytes)", open, open.BytesRead, df.Size)

	var wholeBytes int64
	for i := 0; i < fr.NumBatches(); i++ {
		before = c.Snapshot()
		r, err := fr.ReadBatch(i, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
		d := c.Snapshot().Sub(before)
		if d.Total() != 1 || d.ByOp[store.OpGetRange] != 1 {
			t.Fatalf("ReadBatch(%d, nil) made %v, want one range read", i, d)
		}
		wholeBytes += d.BytesRead
	}
	t.Logf("all columns: 1 range read per batch, %d bytes per batch", wholeBytes/int64(fr.NumBatches()))

	before = c.Snapshot()
	var projBytes int64
	for i := 0; i < fr.NumBatches(); i++ {
		r, err := fr.ReadBatch(i, []int{0}) // id only
		if err != nil {
			t.Fatal(err)
		}
		if r.NumCols() != 1 || r.Column(0).(*array.Int64).Value(0) != int64(i*4096) {
			t.Fatalf("projected batch %d: %v", i, r)
		}
		r.Release()
	}
	d := c.Snapshot().Sub(before)
	projBytes = d.BytesRead
	if d.Total() != int64(2*fr.NumBatches()) {
		t.Fatalf("projected reads made %v, want 2 per batch", d)
	}
	if projBytes*2 > wholeBytes {
		t.Fatalf("projection of 1 of 4 columns read %d bytes, whole batches %d", projBytes, wholeBytes)
	}
	t.Logf("column 'id' only: 2 range reads per batch, %d bytes per batch", projBytes/int64(fr.NumBatches()))

	// The same stays true on local disk.
	fs := fileStore(t)
	ffiles := writeRecords(t, fs, "rc", scanSchema(), []arrow.RecordBatch{rec}, WriterOptions{MaxRowsPerBatch: 4096})
	before = fs.Counters().Snapshot()
	ffr, err := OpenFile(ctx, fs, ffiles[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ffr.ReadBatch(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	ffr.Close()
	if d := fs.Counters().Snapshot().Sub(before); d.Total() != 2 {
		t.Fatalf("file store open + one batch made %v, want 2 requests", d)
	}
}

func TestLargeFooterCostsTwoRequests(t *testing.T) {
	s := memStore(t)
	rec := scanRecord(0, 3000)
	defer rec.Release()
	// 3000 one-row batches: 72 KB of block entries, more than TailReadSize.
	files := writeRecords(t, s, "lf", scanSchema(), []arrow.RecordBatch{rec}, WriterOptions{MaxRowsPerBatch: 1})
	before := s.Counters().Snapshot()
	fr, err := OpenFile(context.Background(), s, files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	if d := s.Counters().Snapshot().Sub(before); d.Total() != 2 {
		t.Fatalf("open with a large footer made %v, want 2 range reads", d)
	}
	if fr.NumBatches() != 3000 {
		t.Fatalf("%d batches", fr.NumBatches())
	}
	last, err := fr.ReadBatch(2999, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Release()
	if last.Column(0).(*array.Int64).Value(0) != 2999 {
		t.Fatal("last batch holds the wrong row")
	}
}

func wantCorrupt(t *testing.T, err error, key string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("want ErrCorrupt, got %v", err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), key) {
		t.Fatalf("error %v does not name key %s", err, key)
	}
}

func TestTruncatedFileErrorNamesKey(t *testing.T) {
	s := memStore(t)
	ctx := context.Background()
	rec := scanRecord(0, 5000)
	defer rec.Release()
	files := writeRecords(t, s, "tr", scanSchema(), []arrow.RecordBatch{rec}, WriterOptions{MaxRowsPerBatch: 1000})
	df := files[0]
	data, err := s.Get(ctx, df.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 7, 100, len(data) / 2, len(data) - 11, len(data) - 1} {
		key := "tr/truncated.arrow"
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, key, data[:n]); err != nil {
			t.Fatal(err)
		}
		// The manifest still records the full size.
		bad := df
		bad.Key = key
		_, err := OpenFile(ctx, s, bad, nil)
		wantCorrupt(t, err, key)
		// A description written for the short object is refused too.
		bad.Size = int64(n)
		_, err = OpenFile(ctx, s, bad, nil)
		wantCorrupt(t, err, key)
	}

	// Truncation discovered only when a batch is read: the tail is intact but the object
	// lost bytes in the middle, so batch offsets run past what is stored.
	key := "tr/hole.arrow"
	holed := append(append([]byte(nil), data[:64]...), data[len(data)-4096:]...)
	if err := s.Put(ctx, key, holed); err != nil {
		t.Fatal(err)
	}
	bad := df
	bad.Key, bad.Size, bad.Batches = key, int64(len(holed)), nil
	_, err = OpenFile(ctx, s, bad, nil)
	wantCorrupt(t, err, key)

	// A missing object is a store error, not corruption.
	gone := df
	gone.Key = "tr/missing.arrow"
	_, err = OpenFile(ctx, s, gone, nil)
	if !errors.Is(err, store.ErrNotFound) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), gone.Key) {
		t.Fatalf("missing object: %v", err)
	}
}

// TestByteFlipsAreDetected flips each byte of a small data file in turn: reading the whole
// file must then fail with ErrCorrupt naming the key, or (for bytes the reader never uses,
// such as the leading magic and schema message) return the original values. Never a panic,
// never wrong values.
func TestByteFlipsAreDetected(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			s := memStore(t)
			ctx := context.Background()
			schema := allTypesSchema()
			r := seeded(t)
			rec := randRecord(r, schema, 40, 20)
			defer rec.Release()
			files := writeRecords(t, s, "bf", schema, []arrow.RecordBatch{rec}, WriterOptions{Compression: comp, MaxRowsPerBatch: 20})
			df := files[0]
			data, err := s.Get(ctx, df.Key)
			if err != nil {
				t.Fatal(err)
			}
			step := 1 // every byte of the uncompressed file
			if comp != CompressionNone {
				step = 3 // decompression makes each trial slower
			}
			if testing.Short() {
				step *= 7
			}
			detected, unused := 0, 0
			for pos := 0; pos < len(data); pos += step {
				flipped := append([]byte(nil), data...)
				flipped[pos] ^= 0x5a
				key := "bf/flipped.arrow"
				_ = s.Delete(ctx, key)
				if err := s.Put(ctx, key, flipped); err != nil {
					t.Fatal(err)
				}
				bad := df
				bad.Key = key
				got, err := readAllErr(s, bad)
				if err != nil {
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
						t.Fatalf("flip at %d: %v", pos, err)
					}
					detected++
					continue
				}
				unused++
				if !array.RecordApproxEqual(rec, got, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
					t.Fatalf("flip at byte %d of %d went undetected and changed the values", pos, len(data))
				}
				got.Release()
			}
			t.Logf("%s: %d flips detected, %d in bytes the reader does not use", comp, detected, unused)
		})
	}
}

func readAllErr(s store.Store, df DataFile) (arrow.RecordBatch, error) {
	fr, err := OpenFile(context.Background(), s, df, nil)
	if err != nil {
		return nil, err
	}
	defer fr.Close()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for i := 0; i < fr.NumBatches(); i++ {
		r, err := fr.ReadBatch(i, nil)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	out := make([]arrow.Array, fr.Schema().NumFields())
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for c := range out {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(c)
		}
		a, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, err
		}
		defer a.Release()
		out[c] = a
	}
	return array.NewRecordBatch(fr.Schema(), out, rows), nil
}

// TestByteFlipsWithoutChecksums reads flipped files through a description without
// checksums (Batches nil), so the parsers and decoders meet the damaged bytes themselves:
// every outcome must be success or ErrCorrupt naming the key, never a panic or another
// error class. Projections are read too.
func TestByteFlipsWithoutChecksums(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionZstd, CompressionLZ4} {
		t.Run(string(comp), func(t *testing.T) {
			s := memStore(t)
			ctx := context.Background()
			schema := allTypesSchema()
			r := seeded(t)
			rec := randRecord(r, schema, 30, 20)
			defer rec.Release()
			files := writeRecords(t, s, "nc", schema, []arrow.RecordBatch{rec}, WriterOptions{Compression: comp, MaxRowsPerBatch: 15})
			data, err := s.Get(ctx, files[0].Key)
			if err != nil {
				t.Fatal(err)
			}
			step := 5
			if testing.Short() {
				step = 31
			}
			errs := 0
			for pos := r.IntN(step); pos < len(data); pos += step {
				flipped := append([]byte(nil), data...)
				flipped[pos] ^= byte(1 + r.IntN(255))
				key := "nc/flipped.arrow"
				_ = s.Delete(ctx, key)
				if err := s.Put(ctx, key, flipped); err != nil {
					t.Fatal(err)
				}
				df := DataFile{Key: key, Size: int64(len(flipped))}
				check := func(err error) {
					t.Helper()
					if err == nil {
						return
					}
					errs++
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
						t.Fatalf("flip at %d: %v", pos, err)
					}
				}
				fr, err := OpenFile(ctx, s, df, nil)
				if err != nil {
					check(err)
					continue
				}
				for i := 0; i < fr.NumBatches(); i++ {
					for _, cols := range [][]int{nil, {10}, {21, 2}} {
						got, err := fr.ReadBatch(i, cols)
						check(err)
						if err == nil {
							got.Release()
						}
					}
				}
				fr.Close()
			}
			t.Logf("%s: %d reads failed with ErrCorrupt", comp, errs)
		})
	}
}

// TestConcurrentReads reads every batch of one FileReader from several goroutines at
// once, whole and projected (run with -race).
func TestConcurrentReads(t *testing.T) {
	s := memStore(t)
	rec := scanRecord(0, 20000)
	defer rec.Release()
	files := writeRecords(t, s, "cc", scanSchema(), []arrow.RecordBatch{rec}, WriterOptions{MaxRowsPerBatch: 1000})
	fr, err := OpenFile(context.Background(), s, files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	errc := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < fr.NumBatches(); i++ {
				cols := [][]int{nil, {1}, {3, 0}}[(i+g)%3]
				r, err := fr.ReadBatch(i, cols)
				if err != nil {
					errc <- err
					return
				}
				idCol := 0
				if cols != nil && cols[0] != 0 {
					idCol = -1
					for j, c := range cols {
						if c == 0 {
							idCol = j
						}
					}
				}
				if idCol >= 0 && r.Column(idCol).(*array.Int64).Value(0) != int64(i*1000) {
					errc <- errors.New("wrong first id")
					return
				}
				r.Release()
			}
			errc <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadBatchRange: consecutive batches come back equal to ReadBatch's, for one range
// request; a flipped byte in any of them is detected; ranges outside the file are errors.
func TestReadBatchRange(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			s := memStore(t)
			ctx := context.Background()
			rec := scanRecord(0, 8*512)
			defer rec.Release()
			df := writeRecords(t, s, "brr", scanSchema(), []arrow.RecordBatch{rec}, WriterOptions{Compression: comp, MaxRowsPerBatch: 512})[0]
			fr, err := OpenFile(ctx, s, df, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer fr.Close()
			c := s.Counters()
			before := c.Snapshot()
			got, err := fr.ReadBatchRange(2, 4)
			if err != nil {
				t.Fatal(err)
			}
			if d := c.Snapshot().Sub(before); d.Total() != 1 || d.ByOp[store.OpGetRange] != 1 {
				t.Fatalf("ReadBatchRange(2, 4) made %v, want one range read", d)
			}
			if len(got) != 4 {
				t.Fatalf("%d batches, want 4", len(got))
			}
			for k, g := range got {
				want, err := fr.ReadBatch(2+k, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !array.RecordEqual(g, want) {
					t.Fatalf("batch %d differs from ReadBatch's", 2+k)
				}
				want.Release()
				g.Release()
			}
			for _, r := range [][2]int{{-1, 2}, {7, 2}, {0, 0}, {0, 9}} {
				if _, err := fr.ReadBatchRange(r[0], r[1]); err == nil {
					t.Fatalf("ReadBatchRange(%d, %d): no error", r[0], r[1])
				}
			}

			// A flipped byte inside batch 4's block fails the range with ErrCorrupt.
			data, err := s.Get(ctx, df.Key)
			if err != nil {
				t.Fatal(err)
			}
			b := fr.blocks[4]
			data[b.Offset+int64(b.MetaLen)+b.BodyLen/2] ^= 0x5a
			bad := df
			bad.Key = "brr/flipped.arrow"
			if err := s.Put(ctx, bad.Key, data); err != nil {
				t.Fatal(err)
			}
			bfr, err := OpenFile(ctx, s, bad, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer bfr.Close()
			if _, err := bfr.ReadBatchRange(3, 3); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad.Key) {
				t.Fatalf("flipped byte in batch 4: %v, want ErrCorrupt naming the key", err)
			}
		})
	}
}
