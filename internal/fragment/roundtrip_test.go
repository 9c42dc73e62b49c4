package fragment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/store"
)

// writeRecords writes recs through a Writer and returns the files.
func writeRecords(t testing.TB, s store.Store, dir string, schema *arrow.Schema, recs []arrow.RecordBatch, opts WriterOptions) []DataFile {
	t.Helper()
	w, err := NewWriter(context.Background(), s, dir, schema, fieldIDsFor(schema), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestRoundTripAllTypesSplitsFilesAndBatches(t *testing.T) {
	for _, comp := range []Compression{"", CompressionLZ4, CompressionNone} {
		for _, storeKind := range []string{"mem", "file"} {
			t.Run(fmt.Sprintf("%s/%s", comp, storeKind), func(t *testing.T) {
				r := seeded(t)
				s := memStore(t)
				if storeKind == "file" {
					s = fileStore(t)
				}
				schema := allTypesSchema()
				var recs []arrow.RecordBatch
				total := 0
				for _, n := range []int{0, 1, 300, 77, 700, 129, 900} {
					recs = append(recs, randRecord(r, schema, n, 15))
					total += n
				}
				const perBatch, perFile = 128, 500
				files := writeRecords(t, s, "tbl/data", schema, recs, WriterOptions{Compression: comp, MaxRowsPerBatch: perBatch, MaxRowsPerFile: perFile})

				if want := (total + perFile - 1) / perFile; len(files) != want {
					t.Fatalf("%d files, want %d", len(files), want)
				}
				var rows int64
				for fi, df := range files {
					if !strings.HasPrefix(df.Key, "tbl/data/") || !strings.HasSuffix(df.Key, ".arrow") {
						t.Fatalf("key %q", df.Key)
					}
					info, err := s.Head(context.Background(), df.Key)
					if err != nil || info.Size != df.Size {
						t.Fatalf("head %v size %d, DataFile.Size %d", err, info.Size, df.Size)
					}
					wantComp := comp
					if comp == "" {
						wantComp = CompressionZstd
					}
					if df.Compression != wantComp {
						t.Fatalf("compression %q, want %q", df.Compression, wantComp)
					}
					if fi < len(files)-1 && df.Rows != perFile {
						t.Fatalf("file %d has %d rows, want %d", fi, df.Rows, perFile)
					}
					var sum int64
					for bi, b := range df.Batches {
						if b.Rows > perBatch || (bi < len(df.Batches)-1 && b.Rows != perBatch) {
							t.Fatalf("file %d batch %d has %d rows", fi, bi, b.Rows)
						}
						sum += b.Rows
					}
					if sum != df.Rows {
						t.Fatalf("batch rows sum %d, file rows %d", sum, df.Rows)
					}
					rows += df.Rows
				}
				if rows != int64(total) {
					t.Fatalf("wrote %d rows, want %d", rows, total)
				}

				want := concatRecords(t, recs)
				defer want.Release()
				got := readAll(t, s, files)
				defer got.Release()
				recordsEqual(t, want, got)
				checkStats(t, s, files)
				for _, r := range recs {
					r.Release()
				}
			})
		}
	}
}

// checkStats compares every batch's and file's statistics with a brute-force computation
// over the values read back.
func checkStats(t *testing.T, s store.Store, files []DataFile) {
	t.Helper()
	for _, df := range files {
		fr, err := OpenFile(context.Background(), s, df, nil)
		if err != nil {
			t.Fatal(err)
		}
		var recs []arrow.RecordBatch
		for i := 0; i < fr.NumBatches(); i++ {
			rec, err := fr.ReadBatch(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
			for c := 0; c < int(rec.NumCols()); c++ {
				want := bruteStats(df.FieldIDs[c], rec.Column(c))
				if got := df.BatchStats(i)[c]; got != want {
					t.Fatalf("%s batch %d column %s stats:\ngot  %+v\nwant %+v", df.Key, i, rec.Schema().Field(c).Name, got, want)
				}
			}
		}
		all := concatRecords(t, recs)
		for c := 0; c < int(all.NumCols()); c++ {
			want := bruteStats(df.FieldIDs[c], all.Column(c))
			if got := df.Stats[c]; got != want {
				t.Fatalf("%s file column %s stats:\ngot  %+v\nwant %+v", df.Key, all.Schema().Field(c).Name, got, want)
			}
		}
		all.Release()
		for _, r := range recs {
			r.Release()
		}
		fr.Close()
	}
}

func TestProjectionMatchesFullRead(t *testing.T) {
	r := seeded(t)
	s := memStore(t)
	schema := allTypesSchema()
	rec := randRecord(r, schema, 1000, 20)
	defer rec.Release()
	for _, comp := range []Compression{CompressionZstd, CompressionNone} {
		files := writeRecords(t, s, "p", schema, []arrow.RecordBatch{rec}, WriterOptions{Compression: comp, MaxRowsPerBatch: 300})
		fr, err := OpenFile(context.Background(), s, files[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		nf := schema.NumFields()
		cases := [][]int{{0}, {nf - 1}, {10}, {22}, {20, 21}, {3, 1, 3}, {12, 0, 24, 5}}
		for k := 0; k < 20; k++ { // random subsets in random order
			var cols []int
			for _, c := range r.Perm(nf)[:1+r.IntN(nf-1)] {
				cols = append(cols, c)
			}
			cases = append(cases, cols)
		}
		for i := 0; i < fr.NumBatches(); i++ {
			full, err := fr.ReadBatch(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, cols := range cases {
				before := s.Counters().Snapshot()
				got, err := fr.ReadBatch(i, cols)
				if err != nil {
					t.Fatalf("batch %d columns %v: %v", i, cols, err)
				}
				reqs := s.Counters().Snapshot().Sub(before)
				// Metadata, then one coalesced range (none for a column without buffers).
				if n := reqs.ByOp[store.OpGetRange]; n < 1 || n > 2 || reqs.Total() != n {
					t.Fatalf("columns %v took requests %v, want at most 2 range reads", cols, reqs)
				}
				want := project(retained(full), cols)
				recordsEqual(t, want, got)
				for j, c := range cols {
					if got.Schema().Field(j).Name != schema.Field(c).Name {
						t.Fatalf("field %d is %q, want %q", j, got.Schema().Field(j).Name, schema.Field(c).Name)
					}
				}
				want.Release()
				got.Release()
			}
			full.Release()
		}
		fr.Close()
	}
}

func retained(r arrow.RecordBatch) arrow.RecordBatch { r.Retain(); return r }

func TestDictionaryColumnsRoundTrip(t *testing.T) {
	s := memStore(t)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "city", Type: dt, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	db := b.Field(1).(*array.BinaryDictionaryBuilder)
	for i := 0; i < 1000; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 0 {
			db.AppendNull()
		} else {
			db.AppendString([]string{"Oslo", "Lima", "Pune"}[i%3])
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	// One batch: an IPC file cannot replace a dictionary between batches.
	files := writeRecords(t, s, "d", schema, []arrow.RecordBatch{rec}, WriterOptions{})
	got := readAll(t, s, files)
	defer got.Release()
	recordsEqual(t, rec, got)
	if st := files[0].Stats[1]; st.NullCount != 143 || st.HasMin {
		t.Fatalf("dictionary stats %+v: want 143 nulls and no min/max", st)
	}
	fr, err := OpenFile(context.Background(), s, files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	p, err := fr.ReadBatch(0, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if !array.Equal(p.Column(0), rec.Column(1)) {
		t.Fatal("projected dictionary column differs")
	}
}

func TestWriterRejectsBadInput(t *testing.T) {
	s := memStore(t)
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := NewWriter(ctx, s, "x", schema, []int32{1}, WriterOptions{}); err == nil {
		t.Fatal("accepted 1 field id for 2 fields")
	}
	if _, err := NewWriter(ctx, s, "x", schema, []int32{1, 1}, WriterOptions{}); err == nil {
		t.Fatal("accepted duplicate field ids")
	}
	if _, err := NewWriter(ctx, s, "x", schema, []int32{1, 2}, WriterOptions{Compression: "snappy"}); err == nil {
		t.Fatal("accepted unknown compression")
	}
	w, err := NewWriter(ctx, s, "x", schema, []int32{1, 2}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Float64}}, nil)
	r := seeded(t)
	bad := randRecord(r, other, 3, 0)
	defer bad.Release()
	if err := w.Write(bad); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("want ErrSchemaMismatch, got %v", err)
	}
	files, err := w.Close()
	if err != nil || len(files) != 0 {
		t.Fatalf("empty writer closed with %v, %v", files, err)
	}
	if _, err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	good := randRecord(r, schema, 3, 0)
	defer good.Release()
	if err := w.Write(good); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

func TestFieldIDsAreCheckedOnOpen(t *testing.T) {
	s := memStore(t)
	r := seeded(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := randRecord(r, schema, 10, 0)
	defer rec.Release()
	files := writeRecords(t, s, "f", schema, []arrow.RecordBatch{rec}, WriterOptions{})
	df := files[0]
	df.FieldIDs = []int32{7}
	_, err := OpenFile(context.Background(), s, df, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), df.Key) {
		t.Fatalf("want ErrCorrupt naming %s, got %v", df.Key, err)
	}
	fr, err := OpenFile(context.Background(), s, files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	if fr.Schema().Metadata().FindKey(FieldIDsMetadataKey) >= 0 {
		t.Fatal("Schema() exposes the field-id metadata")
	}
}

// sharedData finds a file under the project's shared/data folder: beside the checkout
// (as CI lays it out) or at /work/shared.
func sharedData(t *testing.T, name string) string {
	for _, p := range []string{
		os.Getenv("SHALE_SHARED_DATA"),
		filepath.Join("..", "..", "..", "shared", "data"),
		"/work/shared/data",
	} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, name)); err == nil {
			return filepath.Join(p, name)
		}
	}
	t.Skipf("shared data file %s not found (set SHALE_SHARED_DATA)", name)
	return ""
}

func TestFlights200kRoundTrip(t *testing.T) {
	path := sharedData(t, "flights-200k.arrow")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var recs []arrow.RecordBatch
	for i := 0; i < in.NumRecords(); i++ {
		rec, err := in.RecordBatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		recs = append(recs, rec)
	}
	want := concatRecords(t, recs)
	defer want.Release()
	if want.NumRows() != 200000 {
		t.Fatalf("flights-200k has %d rows", want.NumRows())
	}
	for _, storeKind := range []string{"mem", "file"} {
		s := memStore(t)
		if storeKind == "file" {
			s = fileStore(t)
		}
		files := writeRecords(t, s, "flights/data", in.Schema(), recs, WriterOptions{})
		if len(files) != 1 || len(files[0].Batches) != 4 || files[0].Rows != 200000 {
			t.Fatalf("%s: files %d, batches %d", storeKind, len(files), len(files[0].Batches))
		}
		got := readAll(t, s, files)
		recordsEqual(t, want, got)
		got.Release()
		checkStats(t, s, files)
		t.Logf("%s: flights-200k %d bytes raw IPC, %d bytes zstd data file", storeKind, fileSize(t, path), files[0].Size)
	}
}

func fileSize(t *testing.T, p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestReaderReleasesEverything: opening a file, reading every batch and closing it leaves
// nothing allocated in a checked allocator (the schema message's retained buffer once
// leaked 256 bytes per open).
func TestReaderReleasesEverything(t *testing.T) {
	r := seeded(t)
	s := memStore(t)
	schema := allTypesSchema()
	rec := randRecord(r, schema, 300, 10)
	defer rec.Release()
	files := writeRecords(t, s, "t/data", schema, []arrow.RecordBatch{rec}, WriterOptions{})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	for _, df := range files {
		fr, err := OpenFile(context.Background(), s, df, mem)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < fr.NumBatches(); i++ {
			b, err := fr.ReadBatch(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
		}
		fr.Close()
	}
	mem.AssertSize(t, 0)
}

// TestCompressConcurrencyKeepsBytes: compressing a batch's buffers in parallel writes the
// same bytes as one at a time.
func TestCompressConcurrencyKeepsBytes(t *testing.T) {
	r := seeded(t)
	schema := allTypesSchema()
	rec := randRecord(r, schema, 2000, 10)
	defer rec.Release()
	var bodies [][]byte
	for _, cc := range []int{1, 4} {
		s := memStore(t)
		files := writeRecords(t, s, "t/data", schema, []arrow.RecordBatch{rec}, WriterOptions{CompressConcurrency: cc})
		if len(files) != 1 {
			t.Fatalf("%d files", len(files))
		}
		b, err := s.Get(context.Background(), files[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	if !bytes.Equal(bodies[0], bodies[1]) {
		t.Fatalf("compress concurrency 1 and 4 wrote different bytes (%d vs %d)", len(bodies[0]), len(bodies[1]))
	}
}
