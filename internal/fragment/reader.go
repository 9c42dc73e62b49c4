package fragment

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/panics"
	"github.com/shale-db/shale/store"
)

// seamReadBatch is hit at the start of every ReadBatch (tests inject a panic there).
var seamReadBatch = failpoint.Seam("fragment.read_batch")

// TailReadSize is how many bytes at the end of a data file OpenFile fetches in its first
// request. The footer of a file with a few dozen columns and batches fits in far less; a
// larger footer costs one more request.
const TailReadSize = 64 << 10

// CoalesceGap is the largest hole between two projected column ranges of a batch that is
// read through rather than split into two range requests.
const CoalesceGap = 256 << 10

// FileReader reads one data file with range requests. OpenFile costs one GetRange (the file
// tail; two if the footer is larger than TailReadSize), plus one per dictionary batch for
// dictionary-encoded schemas. ReadBatch costs one GetRange for all columns; for a column
// subset it costs one GetRange for the batch metadata plus one per coalesced run of the
// chosen columns' buffers (one when they cover most of the body).
//
// Methods are safe for concurrent use, except Close.
type FileReader struct {
	ctx    context.Context
	store  store.Store
	df     DataFile
	mem    memory.Allocator
	src    *rangeSource
	fr     *ipc.FileReader
	schema *arrow.Schema // file schema without FieldIDsMetadataKey
	blocks []ipcBlock
	// direct is true when batches are decoded from fetched bytes by this package (no
	// dictionaries); otherwise they go through arrow's FileReader.
	direct      bool
	projectable bool    // direct, and readProjected can map every column type
	schemaMsg   []byte  // the file schema as an IPC schema message (direct mode)
	fieldIDs    []int32 // field id of each file column (nil when neither file nor description has them)
	footerEnd   int64   // where the footer begins; batch blocks must end before it

	mu       sync.Mutex
	projMsgs map[string][]byte // projected schema messages by column list
}

// OpenFile opens df for reading. It reads the footer with one range request (the size is
// taken from df.Size, so no HEAD) and checks the file against df: the field ids in the
// schema metadata, the number of batches and, when df.Batches is set, that their row
// counts add up to df.Rows (each batch's own count is checked by ReadBatch). To check
// the columns' types against a table schema, call CheckSchema.
// Errors: *CorruptError wrapping ErrCorrupt (naming df.Key) for a truncated, malformed or
// mismatched file; *store.Error for store failures (ErrNotFound when the object is gone);
// *panics.Error wrapping panics.ErrInternal (naming df.Key) for a panic while opening.
func OpenFile(ctx context.Context, s store.Store, df DataFile, mem memory.Allocator) (_ *FileReader, err error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	r := &FileReader{ctx: ctx, store: s, df: df, mem: mem, projMsgs: map[string][]byte{}}
	defer func() {
		if v := recover(); v != nil {
			err = panics.New("open data file", df.Key, v)
			quietly(func() { r.Close() })
		}
	}()
	if err := r.open(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// quietly runs f, ignoring a panic: cleanup after a recovered panic must not raise another.
func quietly(f func()) {
	defer func() { _ = recover() }()
	f()
}

func (r *FileReader) corrupt(format string, args ...any) error {
	return corruptf(objDataFile, r.df.Key, format, args...)
}

// classify turns an error from decoding into a store error (passed through) or a
// corruption error naming the key.
func (r *FileReader) classify(what string, err error) error {
	var se *store.Error
	if errors.As(err, &se) {
		return err
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		return err
	}
	return &CorruptError{Key: r.df.Key, Object: objDataFile, Class: ErrCorrupt, Err: fmt.Errorf("%s: %w", what, err)}
}

func (r *FileReader) open() error {
	size := r.df.Size
	minSize := int64(8 + ipcTrailerLen)
	if size < minSize {
		return r.corrupt("recorded size %d is smaller than the smallest Arrow file (%d bytes)", size, minSize)
	}
	r.src = &rangeSource{ctx: r.ctx, store: r.store, key: r.df.Key, size: size}
	tailLen := min(size, TailReadSize)
	tail, err := r.src.fetch(size-tailLen, tailLen)
	if err != nil {
		return err
	}
	if string(tail[len(tail)-len(ipcMagic):]) != ipcMagic {
		return r.corrupt("no Arrow file magic at the end (truncated or not an Arrow file)")
	}
	footerLen := int64(int32(binary.LittleEndian.Uint32(tail[len(tail)-ipcTrailerLen:])))
	if footerLen <= 0 || footerLen+int64(ipcTrailerLen)+8 > size {
		return r.corrupt("footer length %d does not fit a file of %d bytes", footerLen, size)
	}
	if need := footerLen + int64(ipcTrailerLen); need > tailLen {
		more, err := r.src.fetch(size-need, need-tailLen)
		if err != nil {
			return err
		}
		tail = append(more, tail...)
		tailLen = need
	}
	r.src.pin(size-tailLen, tail)
	r.footerEnd = size - int64(ipcTrailerLen) - footerLen
	footerAndTrailer := tail[int64(len(tail))-int64(ipcTrailerLen)-footerLen:]
	if r.checked() {
		if got := crc32.Checksum(footerAndTrailer, castagnoli); got != r.df.FooterCRC32C {
			return r.corrupt("footer CRC32C mismatch: computed %08x, description says %08x", got, r.df.FooterCRC32C)
		}
	}
	footer := footerAndTrailer[:footerLen]
	fi, err := parseFooter(footer)
	if err != nil {
		return r.corrupt("%w", err)
	}
	if err := verifySchemaFB(footer); err != nil {
		return r.corrupt("%w", err)
	}
	for i, b := range fi.Batches {
		if b.Offset < 8 || b.MetaLen < 8 || b.BodyLen < 0 || b.Offset%8 != 0 ||
			b.Offset+int64(b.MetaLen)+b.BodyLen > r.footerEnd {
			return r.corrupt("record batch block %d (offset %d, metadata %d, body %d) lies outside the data region of %d bytes",
				i, b.Offset, b.MetaLen, b.BodyLen, r.footerEnd)
		}
	}
	r.blocks = fi.Batches

	fr, err := openIPC(r.src, r.mem, size)
	if err != nil {
		return r.classify("open Arrow file", err)
	}
	r.fr = fr
	if fr.NumRecords() != len(r.blocks) {
		return r.corrupt("footer lists %d record batches, arrow reads %d", len(r.blocks), fr.NumRecords())
	}
	if r.df.Batches != nil && len(r.df.Batches) != len(r.blocks) {
		return r.corrupt("file has %d record batches, its description lists %d", len(r.blocks), len(r.df.Batches))
	}
	fs := fr.Schema()
	if fs.NumFields() == 0 {
		return r.corrupt("schema has no columns (the writer never writes such a file)")
	}
	r.fieldIDs = r.df.FieldIDs
	md := fs.Metadata()
	if i := md.FindKey(FieldIDsMetadataKey); i >= 0 {
		ids, err := decodeFieldIDs(md.Values()[i])
		if err != nil {
			return r.corrupt("bad %s metadata %q: %w", FieldIDsMetadataKey, md.Values()[i], err)
		}
		if len(ids) != fs.NumFields() {
			return r.corrupt("file has %d columns and %d field ids", fs.NumFields(), len(ids))
		}
		if r.df.FieldIDs != nil && !slices.Equal(ids, r.df.FieldIDs) {
			return r.corrupt("file holds field ids %v, its description lists %v", ids, r.df.FieldIDs)
		}
		r.fieldIDs = ids
	} else if r.df.FieldIDs != nil && len(r.df.FieldIDs) != fs.NumFields() {
		return r.corrupt("file has %d columns, its description lists %d field ids", fs.NumFields(), len(r.df.FieldIDs))
	}
	if r.df.Batches != nil {
		var sum int64
		for _, b := range r.df.Batches {
			sum += b.Rows
		}
		if sum != r.df.Rows {
			return r.corrupt("its description's batches hold %d rows, its row count says %d", sum, r.df.Rows)
		}
	}
	r.schema = withoutMetadataKey(fs, FieldIDsMetadataKey)
	r.direct = fi.NumDicts == 0 && !schemaHasDictionary(fs)
	if r.direct {
		r.schemaMsg = schemaMessage(fs, r.mem)
		r.projectable = projectable(fs)
	}
	return nil
}

// checked reports whether df carries checksums (every DataFile a Writer returns does).
func (r *FileReader) checked() bool { return r.df.Batches != nil }

// verifyBlock checks a whole fetched block against its recorded CRC32C.
func (r *FileReader) verifyBlock(i int, data []byte) error {
	if !r.checked() {
		return nil
	}
	if got, want := crc32.Checksum(data, castagnoli), r.df.Batches[i].CRC32C; got != want {
		return r.corrupt("record batch %d CRC32C mismatch: computed %08x, description says %08x", i, got, want)
	}
	return nil
}

func openIPC(src *rangeSource, mem memory.Allocator, size int64) (fr *ipc.FileReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("arrow/ipc panicked: %v", p)
		}
	}()
	return ipc.NewFileReader(src, ipc.WithAllocator(mem), ipc.WithBodySizeLimit(size))
}

func withoutMetadataKey(s *arrow.Schema, key string) *arrow.Schema {
	md := s.Metadata()
	i := md.FindKey(key)
	if i < 0 {
		return s
	}
	keys := slices.Delete(slices.Clone(md.Keys()), i, i+1)
	vals := slices.Delete(slices.Clone(md.Values()), i, i+1)
	m := arrow.NewMetadata(keys, vals)
	return arrow.NewSchemaWithEndian(s.Fields(), &m, s.Endianness())
}

func schemaHasDictionary(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		if typeHasDictionary(f.Type) {
			return true
		}
	}
	return false
}

func typeHasDictionary(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return true
	case arrow.ExtensionType:
		return typeHasDictionary(t.StorageType())
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if typeHasDictionary(f.Type) {
				return true
			}
		}
	}
	return false
}

func schemaMessage(s *arrow.Schema, mem memory.Allocator) []byte {
	p := ipc.GetSchemaPayload(s, mem)
	defer p.Release()
	meta := p.Meta() // Meta retains the buffer: release it too
	defer meta.Release()
	return slices.Clone(meta.Bytes())
}

// Schema is the file schema (without FieldIDsMetadataKey).
func (r *FileReader) Schema() *arrow.Schema { return r.schema }

// CheckSchema checks the file against a table schema whose top-level fields have the
// ids fieldIDs (a manifest's schema), as a reader that maps columns by field id needs:
// every file column whose field id the schema has must hold exactly that field's type
// (arrow.TypeEqual, which includes the nullability of nested fields), and may be nullable
// only if the field is. Columns whose ids the schema lacks (dropped since the file was
// written) are not checked, nor are schema fields the file lacks (a column added later
// reads as nulls; whether it may is the caller's rule). It makes no request.
//
// Errors: *CorruptError wrapping ErrCorrupt, naming the key, the field id and both
// types, when a column disagrees, a field id repeats, or the file's columns have no
// field ids; an error (not corruption) when fieldIDs does not fit schema.
func (r *FileReader) CheckSchema(schema *arrow.Schema, fieldIDs []int32) error {
	if len(fieldIDs) != schema.NumFields() {
		return fmt.Errorf("fragment: check %s: schema has %d fields and %d field ids", r.df.Key, schema.NumFields(), len(fieldIDs))
	}
	if r.fieldIDs == nil {
		return r.corrupt("neither the file nor its description gives its columns' field ids")
	}
	byID := make(map[int32]int, len(fieldIDs))
	for i, id := range fieldIDs {
		byID[id] = i
	}
	seen := make(map[int32]bool, len(r.fieldIDs))
	for c, id := range r.fieldIDs {
		if seen[id] {
			return r.corrupt("field id %d names more than one column", id)
		}
		seen[id] = true
		i, ok := byID[id]
		if !ok {
			continue
		}
		have, want := r.schema.Field(c), schema.Field(i)
		if !arrow.TypeEqual(have.Type, want.Type) {
			return r.corrupt("column %d (%q) holds field id %d (%q) as %s, the schema has %s",
				c, have.Name, id, want.Name, have.Type, want.Type)
		}
		if have.Nullable && !want.Nullable {
			return r.corrupt("column %d (%q) holds field id %d (%q) as nullable, the schema has it not nullable",
				c, have.Name, id, want.Name)
		}
	}
	return nil
}

// NumBatches is the number of record batches in the file.
func (r *FileReader) NumBatches() int { return len(r.blocks) }

// DataFile is the description the reader was opened with.
func (r *FileReader) DataFile() DataFile { return r.df }

// ReadBatch reads record batch i. columns are indices into the file schema (any order;
// nil means all columns), and the result's schema holds those fields in that order. The
// caller owns the result and must Release it.
//
// Errors: an index out of range; *CorruptError wrapping ErrCorrupt (naming the key) for
// bytes that do not decode or disagree with the DataFile; *store.Error for store
// failures; *panics.Error wrapping panics.ErrInternal (naming the key) for a panic while
// reading.
func (r *FileReader) ReadBatch(i int, columns []int) (arrow.RecordBatch, error) {
	b, err := r.FetchBatch(i, columns)
	if err != nil {
		return nil, err
	}
	if columns == nil {
		columns = identity(r.schema.NumFields())
	}
	return b.Decode(columns)
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func coversAll(columns []int, n int) bool {
	if len(columns) < n {
		return false
	}
	seen := make([]bool, n)
	k := 0
	for _, c := range columns {
		if !seen[c] {
			seen[c] = true
			k++
		}
	}
	return k == n
}

// project returns rec's columns in the given order (releasing rec).
func project(rec arrow.RecordBatch, columns []int) arrow.RecordBatch {
	defer rec.Release()
	fields := make([]arrow.Field, len(columns))
	cols := make([]arrow.Array, len(columns))
	for j, c := range columns {
		fields[j] = rec.Schema().Field(c)
		cols[j] = rec.Column(c)
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}

// readViaArrow prefetches batch i's block in one request and lets arrow's FileReader
// decode it (used when the schema has dictionaries, whose memo arrow keeps).
func (r *FileReader) readViaArrow(i int) (rec arrow.RecordBatch, err error) {
	b := r.blocks[i]
	data, err := r.src.fetch(b.Offset, int64(b.MetaLen)+b.BodyLen)
	if err != nil {
		return nil, err
	}
	if err := r.verifyBlock(i, data); err != nil {
		return nil, err
	}
	h := r.src.pin(b.Offset, data)
	defer r.src.unpin(h)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("arrow/ipc panicked: %v", p)
		}
		if err != nil {
			err = r.classify(fmt.Sprintf("decode record batch %d", i), err)
		}
	}()
	rec, err = r.fr.RecordBatchAt(i)
	if err != nil {
		return nil, err
	}
	return r.withSchema(rec), nil
}

// withSchema rebinds rec (decoded with the file schema) to r.schema, releasing rec.
func (r *FileReader) withSchema(rec arrow.RecordBatch) arrow.RecordBatch {
	defer rec.Release()
	return array.NewRecordBatch(r.schema, rec.Columns(), rec.NumRows())
}

// ReadBatchRange reads record batches first..first+n-1 with every column. Their bytes lie
// one after another in the file, so it fetches them with one GetRange (files with
// dictionaries: one per batch, as ReadBatch). The caller owns and releases every batch.
// Errors: as ReadBatch; a range outside the file.
func (r *FileReader) ReadBatchRange(first, n int) (_ []arrow.RecordBatch, err error) {
	if first < 0 || n < 1 || first+n > len(r.blocks) {
		return nil, fmt.Errorf("fragment: batches [%d,%d) out of range [0,%d) in %s", first, first+n, len(r.blocks), r.df.Key)
	}
	var out []arrow.RecordBatch
	defer func() {
		if v := recover(); v != nil {
			err = panics.New("read data file", r.df.Key, v)
		}
		if err != nil {
			for _, rec := range out {
				rec.Release()
			}
			out = nil
		}
	}()
	if !r.direct {
		for i := first; i < first+n; i++ {
			rec, err := r.ReadBatch(i, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
		return out, nil
	}
	if err := seamReadBatch.Inject(r.src.context()); err != nil {
		return nil, err
	}
	start := r.blocks[first].Offset
	end := start
	for i := first; i < first+n; i++ {
		b := r.blocks[i]
		end = max(end, b.Offset+int64(b.MetaLen)+b.BodyLen)
		if b.Offset < start {
			return nil, r.corrupt("record batch %d (offset %d) lies before batch %d (offset %d)", i, b.Offset, first, start)
		}
	}
	data, err := r.src.fetch(start, end-start)
	if err != nil {
		return nil, err
	}
	for i := first; i < first+n; i++ {
		b := r.blocks[i]
		off := b.Offset - start
		rec, err := r.decodeWhole(i, data[off:off+int64(b.MetaLen)+b.BodyLen])
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
		if r.df.Batches != nil && rec.NumRows() != r.df.Batches[i].Rows {
			return nil, r.corrupt("batch %d has %d rows, its description says %d", i, rec.NumRows(), r.df.Batches[i].Rows)
		}
	}
	return out, nil
}

// decodeWhole checks and decodes batch i from its fetched metadata and body.
func (r *FileReader) decodeWhole(i int, data []byte) (arrow.RecordBatch, error) {
	b := r.blocks[i]
	if err := r.verifyBlock(i, data); err != nil {
		return nil, err
	}
	meta, err := stripMetaPrefix(data[:b.MetaLen])
	if err != nil {
		return nil, r.corrupt("record batch %d: %w", i, err)
	}
	bm, err := parseBatchMeta(meta)
	if err != nil {
		return nil, r.corrupt("record batch %d: %w", i, err)
	}
	if bm.BodyLen != b.BodyLen {
		return nil, r.corrupt("record batch %d: message body length %d, footer says %d", i, bm.BodyLen, b.BodyLen)
	}
	// Check the node, buffer and variadic counts against the schema before arrow sizes
	// allocations by them.
	if _, err := batchLayout(r.fr.Schema(), &bm); err != nil && !errors.Is(err, errUnsupportedLayout) {
		return nil, r.corrupt("record batch %d: %w", i, err)
	}
	rec, err := r.decodeBatch(i, r.schemaMsg, bm, meta, data[b.MetaLen:], r.checked(), false)
	if err != nil {
		return nil, err
	}
	return r.withSchema(rec), nil
}

// decodeBatch decompresses (if needed) and decodes one record batch message. meta is the
// message's flatbuffer when it can be used as is (nil to rebuild it from bm). verified
// says meta and body passed their checksums. transient decodes a compressed body into
// pooled memory (see DecodeTransient).
func (r *FileReader) decodeBatch(i int, schemaMsg []byte, bm batchMeta, meta, body []byte, verified, transient bool) (arrow.RecordBatch, error) {
	bodyBuf := memory.NewBufferBytes(body)
	if bm.HasCodec {
		var newBody func(int) []byte
		if transient {
			newBody = scratch.Allocate
		}
		var err error
		if bm, body, err = decompressBody(bm, body, verified, newBody); err != nil {
			return nil, r.corrupt("record batch %d: %w", i, err)
		}
		meta = nil
		if transient {
			bodyBuf = memory.NewBufferWithAllocator(body, scratch)
			defer bodyBuf.Release() // the arrays hold their own references
		} else {
			bodyBuf = memory.NewBufferBytes(body)
		}
	}
	if meta == nil {
		meta = buildBatchMeta(bm)
	}
	rec, err := decodeMessage(schemaMsg, meta, bodyBuf, r.mem)
	if err != nil {
		return nil, r.classify(fmt.Sprintf("decode record batch %d", i), err)
	}
	return rec, nil
}

// decodeMessage decodes one record batch message (metadata flatbuffer and body) against a
// schema message, using arrow-go's stream reader. The arrays slice body (retaining it).
func decodeMessage(schemaMsg, meta []byte, body *memory.Buffer, mem memory.Allocator) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("arrow/ipc panicked: %v", p)
		}
	}()
	mr := &sliceMessages{msgs: []*ipc.Message{
		ipc.NewMessage(memory.NewBufferBytes(schemaMsg), memory.NewBufferBytes(nil)),
		ipc.NewMessage(memory.NewBufferBytes(meta), body),
	}}
	rd, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem))
	if err != nil {
		mr.Release()
		return nil, err
	}
	defer rd.Release()
	if !rd.Next() {
		if err := rd.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("no record batch in message")
	}
	rec = rd.RecordBatch()
	rec.Retain()
	return rec, nil
}

// sliceMessages is an ipc.MessageReader over messages already in memory.
type sliceMessages struct {
	msgs []*ipc.Message
	next int
}

func (m *sliceMessages) Message() (*ipc.Message, error) {
	if m.next >= len(m.msgs) {
		return nil, io.EOF
	}
	msg := m.msgs[m.next]
	m.next++
	return msg, nil
}

func (m *sliceMessages) Retain() {}

func (m *sliceMessages) Release() {
	for _, msg := range m.msgs {
		msg.Release()
	}
	m.msgs = nil
}

// Close releases the reader. It makes no request.
func (r *FileReader) Close() error {
	if r.fr != nil {
		r.fr.Close()
		r.fr = nil
	}
	return nil
}

// SetContext makes ctx the context of the reader's later requests, in place of the one
// OpenFile was given: a reader kept beyond the call that opened it (a cached index page
// file) must not keep using that call's context, which may have ended. Safe for
// concurrent use; a read running concurrently with it may use either context.
func (r *FileReader) SetContext(ctx context.Context) { r.src.setContext(ctx) }

// rangeSource serves arrow's ReadAtSeeker from pinned byte ranges (the file tail, a
// prefetched batch) and falls back to one GetRange per ReadAt for anything else.
type rangeSource struct {
	store store.Store
	key   string
	size  int64

	mu   sync.Mutex
	ctx  context.Context // of the requests (SetContext)
	pins []*pinned
	pos  int64
}

func (s *rangeSource) context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctx
}

func (s *rangeSource) setContext(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
}

type pinned struct {
	off  int64
	data []byte
}

// fetch reads exactly n bytes at off with one GetRange; a short read means the object is
// shorter than its recorded size.
func (s *rangeSource) fetch(off, n int64) ([]byte, error) {
	b, err := s.store.GetRange(s.context(), s.key, off, n)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n {
		return nil, corruptf(objDataFile, s.key, "read %d bytes at offset %d, wanted %d: object is shorter than its recorded size %d (truncated?)",
			len(b), off, n, s.size)
	}
	return b, nil
}

// fetchPooled is fetch into a body from the scratch pool when the store can read into a
// buffer (store.RangeReaderInto); pooled says whether the bytes may go back to the pool
// (scratch.Free) once nothing references them.
func (s *rangeSource) fetchPooled(off, n int64) (_ []byte, pooled bool, _ error) {
	ri, ok := s.store.(store.RangeReaderInto)
	if !ok || n < scratchMinBytes {
		b, err := s.fetch(off, n)
		return b, false, err
	}
	b := scratch.Allocate(int(n))
	got, err := ri.GetRangeInto(s.context(), s.key, off, b)
	if err != nil {
		return nil, false, err
	}
	if int64(got) != n {
		return nil, false, corruptf(objDataFile, s.key, "read %d bytes at offset %d, wanted %d: object is shorter than its recorded size %d (truncated?)",
			got, off, n, s.size)
	}
	return b, true, nil
}

func (s *rangeSource) pin(off int64, data []byte) *pinned {
	p := &pinned{off: off, data: data}
	s.mu.Lock()
	s.pins = append(s.pins, p)
	s.mu.Unlock()
	return p
}

func (s *rangeSource) unpin(p *pinned) {
	s.mu.Lock()
	s.pins = slices.DeleteFunc(s.pins, func(q *pinned) bool { return q == p })
	s.mu.Unlock()
}

func (s *rangeSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	end := off + int64(len(p))
	s.mu.Lock()
	for _, pn := range s.pins {
		if off >= pn.off && end <= pn.off+int64(len(pn.data)) {
			n := copy(p, pn.data[off-pn.off:])
			s.mu.Unlock()
			return n, nil
		}
	}
	s.mu.Unlock()
	if off >= s.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), s.size-off)
	b, err := s.fetch(off, n)
	if err != nil {
		return 0, err
	}
	c := copy(p, b)
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}

func (s *rangeSource) Read(p []byte) (int, error) {
	s.mu.Lock()
	pos := s.pos
	s.mu.Unlock()
	n, err := s.ReadAt(p, pos)
	s.mu.Lock()
	s.pos += int64(n)
	s.mu.Unlock()
	return n, err
}

func (s *rangeSource) Seek(offset int64, whence int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += s.pos
	case io.SeekEnd:
		offset += s.size
	default:
		return 0, errors.New("bad whence")
	}
	if offset < 0 {
		return 0, errors.New("negative position")
	}
	s.pos = offset
	return offset, nil
}
