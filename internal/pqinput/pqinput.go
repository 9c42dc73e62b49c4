// Package pqinput reads a Parquet file as Arrow record batches for an import (`shale
// import`, the peer harness's worker): arrow-go's pqarrow reader, with one change of
// method that leaves the batches identical.
//
// pqarrow turns a dictionary-encoded string or binary column into values one Append at a
// time (a hash-free but per-value builder call, with its offset and capacity checks):
// about 60% of the reader's CPU on the flights data, whose string columns, like those of
// most Parquet writers' output, are dictionary-encoded in every row group. Its dictionary
// read (ArrowReadProperties.SetReadDict) decodes only the indices, but it does not apply
// to large_string or large_binary columns (the type the file's stored Arrow schema usually
// asks for), and it changes the batch's type to a dictionary. Here such a column is read
// as a dictionary of its values and expanded to the type pqarrow would have returned, in
// one pass over the indices, so the batches and the schema are those of the plain
// pqarrow read (same types, values, nulls), at about half of the reader's CPU.
//
// A column is read that way only when the file's metadata says that every data page of
// it is dictionary-encoded (its page encoding statistics, or, for writers that omit them,
// its list of encodings: dictionary-encoded data and no other data encoding). A page that is
// not dictionary-encoded after all is still read correctly (pqarrow adds its values to the
// dictionary), only not faster.
//
// One change of type: a top-level column that the file's stored Arrow schema types as a
// dictionary of strings or binaries (a pandas categorical, pyarrow's dictionary_encode),
// which pqarrow returns as a dictionary, is read the same way whatever its encoding and
// comes out as its value type, with its nulls: dictionary<values=string> as string,
// dictionary<values=large_string> as large_string (Options.KeepDictionaries keeps named
// columns as pqarrow reads them). pqarrow reads dictionaries of other value types (integers,
// floats, ...) as their value type already; a dictionary nested in a struct or list stays
// one.
package pqinput

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Options tune Open. Zero values take the defaults.
type Options struct {
	// BatchRows is the number of rows per record batch (the last may have fewer); default
	// 65,536.
	BatchRows int64
	// Allocator allocates the batches' buffers. Default: one of the Reader's own that
	// keeps the buffers of released batches (up to DefaultRecycleBytes) and reuses them
	// for later batches, instead of Go's allocator giving fresh zeroed memory to every
	// batch (garbage collections, zeroing, page faults: about 10% of an import's CPU).
	Allocator memory.Allocator
	// KeepDictionaries names top-level columns to read as the dictionaries the file's
	// stored Arrow schema declares (pqarrow's read), not as their value type (see the
	// package doc): for appending to a table whose column has that dictionary type.
	KeepDictionaries []string
}

// DefaultBatchRows is Options.BatchRows's default.
const DefaultBatchRows = 64 * 1024

// DefaultRecycleBytes bounds the memory the default allocator keeps for reuse: several
// batches' buffers (a 65,536-row flights batch takes about 4.5 MB while it is read and
// expanded).
const DefaultRecycleBytes = 64 << 20

// Reader is an array.RecordReader of every row of a Parquet file, in file order, as
// pqarrow reads it (see the package doc), read on a goroutine of its own one batch
// ahead of the one Next returned. It is not safe for concurrent use. The file
// Open was given stays the caller's to close, after Release.
type Reader struct {
	rr     pqarrow.RecordReader
	schema *arrow.Schema
	// expand lists the columns read as dictionaries, with the types they are expanded to.
	expand []expandColumn
	mem    memory.Allocator
	rows   int64
	cur    arrow.RecordBatch
	err    error
	refs   atomic.Int64
	// ahead carries the batches read ahead (readAhead); stop ends that goroutine, done
	// is closed when it has.
	ahead chan aheadBatch
	stop  chan struct{}
	done  chan struct{}
}

type aheadBatch struct {
	rec arrow.RecordBatch
	err error
}

type expandColumn struct {
	col int
	to  arrow.DataType
}

// Open reads the Parquet file r. Errors: the file's footer or schema cannot be read
// (arrow-go's errors, wrapped).
func Open(ctx context.Context, r parquet.ReaderAtSeeker, opts Options) (*Reader, error) {
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultBatchRows
	}
	if opts.Allocator == nil {
		opts.Allocator = newRecycler(DefaultRecycleBytes)
	}
	props := parquet.NewReaderProperties(opts.Allocator)
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	pr, err := file.NewParquetReader(r, file.WithReadProps(props))
	if err != nil {
		return nil, err // arrow-go's errors name Parquet already ("parquet: magic bytes not found")
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: opts.BatchRows, Parallel: true}, opts.Allocator)
	if err != nil {
		return nil, fmt.Errorf("parquet: arrow schema: %w", err)
	}
	expand := append(dictionaryColumns(fr, pr.MetaData()), dictionaryTyped(fr, opts.KeepDictionaries)...)
	// The types the batches carry after expansion: pqarrow's for a plain column, the value
	// type for a dictionary-typed one.
	want := make(map[int]arrow.Field, len(expand))
	for _, e := range expand {
		sf := &fr.Manifest.Fields[e.col]
		w := *sf.Field
		w.Type = e.to
		want[e.col] = w
		// Read the column as a dictionary of its values (int32 indices): the leaf reader
		// takes its type from the manifest's field.
		f := *sf.Field
		f.Type = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: dictValueType(e.to)}
		sf.Field = &f
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	fields := append([]arrow.Field(nil), rr.Schema().Fields()...)
	for col, f := range want {
		fields[col] = f
	}
	md := rr.Schema().Metadata()
	out := &Reader{rr: rr, schema: arrow.NewSchema(fields, &md), expand: expand, mem: opts.Allocator, rows: pr.NumRows()}
	out.refs.Store(1)
	out.ahead, out.stop, out.done = make(chan aheadBatch), make(chan struct{}), make(chan struct{})
	go out.readAhead()
	return out, nil
}

// dictionaryColumns returns the top-level string and binary columns of fr that every row
// group stores dictionary-encoded.
func dictionaryColumns(fr *pqarrow.FileReader, md *metadata.FileMetaData) []expandColumn {
	var out []expandColumn
	if md.NumRowGroups() == 0 {
		return nil
	}
	for i, sf := range fr.Manifest.Fields {
		if len(sf.Children) != 0 || !sf.IsLeaf() || sf.Field == nil {
			continue
		}
		switch sf.Field.Type.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		default:
			continue
		}
		if md.Schema.Column(sf.ColIndex).PhysicalType() != parquet.Types.ByteArray {
			continue
		}
		if allDictionaryEncoded(md, sf.ColIndex) {
			out = append(out, expandColumn{col: i, to: sf.Field.Type})
		}
	}
	return out
}

// dictionaryTyped returns the top-level columns of fr that pqarrow reads as dictionaries
// of strings or binaries (the file's stored Arrow schema gives them a dictionary type),
// except those named in keep, each with its value type: the stored schema's
// (large_string and large_binary, which pqarrow's dictionary read narrows to string and
// binary, included), else pqarrow's.
func dictionaryTyped(fr *pqarrow.FileReader, keep []string) []expandColumn {
	var out []expandColumn
	origin := fr.Manifest.OriginSchema
	for i, sf := range fr.Manifest.Fields {
		if len(sf.Children) != 0 || !sf.IsLeaf() || sf.Field == nil || slices.Contains(keep, sf.Field.Name) {
			continue
		}
		dt, ok := sf.Field.Type.(*arrow.DictionaryType)
		if !ok {
			continue
		}
		to := dt.ValueType
		if origin != nil && i < origin.NumFields() {
			if odt, ok := origin.Field(i).Type.(*arrow.DictionaryType); ok && expandable(odt.ValueType) {
				to = odt.ValueType
			}
		}
		if expandable(to) {
			out = append(out, expandColumn{col: i, to: to})
		}
	}
	return out
}

// expandable reports whether expandDictionary produces type t.
func expandable(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// Parquet page types (parquet.thrift PageType), as EncodingStats reports them.
const (
	pageData   = 0
	pageDataV2 = 3
)

// allDictionaryEncoded reports whether every row group encodes all data pages of column
// col with a dictionary. (Not every writer sets a column chunk's dictionary page offset:
// Polars does not, so the encodings decide.)
func allDictionaryEncoded(md *metadata.FileMetaData, col int) bool {
	for rg := 0; rg < md.NumRowGroups(); rg++ {
		cc, err := md.RowGroup(rg).ColumnChunk(col)
		if err != nil {
			return false
		}
		if stats := cc.EncodingStats(); len(stats) > 0 {
			for _, s := range stats {
				if p := int64(s.PageType); (p == pageData || p == pageDataV2) && !isDictionaryEncoding(s.Encoding) {
					return false
				}
			}
			continue
		}
		// No page statistics: PLAIN is the dictionary page's own encoding (Parquet 1
		// writers), RLE and BIT_PACKED the levels'; any other data encoding is a fallback.
		dict := false
		for _, e := range cc.Encodings() {
			switch {
			case isDictionaryEncoding(e):
				dict = true
			case e == parquet.Encodings.Plain, e == parquet.Encodings.RLE, e == parquet.Encodings.BitPacked:
			default:
				return false
			}
		}
		if !dict {
			return false
		}
	}
	return true
}

func isDictionaryEncoding(e parquet.Encoding) bool {
	return e == parquet.Encodings.RLEDict || e == parquet.Encodings.PlainDict
}

// dictValueType is the value type of the dictionary a column of type t is read into
// (arrow-go's dictionary builders have no large_string or large_binary).
func dictValueType(t arrow.DataType) arrow.DataType {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return arrow.BinaryTypes.String
	}
	return arrow.BinaryTypes.Binary
}

// NumRows is the number of rows in the file.
func (r *Reader) NumRows() int64 { return r.rows }

// Schema is the schema of the batches: pqarrow's for the file, with the value types of
// top-level dictionary columns (see the package doc).
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// Next moves to the next batch; false at the end of the file or on an error (Err).
func (r *Reader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil {
		return false
	}
	res, ok := <-r.ahead
	if !ok {
		return false
	}
	if res.err != nil {
		r.err = res.err
		return false
	}
	r.cur = res.rec
	return true
}

// readAhead reads the batches on their own goroutine, one ahead of the one Next returned,
// from Open on: the file is read while the caller creates its table, and while it
// waits for room to encode a batch. It ends at the end of the file, at an error, or when
// stop is closed, and closes ahead.
func (r *Reader) readAhead() {
	defer close(r.done)
	defer close(r.ahead)
	for {
		rec, err := r.read()
		if rec == nil && err == nil {
			return
		}
		select {
		case r.ahead <- aheadBatch{rec, err}:
			if err != nil {
				return
			}
		case <-r.stop:
			if rec != nil {
				rec.Release()
			}
			return
		}
	}
}

// read returns the next batch of the file, its dictionary columns expanded (nil at the
// end).
func (r *Reader) read() (arrow.RecordBatch, error) {
	if !r.rr.Next() {
		return nil, r.rr.Err()
	}
	rec := r.rr.RecordBatch()
	if len(r.expand) == 0 {
		rec.Retain()
		return rec, nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range rec.Columns() {
		c.Retain()
		cols[i] = c
	}
	for _, e := range r.expand {
		d, ok := cols[e.col].(*array.Dictionary)
		if !ok {
			return nil, fmt.Errorf("parquet: column %q: read as %s, want a dictionary", r.schema.Field(e.col).Name, cols[e.col].DataType())
		}
		x, err := expandDictionary(d, e.to, r.mem)
		if err != nil {
			return nil, fmt.Errorf("parquet: column %q: %w", r.schema.Field(e.col).Name, err)
		}
		cols[e.col].Release()
		cols[e.col] = x
	}
	return array.NewRecordBatch(r.schema, cols, rec.NumRows()), nil
}

// RecordBatch is the current batch, valid until the next call of Next or Release.
func (r *Reader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch (array.RecordReader).
//
// Deprecated: use RecordBatch.
func (r *Reader) Record() arrow.RecordBatch { return r.cur }

// Err is the error that ended Next, if any.
func (r *Reader) Err() error { return r.err }

// Retain adds a reference.
func (r *Reader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last releases the current batch and the column readers.
func (r *Reader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	close(r.stop)
	for res := range r.ahead {
		if res.rec != nil {
			res.rec.Release()
		}
	}
	<-r.done
	r.rr.Release()
}

// errIndex: an index outside the dictionary (a corrupt file).
var errIndex = errors.New("dictionary index out of range")

// expandDictionary returns the values of d (a dictionary of strings or binaries with
// int32 indices) as an array of type to (string, large_string, binary or large_binary),
// with d's nulls.
func expandDictionary(d *array.Dictionary, to arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	idx, ok := d.Indices().(*array.Int32)
	if !ok {
		return nil, fmt.Errorf("dictionary indices are %s, want int32", d.Indices().DataType())
	}
	var dOffsets []int32
	var dBytes []byte
	switch v := d.Dictionary().(type) {
	case *array.String:
		dOffsets, dBytes = v.ValueOffsets(), v.ValueBytes()
	case *array.Binary:
		dOffsets, dBytes = v.ValueOffsets(), v.ValueBytes()
	default:
		return nil, fmt.Errorf("dictionary values are %s, want string or binary", d.Dictionary().DataType())
	}
	if d.Dictionary().NullN() > 0 {
		return nil, errors.New("dictionary holds nulls")
	}
	n := d.Len()
	var bits []byte // nil: every slot is valid
	off := d.Data().Offset()
	if d.NullN() > 0 {
		bits = d.NullBitmapBytes()
	}
	dict := dictValues{offsets: dOffsets, bytes: dBytes}
	total, err := dict.size(idx.Int32Values(), bits, off)
	if err != nil {
		return nil, err
	}
	large := to.ID() == arrow.LARGE_STRING || to.ID() == arrow.LARGE_BINARY
	if !large && total > math.MaxInt32 {
		return nil, fmt.Errorf("%d bytes of values in %d rows exceed %s's 32-bit offsets", total, n, to)
	}
	// Every byte of both buffers is written below: no need to zero them first.
	data := allocate(mem, int(total))
	var offs *memory.Buffer
	if large {
		offs = allocate(mem, (n+1)*8)
		gather(arrow.Int64Traits.CastFromBytes(offs.Bytes()), data.Bytes(), dict, idx.Int32Values(), bits, off)
	} else {
		offs = allocate(mem, (n+1)*4)
		gather(arrow.Int32Traits.CastFromBytes(offs.Bytes()), data.Bytes(), dict, idx.Int32Values(), bits, off)
	}
	var nulls *memory.Buffer
	if bits != nil {
		nulls = memory.NewResizableBuffer(mem)
		nulls.Resize(int(bitutil.BytesForBits(int64(n))))
		bitutil.CopyBitmap(bits, off, n, nulls.Bytes(), 0)
	}
	ad := array.NewData(to, n, []*memory.Buffer{nulls, offs, data}, nil, d.NullN(), 0)
	for _, b := range []*memory.Buffer{nulls, offs, data} {
		if b != nil {
			b.Release()
		}
	}
	defer ad.Release()
	return array.MakeFromData(ad), nil
}

// dictValues are a dictionary's values: value i is bytes[offsets[i]:offsets[i+1]].
type dictValues struct {
	offsets []int32
	bytes   []byte
}

// size returns the bytes the values of keys take, skipping null slots (bits: validity
// from bit off; nil: none), after checking every key of a valid slot.
func (d dictValues) size(keys []int32, bits []byte, off int) (int64, error) {
	n := uint32(max(len(d.offsets)-1, 0))
	var total int64
	for i, k := range keys {
		if bits != nil && !bitutil.BitIsSet(bits, off+i) {
			continue
		}
		if uint32(k) >= n {
			return 0, fmt.Errorf("%w: row %d has index %d of %d", errIndex, i, k, n)
		}
		total += int64(d.offsets[k+1] - d.offsets[k])
	}
	return total, nil
}

// short reports whether no value is longer than 8 bytes.
func (d dictValues) short() bool {
	for i := 1; i < len(d.offsets); i++ {
		if d.offsets[i]-d.offsets[i-1] > 8 {
			return false
		}
	}
	return true
}

// gather writes the values of keys into out (sized by size) and their offsets into o
// (len(keys)+1); a null slot is empty. The keys of valid slots are in range (size checked
// them).
func gather[O int32 | int64](o []O, out []byte, d dictValues, keys []int32, bits []byte, off int) {
	var pos O
	switch {
	case bits == nil && d.short():
		// Short values (airport codes and the like) move as one 8-byte word each: a
		// copy call per 3-byte value cost more than the bytes. The word's bytes past
		// the value land where the next values go and are overwritten by them (writes
		// go in order); near the end of out or of the dictionary, copy exactly.
		end := O(len(out))
		for i, k := range keys {
			o[i] = pos
			s, e := d.offsets[k], d.offsets[k+1]
			if pos+8 <= end && int(s)+8 <= len(d.bytes) {
				binary.LittleEndian.PutUint64(out[pos:], binary.LittleEndian.Uint64(d.bytes[s:]))
			} else {
				copy(out[pos:], d.bytes[s:e])
			}
			pos += O(e - s)
		}
	case bits == nil:
		for i, k := range keys {
			o[i] = pos
			s, e := d.offsets[k], d.offsets[k+1]
			pos += O(copy(out[pos:], d.bytes[s:e]))
		}
	default:
		for i, k := range keys {
			o[i] = pos
			if bitutil.BitIsSet(bits, off+i) {
				s, e := d.offsets[k], d.offsets[k+1]
				pos += O(copy(out[pos:], d.bytes[s:e]))
			}
		}
	}
	o[len(keys)] = pos
}

// allocate returns a buffer of n bytes of mem, not necessarily zeroed (the caller writes
// every byte).
func allocate(mem memory.Allocator, n int) *memory.Buffer {
	var b []byte
	if r, ok := mem.(*recycler); ok {
		b = r.allocate(n, false)
	} else {
		b = mem.Allocate(n)
	}
	return memory.NewBufferWithAllocator(b, mem)
}
