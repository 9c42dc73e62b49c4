package pqinput

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/shale-db/shale/internal/flightstest"
)

// plainBatches reads r with pqarrow's defaults (no dictionary reads), as the import did
// before this package: the reference every read here must equal.
func plainBatches(t *testing.T, r parquet.ReaderAtSeeker, batchRows int64) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	return flightstest.ReadParquet(t, r, pqarrow.ArrowReadProperties{BatchSize: batchRows, Parallel: true})
}

// compare reads r with Open (through a checked allocator: every buffer is released by the
// end) and requires the same schema and batches as plainBatches. It returns the columns
// read as dictionaries.
func compare(t *testing.T, r parquet.ReaderAtSeeker, batchRows int64) []string {
	t.Helper()
	wantSchema, want := plainBatches(t, r, batchRows)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rd, err := Open(context.Background(), r, Options{BatchRows: batchRows, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if !rd.Schema().Equal(wantSchema) || !rd.Schema().Metadata().Equal(wantSchema.Metadata()) {
		t.Fatalf("schema\n%v\nwant\n%v", rd.Schema(), wantSchema)
	}
	var names []string
	for _, e := range rd.expand {
		names = append(names, rd.Schema().Field(e.col).Name)
	}
	i := 0
	for rd.Next() {
		if i >= len(want) {
			t.Fatalf("more than the %d batches of pqarrow's read", len(want))
		}
		got := rd.RecordBatch()
		if !got.Schema().Equal(wantSchema) {
			t.Fatalf("batch %d: schema %v", i, got.Schema())
		}
		if !array.RecordEqual(got, want[i]) {
			for c := range got.Columns() {
				if !array.Equal(got.Column(c), want[i].Column(c)) {
					t.Fatalf("batch %d column %q differs:\n%v\nwant\n%v", i, got.ColumnName(c), got.Column(c), want[i].Column(c))
				}
			}
			t.Fatalf("batch %d differs", i)
		}
		i++
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Fatalf("%d batches, pqarrow read %d", i, len(want))
	}
	return names
}

func TestFlightsSameAsPqarrow(t *testing.T) {
	f, err := os.Open(flightstest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dict := compare(t, f, DefaultBatchRows)
	if fmt.Sprint(dict) != "[origin destination]" {
		t.Fatalf("columns read as dictionaries: %v, want [origin destination]", dict)
	}
}

// writeParquet writes rec as a Parquet file of rowGroup-row groups, with the Arrow schema
// stored (so large types read back as themselves); the columns named in plain are written
// without a dictionary.
func writeParquet(t *testing.T, rec arrow.RecordBatch, rowGroup int64, plain ...string) *bytes.Reader {
	t.Helper()
	opts := []parquet.WriterProperty{parquet.WithMaxRowGroupLength(rowGroup), parquet.WithDictionaryDefault(true)}
	for _, c := range plain {
		opts = append(opts, parquet.WithDictionaryFor(c, false))
	}
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(opts...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBuffered(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

// mixedRecord has every string and binary type, with nulls and empty values, a column of
// distinct values and an int64 column.
func mixedRecord(rows int) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary},
		{Name: "plain", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "code", Type: arrow.BinaryTypes.String}, // values of at most 8 bytes, no nulls
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	words := []string{"SEA", "", "LAX", "a much longer value than the others", "JFK", "ORD"}
	for i := range rows {
		w := words[(i*7+i/5)%len(words)]
		if i%11 == 3 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(w)
		}
		if i%13 == 5 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.LargeStringBuilder).Append(w + "!")
		}
		if i%17 == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.BinaryBuilder).Append([]byte{byte(i % 5), 0, byte(i % 3)})
		}
		b.Field(3).(*array.BinaryBuilder).Append([]byte(w))
		if i%19 == 7 {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.LargeStringBuilder).Append(fmt.Sprintf("row-%d", i))
		}
		b.Field(5).(*array.Int64Builder).Append(int64(i))
		b.Field(6).(*array.StringBuilder).Append([]string{"SEA", "", "ABCDEFGH", "x", "LAX12"}[(i/3)%5])
	}
	return b.NewRecordBatch()
}

func TestMixedColumnsSameAsPqarrow(t *testing.T) {
	rec := mixedRecord(5000)
	defer rec.Release()
	// Row groups of 1,000 rows and batches of 700: most batches span two row groups,
	// whose dictionaries differ (pqarrow concatenates and unifies them).
	for _, batchRows := range []int64{700, 1000, 64 << 10} {
		t.Run(fmt.Sprintf("batch=%d", batchRows), func(t *testing.T) {
			dict := compare(t, writeParquet(t, rec, 1000, "plain"), batchRows)
			if fmt.Sprint(dict) != "[s ls b lb code]" {
				t.Fatalf("columns read as dictionaries: %v, want [s ls b lb code] (not the one written without a dictionary)", dict)
			}
		})
	}
}

func TestEmptyFile(t *testing.T) {
	rec := mixedRecord(0)
	defer rec.Release()
	r := writeParquet(t, rec, 1000)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rd, err := Open(context.Background(), r, Options{Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	if rd.NumRows() != 0 || rd.Schema().NumFields() != 7 {
		t.Fatalf("rows %d, schema %v", rd.NumRows(), rd.Schema())
	}
	for rd.Next() {
		if rd.RecordBatch().NumRows() != 0 {
			t.Fatalf("a batch of %d rows from an empty file", rd.RecordBatch().NumRows())
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestNotParquet(t *testing.T) {
	_, err := Open(context.Background(), bytes.NewReader([]byte("not a parquet file at all")), Options{})
	if err == nil {
		t.Fatal("opened a file that is not Parquet")
	}
}

func TestExpandDictionaryRejectsBadIndex(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	idx := array.NewInt32Builder(mem)
	defer idx.Release()
	idx.AppendValues([]int32{0, 1, 2}, []bool{true, true, false}) // the null slot's index is not checked
	indices := idx.NewInt32Array()
	defer indices.Release()
	vb := array.NewStringBuilder(mem)
	defer vb.Release()
	vb.AppendValues([]string{"x", "yy"}, nil)
	values := vb.NewStringArray()
	defer values.Release()
	d := array.NewDictionaryArray(dt, indices, values)
	defer d.Release()
	got, err := expandDictionary(d, arrow.BinaryTypes.LargeString, mem)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != `["x" "yy" (null)]` {
		t.Fatalf("expanded %v", got)
	}
	got.Release()

	idx.AppendValues([]int32{1, 2}, nil)
	bad := idx.NewInt32Array()
	defer bad.Release()
	d2 := array.NewDictionaryArray(dt, bad, values)
	defer d2.Release()
	if _, err := expandDictionary(d2, arrow.BinaryTypes.String, mem); !errors.Is(err, errIndex) {
		t.Fatalf("index 2 of 2 values: %v, want errIndex", err)
	}
}

// TestRecycledBuffersSameAsPqarrow reads through the default allocator with freed buffers
// poisoned, holding each batch while the next two are read (as the import's writer holds
// batches it is still encoding): a buffer freed while still in use would show as garbage.
func TestRecycledBuffersSameAsPqarrow(t *testing.T) {
	rec := mixedRecord(20000)
	defer rec.Release()
	for _, name := range []string{"mixed", "flights"} {
		t.Run(name, func(t *testing.T) {
			var r parquet.ReaderAtSeeker
			batchRows := int64(1500)
			if name == "mixed" {
				r = writeParquet(t, rec, 4000, "plain")
			} else {
				f, err := os.Open(flightstest.Path(t))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				r, batchRows = f, DefaultBatchRows
			}
			_, want := plainBatches(t, r, batchRows)
			mem := newRecycler(DefaultRecycleBytes)
			mem.poison = true
			rd, err := Open(context.Background(), r, Options{BatchRows: batchRows, Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Release()
			var held []arrow.RecordBatch
			check := func(i int, got arrow.RecordBatch) {
				if !array.RecordEqual(got, want[i]) {
					t.Fatalf("batch %d differs from pqarrow's after later batches were read", i)
				}
				got.Release()
			}
			i := 0
			for rd.Next() {
				got := rd.RecordBatch()
				got.Retain()
				held = append(held, got)
				if len(held) > 2 {
					check(i-2, held[0])
					held = held[1:]
				}
				i++
			}
			if err := rd.Err(); err != nil {
				t.Fatal(err)
			}
			for j, got := range held {
				check(i-len(held)+j, got)
			}
			if i != len(want) {
				t.Fatalf("%d batches, want %d", i, len(want))
			}
			mem.mu.Lock()
			defer mem.mu.Unlock()
			if mem.held == 0 {
				t.Fatal("no buffer was kept for reuse")
			}
		})
	}
}

func TestRecyclerReuse(t *testing.T) {
	r := newRecycler(1 << 20)
	b := r.Allocate(5000)
	if len(b) != 5000 || cap(b) != 8192 {
		t.Fatalf("len %d cap %d, want 5000 and 8192", len(b), cap(b))
	}
	for i := range b {
		b[i] = 7
	}
	b = r.Reallocate(6000, b) // within the class: kept, the new bytes zeroed
	if len(b) != 6000 || b[4999] != 7 || b[5000] != 0 || b[5999] != 0 {
		t.Fatalf("reallocate within capacity: len %d, bytes %d %d %d", len(b), b[4999], b[5000], b[5999])
	}
	for i := range b {
		b[i] = 9
	}
	p := &b[0]
	r.Free(b)
	c := r.Allocate(4097) // the same class: the freed buffer, zeroed
	if &c[0] != p {
		t.Fatal("a freed buffer of the class was not reused")
	}
	for i, v := range c {
		if v != 0 {
			t.Fatalf("byte %d of a reused buffer is %d, want 0", i, v)
		}
	}
	if uintptr(unsafe.Pointer(&c[0]))%alignment != 0 {
		t.Fatal("not 64-byte aligned")
	}
	g := r.Reallocate(20000, c) // another class: copied, the old one kept
	if len(g) != 20000 || cap(g) != 32768 {
		t.Fatalf("len %d cap %d", len(g), cap(g))
	}
	if r.held != 8192 {
		t.Fatalf("held %d, want 8192", r.held)
	}
	small := r.Allocate(100) // below the classes: not kept
	r.Free(small)
	r.Free(g)
	r.Free(r.Allocate(1 << 20)) // over maxHeld with what is held: dropped
	if r.held != 8192+32768 {
		t.Fatalf("held %d, want %d", r.held, 8192+32768)
	}
}

// TestReleaseBeforeTheEnd: releasing a reader that still has batches ahead stops its
// goroutine and frees every buffer (the checked allocator), whether no batch, one or
// several were taken.
func TestReleaseBeforeTheEnd(t *testing.T) {
	rec := mixedRecord(5000)
	defer rec.Release()
	r := writeParquet(t, rec, 1000)
	for _, take := range []int{0, 1, 3} {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		rd, err := Open(context.Background(), r, Options{BatchRows: 500, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		for range take {
			if !rd.Next() {
				t.Fatalf("batch missing: %v", rd.Err())
			}
		}
		rd.Release()
		mem.AssertSize(t, 0)
	}
}

// TestCorruptPageEndsWithError: a page that cannot be decompressed in a later row group
// ends the read with an error from Next (through the read-ahead goroutine), after the
// batches before it, and the reader releases everything.
func TestCorruptPageEndsWithError(t *testing.T) {
	rec := mixedRecord(4000)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(
		parquet.WithMaxRowGroupLength(1000), parquet.WithCompression(compress.Codecs.Zstd)), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBuffered(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := bytes.Clone(buf.Bytes())
	pr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pr.MetaData().RowGroup(3).ColumnChunk(5) // the int64 column of the last row group
	if err != nil {
		t.Fatal(err)
	}
	start := cc.DataPageOffset()
	if cc.HasDictionaryPage() {
		start = min(start, cc.DictionaryPageOffset())
	}
	mid := start + cc.TotalCompressedSize()/2
	for i := mid; i < mid+16 && i < start+cc.TotalCompressedSize(); i++ {
		data[i] ^= 0x5A
	}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rd, err := Open(context.Background(), bytes.NewReader(data), Options{BatchRows: 1000, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	n := 0
	for rd.Next() {
		n++
	}
	if rd.Err() == nil {
		t.Fatalf("read %d batches of a file with a corrupt page and no error", n)
	}
	if n != 3 {
		t.Fatalf("%d batches before the error, want the 3 row groups before the corrupt one", n)
	}
	if rd.Next() {
		t.Fatal("Next after an error returned a batch")
	}
}

// dictArray returns a dictionary array of type dictionary<values, indices=index> with
// the given indices, a null index where idx is negative.
func dictArray(t *testing.T, index arrow.DataType, values arrow.Array, idx []int) arrow.Array {
	t.Helper()
	var sb strings.Builder
	sb.WriteByte('[')
	for i, k := range idx {
		if i > 0 {
			sb.WriteByte(',')
		}
		if k < 0 {
			sb.WriteString("null")
		} else {
			sb.WriteString(strconv.Itoa(k))
		}
	}
	sb.WriteByte(']')
	indices, _, err := array.FromJSON(memory.DefaultAllocator, index, strings.NewReader(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer indices.Release()
	return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: index, ValueType: values.DataType()}, indices, values)
}

// fromJSON is array.FromJSON for a test's literal.
func fromJSON(t *testing.T, dt arrow.DataType, s string) arrow.Array {
	t.Helper()
	a, _, err := array.FromJSON(memory.DefaultAllocator, dt, strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// dictionaryRecord has top-level dictionary columns of every kind a Parquet file's stored
// Arrow schema can declare (pandas categoricals, dictionary_encode), with null indices, a
// nested one and a plain column.
func dictionaryRecord(t *testing.T, rows int) arrow.RecordBatch {
	t.Helper()
	cities := fromJSON(t, arrow.BinaryTypes.String, `["SEA","LAX","","a much longer value than the others"]`)
	defer cities.Release()
	big := fromJSON(t, arrow.BinaryTypes.LargeString, `["x","yy","zzz"]`)
	defer big.Release()
	raw := fromJSON(t, arrow.BinaryTypes.Binary, `["AAE=","","/w=="]`) // base64
	defer raw.Release()
	nums := fromJSON(t, arrow.PrimitiveTypes.Int64, `[7,-1,9000000000]`)
	defer nums.Release()
	idx := func(n, nullEvery int) []int {
		out := make([]int, rows)
		for i := range out {
			out[i] = (i*7 + i/5) % n
			if i%nullEvery == 3 {
				out[i] = -1
			}
		}
		return out
	}
	city := dictArray(t, arrow.PrimitiveTypes.Int8, cities, idx(4, 11))
	nested, err := array.NewStructArray([]arrow.Array{city}, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	n := make([]int64, rows)
	for i := range n {
		n[i] = int64(i)
	}
	plain := fromJSON(t, arrow.PrimitiveTypes.Int64, strings.ReplaceAll(fmt.Sprint(n), " ", ","))
	cols := []arrow.Array{
		city,
		dictArray(t, arrow.PrimitiveTypes.Int32, cities, idx(4, 7)), // written without a dictionary
		dictArray(t, arrow.PrimitiveTypes.Int32, big, idx(3, 13)),
		dictArray(t, arrow.PrimitiveTypes.Int16, raw, idx(3, 17)),
		dictArray(t, arrow.PrimitiveTypes.Int32, nums, idx(3, 5)),
		dictArray(t, arrow.PrimitiveTypes.Int32, cities, idx(4, 19)),
		nested,
		plain,
	}
	names := []string{"city", "cityplain", "big", "raw", "num", "keep", "nested", "n"}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: names[i], Type: c.DataType(), Nullable: true}
		defer c.Release()
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(rows))
}

// TestDictionaryTypedColumnsReadAsValues: top-level columns the stored Arrow schema types
// as dictionaries come out as their value types (the stored one: large_string stays
// large) with the values and nulls written, across row groups and batches, whether the
// pages are dictionary-encoded or not; KeepDictionaries and nested dictionaries read as
// pqarrow reads them.
func TestDictionaryTypedColumnsReadAsValues(t *testing.T) {
	rec := dictionaryRecord(t, 5000)
	defer rec.Release()
	r := writeParquet(t, rec, 1000, "cityplain")
	_, plain := plainBatches(t, r, 700)
	wantTypes := "city:utf8 cityplain:utf8 big:large_utf8 raw:binary num:int64 " +
		"keep:dictionary<values=utf8, indices=int32, ordered=false> " +
		"nested:struct<x: dictionary<values=utf8, indices=int8, ordered=false>> n:int64"
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rd, err := Open(context.Background(), r, Options{BatchRows: 700, Allocator: mem, KeepDictionaries: []string{"keep"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var types []string
	for _, f := range rd.Schema().Fields() {
		types = append(types, f.Name+":"+strings.ReplaceAll(f.Type.String(), " nullable", ""))
	}
	if got := strings.Join(types, " "); got != wantTypes {
		t.Fatalf("schema\n%s\nwant\n%s", got, wantTypes)
	}
	ctx := context.Background()
	var off int64
	for i := 0; rd.Next(); i++ {
		got := rd.RecordBatch()
		for c, col := range got.Columns() {
			name := got.ColumnName(c)
			// What was written: the values a dictionary column's indices select.
			src := array.NewSlice(rec.Column(c), off, off+got.NumRows())
			if dt, ok := src.DataType().(*arrow.DictionaryType); ok && name != "keep" {
				want, err := compute.CastArray(ctx, src, compute.SafeCastOptions(rd.Schema().Field(c).Type))
				if err != nil {
					t.Fatal(err)
				}
				if !arrow.TypeEqual(want.DataType(), dt.ValueType) || !array.Equal(col, want) || col.NullN() != src.NullN() {
					t.Fatalf("batch %d column %q:\n%v\nwant\n%v", i, name, col, want)
				}
				want.Release()
			} else if !array.Equal(col, plain[i].Column(c)) { // pqarrow's read
				t.Fatalf("batch %d column %q:\n%v\nwant pqarrow's\n%v", i, name, col, plain[i].Column(c))
			}
			src.Release()
		}
		off += got.NumRows()
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if off != rec.NumRows() {
		t.Fatalf("read %d rows, wrote %d", off, rec.NumRows())
	}
}
