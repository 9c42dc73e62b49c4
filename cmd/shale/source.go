package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/pqinput"
)

// Import formats.
const (
	formatParquet = "parquet"
	formatArrow   = "arrow" // Arrow IPC file or stream (told apart by the file's magic)
	formatCSV     = "csv"
	formatTSV     = "tsv"
	formatJSONL   = "jsonl"
)

const formatList = "parquet, arrow, csv, tsv, jsonl"

// importBatchRows is the number of rows per record batch read from an input file; it
// bounds the memory an import holds besides the data file being written.
const importBatchRows = 64 * 1024

// ErrUnsupportedFormat: the input format is unknown or cannot be told from the file name.
var ErrUnsupportedFormat = errors.New("unsupported input format")

// ErrInput: the input file cannot be read as its format.
var ErrInput = errors.New("cannot read input")

// normalizeFormat maps a --format value (or alias) to a format name.
func normalizeFormat(f string) (string, bool) {
	switch strings.ToLower(strings.TrimPrefix(f, ".")) {
	case "parquet", "pq":
		return formatParquet, true
	case "arrow", "ipc", "feather", "arrows":
		return formatArrow, true
	case "csv":
		return formatCSV, true
	case "tsv":
		return formatTSV, true
	case "jsonl", "ndjson", "json":
		return formatJSONL, true
	}
	return "", false
}

// formatFromName tells the format from a file extension.
func formatFromName(path string) (string, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if f, ok := normalizeFormat(ext); ok && ext != "" {
		return f, nil
	}
	// A usage error (exit status 2): the command line does not say the format.
	if ext == "" {
		return "", &usageError{fmt.Errorf("%w: %s has no extension; pass --format (%s)", ErrUnsupportedFormat, path, formatList)}
	}
	return "", &usageError{fmt.Errorf("%w: %q (file %s); supported: %s, or pass --format", ErrUnsupportedFormat, ext, path, formatList)}
}

// source is an open input file streamed as record batches.
type source struct {
	path   string
	format string
	size   int64 // bytes
	rows   int64 // total rows when the format tells (Parquet), else -1
	file   *countingFile
	rdr    array.RecordReader
	// inferred says the schema was inferred from a sample (CSV, JSON Lines).
	inferred bool
	closers  []func()
	// stream is standard input read as a stream (file.f is then nil); sample records
	// what an inference sample read from it (stdin.go).
	stream *bufio.Reader
	sample *recorder
}

// bytesRead is how much of the file has been read so far.
func (s *source) bytesRead() int64 { return s.file.n.Load() }

func (s *source) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// countingFile counts the bytes read through it (for progress): from f, or, for standard
// input read as a stream, from r (f is then nil).
type countingFile struct {
	f *os.File
	r io.Reader
	n atomic.Int64
}

func (c *countingFile) Read(p []byte) (int, error) {
	var n int
	var err error
	if c.f != nil {
		n, err = c.f.Read(p)
	} else {
		n, err = c.r.Read(p)
	}
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingFile) Seek(off int64, whence int) (int64, error) { return c.f.Seek(off, whence) }

// openSource opens path as format ("" = from the extension). With want (the schema of an
// existing table, named table), CSV and JSON Lines are parsed with the table's column types after
// their column names are checked against it; otherwise the types are inferred from the
// first sampleRows rows. Errors: ErrUnsupportedFormat, ErrInput (naming the file),
// engine.ErrSchemaMismatch (CSV/JSON column names), os errors for a missing file.
func openSource(ctx context.Context, path, format, table string, want *arrow.Schema, mem memory.Allocator) (*source, error) {
	if format == "" {
		f, err := formatFromName(path)
		if err != nil {
			return nil, err
		}
		format = f
	}
	var s *source
	if path == stdinPath {
		in, err := openStdin(format)
		if err != nil {
			return nil, err
		}
		s = &source{path: stdinName, format: format, size: -1, rows: -1, file: &countingFile{f: in.file, r: in.stream}, stream: in.stream}
		s.closers = append(s.closers, in.cleanup)
		if in.file != nil {
			if st, err := in.file.Stat(); err == nil {
				s.size = st.Size()
			}
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if st.IsDir() {
			f.Close()
			return nil, fmt.Errorf("%w: %s is a directory", ErrInput, path)
		}
		s = &source{path: path, format: format, size: st.Size(), rows: -1, file: &countingFile{f: f}}
		s.closers = append(s.closers, func() { f.Close() })
	}
	var err error
	keep := dictionaryColumns(want)
	switch format {
	case formatParquet:
		err = s.openParquet(ctx, keep)
	case formatArrow:
		err = s.openArrow(ctx, keep, mem)
	case formatCSV:
		err = s.openCSV(table, want, ',', mem)
	case formatTSV:
		err = s.openCSV(table, want, '\t', mem)
	case formatJSONL:
		err = s.openJSONL(table, want, mem)
	default:
		err = fmt.Errorf("%w: %q (supported: %s)", ErrUnsupportedFormat, format, formatList)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *source) inputError(err error) error {
	if errors.Is(err, ErrInput) || errors.Is(err, engine.ErrSchemaMismatch) {
		return err
	}
	return fmt.Errorf("%w %s as %s: %v", ErrInput, s.path, s.format, err)
}

// openParquet reads the file with internal/pqinput, which reads top-level dictionary
// columns as their value types but those named in keep (decodeDictionaries then encodes
// those as the table's dictionary types, as for Arrow IPC). Its batches come from the
// reader's own allocator, which reuses the buffers of batches released after encoding
// (not from openSource's mem).
func (s *source) openParquet(ctx context.Context, keep map[string]*arrow.DictionaryType) error {
	r, err := pqinput.Open(ctx, s.file, pqinput.Options{BatchRows: importBatchRows, KeepDictionaries: slices.Sorted(maps.Keys(keep))})
	if err != nil {
		return s.inputError(err)
	}
	s.closers = append(s.closers, r.Release)
	s.rows = r.NumRows()
	// pqinput decodes dictionaries of strings and binaries, the only ones pqarrow reads
	// as dictionaries; decodeDictionaries takes any other.
	s.rdr = decodeDictionaries(ctx, stripMetadata(r), keep, memory.DefaultAllocator)
	return nil
}

// openArrow reads an Arrow IPC file or stream, its top-level dictionary columns decoded
// to their value types but those named in keep, encoded as keep's types
// (decodeDictionaries).
func (s *source) openArrow(ctx context.Context, keep map[string]*arrow.DictionaryType, mem memory.Allocator) error {
	if s.stream != nil { // standard input, not the file format (openStdin spools that)
		r, err := ipc.NewReader(s.file, ipc.WithAllocator(mem))
		if err != nil {
			return s.inputError(fmt.Errorf("not an Arrow IPC stream: %v", err))
		}
		s.closers = append(s.closers, r.Release)
		s.rdr = decodeDictionaries(ctx, stripMetadata(r), keep, mem)
		return nil
	}
	magic := make([]byte, 6)
	if _, err := s.file.f.ReadAt(magic, 0); err != nil && !errors.Is(err, io.EOF) {
		return s.inputError(err)
	}
	if string(magic) == "ARROW1" {
		fr, err := ipc.NewFileReader(s.file, ipc.WithAllocator(mem))
		if err != nil {
			return s.inputError(err)
		}
		s.closers = append(s.closers, func() { fr.Close() })
		s.rdr = decodeDictionaries(ctx, stripMetadata(&ipcFileReader{fr: fr}), keep, mem)
		return nil
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(s.file, 1<<20), ipc.WithAllocator(mem))
	if err != nil {
		return s.inputError(fmt.Errorf("neither an Arrow IPC file nor stream: %v", err))
	}
	s.closers = append(s.closers, r.Release)
	s.rdr = decodeDictionaries(ctx, stripMetadata(r), keep, mem)
	return nil
}

// ipcFileReader adapts ipc.FileReader (random access) to array.RecordReader.
type ipcFileReader struct {
	fr  *ipc.FileReader
	i   int
	cur arrow.RecordBatch
	err error
}

func (r *ipcFileReader) Schema() *arrow.Schema { return r.fr.Schema() }
func (r *ipcFileReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil || r.i >= r.fr.NumRecords() {
		return false
	}
	rec, err := r.fr.RecordBatchAt(r.i) // owned by us
	if err != nil {
		r.err = fmt.Errorf("record batch %d: %w", r.i, err)
		return false
	}
	r.i++
	r.cur = rec
	return true
}
func (r *ipcFileReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *ipcFileReader) Record() arrow.RecordBatch      { return r.cur }
func (r *ipcFileReader) Err() error                     { return r.err }
func (r *ipcFileReader) Retain()                        {}
func (r *ipcFileReader) Release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (s *source) openCSV(table string, want *arrow.Schema, comma rune, mem memory.Allocator) error {
	in, err := s.sampleReader()
	if err != nil {
		return s.inputError(err)
	}
	sample, err := sampleCSV(bufio.NewReaderSize(in, 1<<20), comma, sampleRows)
	if err != nil {
		return s.inputError(err)
	}
	inferred := inferCSVSchema(sample)
	schema := inferred
	if want != nil {
		if err := sameColumns(table, s.path, want, inferred, true); err != nil {
			return err
		}
		if err := csvReadable(table, s.path, want); err != nil {
			return err
		}
		schema = want
	} else {
		s.inferred = true
	}
	data, err := s.dataReader()
	if err != nil {
		return s.inputError(err)
	}
	r := csv.NewReader(bufio.NewReaderSize(data, 1<<20), schema,
		csv.WithHeader(true), csv.WithComma(comma), csv.WithChunk(importBatchRows),
		csv.WithNullReader(true, ""), csv.WithAllocator(mem))
	s.closers = append(s.closers, r.Release)
	s.rdr = &csvReader{RecordReader: r, s: s, schema: schema, comma: comma}
	return nil
}

// csvReadable refuses, before anything is read or written, a table with a column of a
// type arrow-go's CSV reader cannot parse text into (a dictionary, a struct, a map, a
// time of day; a list of one of those): csv.NewReader panics on such a schema. The types
// accepted are arrow/csv's readTypeSupported (arrow-go v18.8.0). Errors:
// engine.ErrSchemaMismatch naming the table, the file and the column.
func csvReadable(table, path string, schema *arrow.Schema) error {
	var ok func(arrow.DataType) bool
	ok = func(dt arrow.DataType) bool {
		switch dt := dt.(type) {
		case *arrow.BooleanType, *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
			*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
			*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type, *arrow.StringType, *arrow.LargeStringType,
			*arrow.TimestampType, *arrow.Date32Type, *arrow.Date64Type, *arrow.Decimal128Type, *arrow.Decimal256Type,
			*arrow.BinaryType, *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType, *arrow.NullType, arrow.ExtensionType:
			return true
		case *arrow.MapType:
			return false
		case arrow.ListLikeType:
			return ok(dt.Elem())
		}
		return false
	}
	for _, f := range schema.Fields() {
		if !ok(f.Type) {
			return fmt.Errorf("table %q: %w: column %q has type %s, which a CSV or TSV file cannot be read into; import %s's rows as Parquet or Arrow IPC instead",
				table, engine.ErrSchemaMismatch, f.Name, f.Type, path)
		}
	}
	return nil
}

func (s *source) openJSONL(table string, want *arrow.Schema, mem memory.Allocator) error {
	in, err := s.sampleReader()
	if err != nil {
		return s.inputError(err)
	}
	inferred, err := inferJSONLSchema(bufio.NewReaderSize(in, 1<<20), sampleRows)
	if err != nil {
		return s.inputError(err)
	}
	schema := inferred
	if want != nil {
		if err := sameColumns(table, s.path, want, inferred, false); err != nil {
			return err
		}
		schema = want
	} else {
		s.inferred = true
	}
	data, err := s.dataReader()
	if err != nil {
		return s.inputError(err)
	}
	checked := newKeyCheckReader(table, s.path, data, schema)
	r := array.NewJSONReader(checked, schema, array.WithChunk(importBatchRows), array.WithAllocator(mem))
	s.closers = append(s.closers, r.Release)
	s.rdr = r
	return nil
}

// sameColumns checks that a file's columns are the table's (for CSV in the same order;
// JSON objects are matched by key). Errors wrap engine.ErrSchemaMismatch.
func sameColumns(tableName, path string, table, file *arrow.Schema, ordered bool) error {
	tn, fn := names(table), names(file)
	mismatch := func() error {
		return fmt.Errorf("table %q: %w: %s has columns (%s), the table has (%s)", tableName, engine.ErrSchemaMismatch, path,
			strings.Join(fn, ", "), strings.Join(tn, ", "))
	}
	if len(tn) != len(fn) {
		return mismatch()
	}
	if ordered {
		for i := range tn {
			if tn[i] != fn[i] {
				return mismatch()
			}
		}
		return nil
	}
	set := map[string]bool{}
	for _, n := range tn {
		set[n] = true
	}
	for _, n := range fn {
		if !set[n] {
			return mismatch()
		}
	}
	return nil
}

func names(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

// stripMetadata drops schema- and field-level metadata (pandas, Parquet field ids) from
// an input, so a table created from a file has a clean schema.
func stripMetadata(r array.RecordReader) array.RecordReader {
	in := r.Schema()
	if in.Metadata().Len() == 0 && !anyFieldMetadata(in) {
		return r
	}
	fields := make([]arrow.Field, in.NumFields())
	for i, f := range in.Fields() {
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}
	}
	return &relabel{RecordReader: r, schema: arrow.NewSchema(fields, nil)}
}

func anyFieldMetadata(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		if f.Metadata.Len() > 0 {
			return true
		}
	}
	return false
}

// relabel presents a reader's batches under another (compatible) schema.
type relabel struct {
	array.RecordReader
	schema *arrow.Schema
	cur    arrow.RecordBatch
}

func (r *relabel) Schema() *arrow.Schema { return r.schema }
func (r *relabel) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if !r.RecordReader.Next() {
		return false
	}
	in := r.RecordReader.RecordBatch()
	r.cur = array.NewRecordBatch(r.schema, in.Columns(), in.NumRows())
	return true
}
func (r *relabel) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *relabel) Record() arrow.RecordBatch      { return r.cur }
func (r *relabel) Release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.RecordReader.Release()
}

// peekReader replays a first batch already read, then continues with the reader.
type peekReader struct {
	array.RecordReader
	first   arrow.RecordBatch
	started bool
	cur     arrow.RecordBatch
}

// peek reads the first non-empty batch of r, so that format errors at the start of a file
// show before a table is created. It returns a reader that yields every batch of r.
func peek(r array.RecordReader) (*peekReader, error) {
	p := &peekReader{RecordReader: r}
	for r.Next() {
		rec := r.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain()
		p.first = rec
		break
	}
	return p, r.Err()
}

func (p *peekReader) Next() bool {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	if !p.started {
		p.started = true
		if p.first != nil {
			p.cur, p.first = p.first, nil
			return true
		}
		return false // the peek reached the end
	}
	if !p.RecordReader.Next() {
		return false
	}
	p.cur = p.RecordReader.RecordBatch()
	p.cur.Retain()
	return true
}
func (p *peekReader) RecordBatch() arrow.RecordBatch { return p.cur }
func (p *peekReader) Record() arrow.RecordBatch      { return p.cur }
func (p *peekReader) Release() {
	for _, r := range []arrow.RecordBatch{p.cur, p.first} {
		if r != nil {
			r.Release()
		}
	}
	p.cur, p.first = nil, nil
}

// rewind positions the file at its start, after a UTF-8 byte order mark if it has one.
func (s *source) rewind() error {
	head := make([]byte, 3)
	n, err := s.file.f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	off := int64(0)
	if bytes.HasPrefix(head[:n], utf8BOM) {
		off = int64(len(utf8BOM))
	}
	_, err = s.file.f.Seek(off, io.SeekStart)
	return err
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}
