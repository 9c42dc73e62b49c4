package fragment

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/oklog/ulid/v2"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/panics"
	"github.com/shale-db/shale/store"
)

// seamEncodeBatch is hit before each record batch is encoded (tests inject a panic there).
var seamEncodeBatch = failpoint.Seam("fragment.encode_batch")

// seamEncodeJob is hit on a batch's encoding goroutine, before its statistics and layout.
var seamEncodeJob = failpoint.Seam("fragment.encode_job")

// FieldIDsMetadataKey is the schema metadata key under which a data file records its
// top-level field ids, as decimal numbers joined by ",".
const FieldIDsMetadataKey = "shale:field_ids"

// WriterOptions tune a Writer. Zero values take the defaults.
type WriterOptions struct {
	Compression Compression // default CompressionZstd
	// CompressionLevel is the ZSTD level, 1 (fastest) to MaxZstdLevel; 0 means
	// DefaultZstdLevel. LZ4 and none ignore it; so do schemas with dictionary columns,
	// which arrow-go's writer encodes at its own level.
	CompressionLevel int
	MaxRowsPerBatch  int              // rows per IPC record batch, default DefaultMaxRowsPerBatch
	MaxRowsPerFile   int              // rows per data file, default DefaultMaxRowsPerFile
	Allocator        memory.Allocator // default memory.DefaultAllocator
	// CompressConcurrency is how many goroutines encode at once: batches are laid out,
	// given statistics and compressed on their own goroutines, up to CompressConcurrency+1
	// batches at a time across files (the memory bound: that many uncompressed batches,
	// besides the file being assembled and the previous file being stored), and a
	// batch's large buffers are compressed in parallel when a goroutine is free. Default:
	// GOMAXPROCS, at most 8. The bytes written do not depend on it.
	CompressConcurrency int
}

// defaultCompressConcurrency is WriterOptions.CompressConcurrency's default.
func defaultCompressConcurrency() int { return min(max(runtime.GOMAXPROCS(0), 1), 8) }

// ErrClosed is returned by Write and Close after Close.
var ErrClosed = errors.New("fragment: writer is closed")

// ErrSchemaMismatch is returned by Write when a record's schema differs from the writer's.
var ErrSchemaMismatch = errors.New("fragment: record schema does not match the writer schema")

// Writer streams records into data files of at most MaxRowsPerFile rows each, re-chunking
// them into record batches of at most MaxRowsPerBatch rows. Every batch but the last of a
// file is full. Each file is encoded in memory and stored with one Put under
// dir + "/" + <ULID> + ".arrow". A full file is finished (its last batches collected,
// footer, checksums) and stored on a goroutine of its own while the next file's batches
// are encoded; at most one file is stored at a time, so memory holds at most two encoded
// files (the one being stored and the one being assembled) besides the batches being
// encoded. Close returns only once every file is stored (as durable as store.Put makes
// it). A Writer is not safe for concurrent use.
type Writer struct {
	ctx      context.Context
	store    store.Store
	dir      string
	schema   *arrow.Schema // the input schema plus the field-id metadata
	fieldIDs []int32
	opts     WriterOptions
	// frame and enc encode batches on worker goroutines (encode.go); enc is nil for
	// CompressionNone. frame is nil for schemas with dictionaries, which arrow-go's
	// FileWriter encodes with ipcOpts instead.
	frame   *fileFrame
	enc     *codecEncoder
	helpers helpers
	ipcOpts []ipc.Option

	pending     []arrow.RecordBatch // slices waiting to form the next batch
	pendingRows int64

	// slots holds a token per batch being encoded, in every file: its capacity,
	// CompressConcurrency+1, bounds them.
	slots chan struct{}
	// storing is the previous file, being finished and stored in the background (nil:
	// none); joinStoring collects it into written.
	storing *storeJob

	cur     *fileBuilder
	written []DataFile
	err     error // sticky: once a write fails the Writer refuses more work
	closed  bool
}

type fileBuilder struct {
	buf chunkBuffer     // the file as arrow-go's writer encodes it (dictionary schemas only)
	fw  *ipc.FileWriter // dictionary schemas only
	// parts are the file's pieces in order (the frame's and the encoded batches', not
	// copied), joined once into a slice of the exact size when the file is stored.
	parts [][]byte
	// msgs are the encoded batches among parts: transient memory (scratch), returned
	// once bytes has copied them.
	msgs    [][]byte
	pos     int64       // bytes in parts
	blocks  []ipcBlock  // of the batches appended to parts
	jobs    []*batchJob // batches being encoded, in file order
	rows    int64       // rows of the batches appended or being encoded
	batches []BatchInfo
	stats   []ColumnStats // exact whole-file statistics so far
}

// storeJob is a full file being finished and stored on its own goroutine; done is closed
// when df (or err) is set.
type storeJob struct {
	done chan struct{}
	df   DataFile
	err  error
}

// batchJob is one batch being encoded on its own goroutine; done is closed when eb (or
// err) and stats are set.
type batchJob struct {
	done  chan struct{}
	rows  int64
	eb    encodedBatch
	stats []ColumnStats
	err   error
}

// NewWriter returns a Writer for records of schema whose top-level columns have the given
// field ids (one per field, distinct). Errors: invalid options or field ids.
func NewWriter(ctx context.Context, s store.Store, dir string, schema *arrow.Schema, fieldIDs []int32, opts WriterOptions) (*Writer, error) {
	if schema.NumFields() == 0 {
		return nil, errors.New("fragment: schema has no fields")
	}
	if len(fieldIDs) != schema.NumFields() {
		return nil, fmt.Errorf("fragment: %d field ids for %d fields", len(fieldIDs), schema.NumFields())
	}
	seen := make(map[int32]bool, len(fieldIDs))
	for _, id := range fieldIDs {
		if seen[id] {
			return nil, fmt.Errorf("fragment: duplicate field id %d", id)
		}
		seen[id] = true
	}
	c, err := opts.Compression.normalize()
	if err != nil {
		return nil, err
	}
	opts.Compression = c
	if opts.MaxRowsPerBatch <= 0 {
		opts.MaxRowsPerBatch = DefaultMaxRowsPerBatch
	}
	if opts.MaxRowsPerFile <= 0 {
		opts.MaxRowsPerFile = DefaultMaxRowsPerFile
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	md := schema.Metadata()
	keys := append([]string(nil), md.Keys()...)
	vals := append([]string(nil), md.Values()...)
	if i := md.FindKey(FieldIDsMetadataKey); i >= 0 {
		vals[i] = encodeFieldIDs(fieldIDs)
	} else {
		keys = append(keys, FieldIDsMetadataKey)
		vals = append(vals, encodeFieldIDs(fieldIDs))
	}
	meta := arrow.NewMetadata(keys, vals)
	fileSchema := arrow.NewSchemaWithEndian(schema.Fields(), &meta, schema.Endianness())

	cc := opts.CompressConcurrency
	if cc <= 0 {
		cc = defaultCompressConcurrency()
	}
	w := &Writer{
		ctx: ctx, store: s, dir: strings.TrimSuffix(dir, "/"), schema: fileSchema,
		fieldIDs: append([]int32(nil), fieldIDs...), opts: opts,
		helpers: make(helpers, max(cc-1, 0)), slots: make(chan struct{}, cc+1),
	}
	var level int
	if opts.Compression == CompressionZstd {
		if level, err = zstdLevel(opts.CompressionLevel); err != nil {
			return nil, err
		}
	}
	if schemaHasDictionary(fileSchema) {
		w.ipcOpts = []ipc.Option{ipc.WithSchema(fileSchema), ipc.WithAllocator(opts.Allocator), ipc.WithCompressConcurrency(cc)}
		switch opts.Compression {
		case CompressionZstd:
			w.ipcOpts = append(w.ipcOpts, ipc.WithZstd())
		case CompressionLZ4:
			w.ipcOpts = append(w.ipcOpts, ipc.WithLZ4())
		}
		return w, nil
	}
	if w.frame, err = newFileFrame(fileSchema, opts.Allocator); err != nil {
		return nil, fmt.Errorf("fragment: Arrow file frame: %w", err)
	}
	switch opts.Compression {
	case CompressionZstd:
		w.enc = &codecEncoder{codec: codecZstd, level: level}
	case CompressionLZ4:
		w.enc = &codecEncoder{codec: codecLZ4Frame}
	}
	return w, nil
}

func encodeFieldIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(int64(id), 10)
	}
	return strings.Join(parts, ",")
}

func decodeFieldIDs(s string) ([]int32, error) {
	parts := strings.Split(s, ",")
	out := make([]int32, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, err
		}
		out[i] = int32(v)
	}
	return out, nil
}

// Write appends rec's rows. The Writer keeps references to rec's buffers (Retain) until
// they are encoded, so the caller may Release rec as usual once Write returns, but must
// not modify its buffers. A data file that fills up is stored in the background while
// Write goes on with the next one (Close waits for it); a failure to store it is returned
// by a later Write or by Close.
// Errors: ErrClosed, ErrSchemaMismatch, encoding errors, store errors (*store.Error), and *panics.Error wrapping
// panics.ErrInternal for a panic while encoding; after an error the Writer is failed.
func (w *Writer) Write(rec arrow.RecordBatch) (err error) {
	defer w.recoverPanic(&err)
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if !sameFields(rec.Schema(), w.schema) {
		return fmt.Errorf("%w: got %v, want %v", ErrSchemaMismatch, rec.Schema(), w.schema)
	}
	n := rec.NumRows()
	batchMax, fileMax := int64(w.opts.MaxRowsPerBatch), int64(w.opts.MaxRowsPerFile)
	for off := int64(0); off < n; {
		fileRows := int64(0)
		if w.cur != nil {
			fileRows = w.cur.rows
		}
		room := min(batchMax-w.pendingRows, fileMax-fileRows-w.pendingRows)
		take := min(room, n-off)
		w.pending = append(w.pending, rec.NewSlice(off, off+take))
		w.pendingRows += take
		off += take
		if w.pendingRows == batchMax || fileRows+w.pendingRows == fileMax {
			if err := w.flushBatch(); err != nil {
				return w.fail(err)
			}
		}
		if w.cur != nil && w.cur.rows == fileMax {
			if err := w.finishFile(); err != nil {
				return w.fail(err)
			}
		}
	}
	return nil
}

func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := 0; i < a.NumFields(); i++ {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Nullable != fb.Nullable || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// recoverPanic, deferred directly by Write and Close, turns a panic into an error that
// fails the Writer (its current file is dropped; files already stored stay in Written).
func (w *Writer) recoverPanic(errp *error) {
	v := recover()
	if v == nil {
		return
	}
	err := panics.New("write data file under", w.dir, v)
	*errp = err
	w.err = err
	quietly(w.releasePending)
	if w.cur != nil {
		quietly(w.waitJobs)
		if w.cur.fw != nil {
			quietly(func() { w.cur.fw.Close() })
		}
		w.cur = nil
	}
	quietly(func() { _ = w.joinStoring() })
}

func (w *Writer) fail(err error) error {
	w.err = err
	w.releasePending()
	if w.cur != nil {
		w.waitJobs()
		if w.cur.fw != nil {
			w.cur.fw.Close()
		}
		w.cur = nil
	}
	// The file being stored: its goroutine ends, and if it was stored, Written lists it.
	_ = w.joinStoring()
	return err
}

// joinStoring waits for the file being stored in the background, if any, and adds it to
// written (or returns its error).
func (w *Writer) joinStoring() error {
	sj := w.storing
	if sj == nil {
		return nil
	}
	<-sj.done
	w.storing = nil
	if sj.err != nil {
		return sj.err
	}
	w.written = append(w.written, sj.df)
	return nil
}

func (w *Writer) releasePending() {
	for _, r := range w.pending {
		r.Release()
	}
	w.pending, w.pendingRows = nil, 0
}

// flushBatch turns the pending slices into one record batch and encodes it.
func (w *Writer) flushBatch() error {
	if w.pendingRows == 0 {
		return nil
	}
	if err := seamEncodeBatch.Inject(w.ctx); err != nil {
		return err
	}
	rec, err := w.concatPending()
	w.releasePending()
	if err != nil {
		return err
	}
	defer rec.Release()
	if w.cur == nil {
		fb := &fileBuilder{}
		if w.frame == nil {
			fw, err := ipc.NewFileWriter(&fb.buf, w.ipcOpts...)
			if err != nil {
				return fmt.Errorf("fragment: ipc writer: %w", err)
			}
			fb.fw = fw
		} else {
			fb.write(w.frame.header)
		}
		w.cur = fb
	}
	if w.frame == nil {
		if err := w.cur.fw.Write(rec); err != nil {
			return fmt.Errorf("fragment: encode record batch: %w", err)
		}
		w.cur.rows += rec.NumRows()
		w.cur.addBatch(rec.NumRows(), batchStats(rec, w.fieldIDs))
		return nil
	}
	job := &batchJob{done: make(chan struct{}), rows: rec.NumRows()}
	w.slots <- struct{}{} // wait while CompressConcurrency+1 batches are being encoded
	rec.Retain()
	go w.encode(job, rec)
	w.cur.jobs = append(w.cur.jobs, job)
	w.cur.rows += rec.NumRows()
	return w.cur.collect(false)
}

// encode runs on a batch's own goroutine: statistics, layout and compression of rec
// (released when done).
func (w *Writer) encode(j *batchJob, rec arrow.RecordBatch) {
	defer close(j.done)
	defer func() { <-w.slots }()
	defer rec.Release()
	defer func() {
		if v := recover(); v != nil {
			j.err = panics.New("encode data file under", w.dir, v)
		}
	}()
	if j.err = seamEncodeJob.Inject(w.ctx); j.err != nil {
		return
	}
	j.stats = batchStats(rec, w.fieldIDs)
	if j.eb, j.err = encodeBatch(rec, w.enc, w.helpers, w.opts.Allocator); j.err != nil {
		j.err = fmt.Errorf("fragment: encode record batch: %w", j.err)
	}
}

// collect appends the encoded batches of the file to it in file order: those already
// done; with all, every one (waiting for them).
func (fb *fileBuilder) collect(all bool) error {
	for len(fb.jobs) > 0 {
		j := fb.jobs[0]
		if all {
			<-j.done
		} else {
			select {
			case <-j.done:
			default:
				return nil
			}
		}
		fb.jobs = fb.jobs[1:]
		if j.err != nil {
			return j.err
		}
		fb.blocks = append(fb.blocks, ipcBlock{Offset: fb.pos, MetaLen: j.eb.metaLen, BodyLen: j.eb.bodyLen})
		fb.write(j.eb.msg)
		fb.msgs = append(fb.msgs, j.eb.msg)
		fb.addBatch(j.rows, j.stats)
	}
	return nil
}

// waitJobs waits for the current file's batches in flight (after a failure: their
// goroutines release what they hold).
func (w *Writer) waitJobs() {
	if w.cur != nil {
		w.cur.waitJobs()
	}
}

// waitJobs waits for the file's batches in flight.
func (fb *fileBuilder) waitJobs() {
	for _, j := range fb.jobs {
		<-j.done
	}
	fb.jobs = nil
}

// write appends p (not copied: it must not change) to the file.
func (fb *fileBuilder) write(p []byte) {
	fb.parts = append(fb.parts, p)
	fb.pos += int64(len(p))
}

// bytes returns the whole file as one slice and drops the pieces it was made of.
func (fb *fileBuilder) bytes() []byte {
	if fb.fw != nil {
		data := fb.buf.Bytes()
		fb.buf = chunkBuffer{}
		return data
	}
	data := make([]byte, 0, fb.pos)
	for _, p := range fb.parts {
		data = append(data, p...)
	}
	fb.parts = nil
	for _, m := range fb.msgs {
		scratch.Free(m)
	}
	fb.msgs = nil
	return data
}

// addBatch records a batch appended to the file with its exact statistics.
func (fb *fileBuilder) addBatch(rows int64, raw []ColumnStats) {
	if fb.stats == nil {
		fb.stats = raw
	} else {
		for i := range raw {
			fb.stats[i] = mergeRaw(fb.stats[i], raw[i])
		}
	}
	fb.batches = append(fb.batches, BatchInfo{Rows: rows, Stats: finalizeAll(raw)})
}

// concatPending returns the pending slices as one record of the file schema.
func (w *Writer) concatPending() (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, w.schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		if len(w.pending) == 1 {
			cols[i] = w.pending[0].Column(i)
			cols[i].Retain()
			continue
		}
		parts := make([]arrow.Array, len(w.pending))
		for j, p := range w.pending {
			parts[j] = p.Column(i)
		}
		c, err := array.Concatenate(parts, w.opts.Allocator)
		if err != nil {
			return nil, fmt.Errorf("fragment: concatenate column %d: %w", i, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(w.schema, cols, w.pendingRows), nil
}

// finishFile hands the current file to a goroutine that finishes and stores it, after
// the previous one is stored (its error is returned here).
func (w *Writer) finishFile() error {
	fb := w.cur
	w.cur = nil
	if err := w.joinStoring(); err != nil {
		fb.waitJobs()
		if fb.fw != nil {
			fb.fw.Close()
		}
		return err
	}
	name := ulid.Make().String() + ".arrow"
	sj := &storeJob{done: make(chan struct{})}
	w.storing = sj
	go func() {
		defer close(sj.done)
		defer func() {
			if v := recover(); v != nil {
				sj.err = panics.New("write data file under", w.dir, v)
				quietly(fb.waitJobs)
			}
		}()
		sj.df, sj.err = w.storeFile(fb, name)
		if sj.err != nil {
			fb.waitJobs()
		}
	}()
	return nil
}

// storeFile collects fb's batches, closes the IPC file and stores it with one Put as
// name under the Writer's directory. It runs on its own goroutine and touches no Writer
// state but its immutable fields.
func (w *Writer) storeFile(fb *fileBuilder, name string) (DataFile, error) {
	if w.frame != nil {
		if err := fb.collect(true); err != nil {
			return DataFile{}, err
		}
	}
	if fb.fw != nil {
		if err := fb.fw.Close(); err != nil {
			return DataFile{}, fmt.Errorf("fragment: finish ipc file: %w", err)
		}
	} else {
		fb.write(w.frame.eos)
		footer := w.frame.footerWith(fb.blocks)
		fb.write(footer)
		fb.write(binary.LittleEndian.AppendUint32(nil, uint32(len(footer))))
		fb.write([]byte(ipcMagic))
	}
	key := name
	if w.dir != "" {
		key = w.dir + "/" + name
	}
	data := fb.bytes()
	footerCRC, err := checksumBlocks(data, w.schema, fb.batches)
	if err != nil {
		return DataFile{}, fmt.Errorf("fragment: re-read the encoded file: %w", err)
	}
	if err := w.store.Put(w.ctx, key, data); err != nil {
		return DataFile{}, err
	}
	df := DataFile{
		Key: key, Size: int64(len(data)), Rows: fb.rows,
		FieldIDs:     append([]int32(nil), w.fieldIDs...),
		Compression:  w.opts.Compression,
		Batches:      fb.batches,
		FooterCRC32C: footerCRC,
	}
	df.Stats = finalizeAll(fb.stats)
	if len(df.Batches) == 1 {
		// One batch: its statistics are the file's (BatchStats returns them).
		df.Batches[0].Stats = nil
	}
	return df, nil
}

// Close flushes buffered rows, stores the last data file and returns every file written,
// in write order (none if no rows were written). On error the files already stored are
// still listed by Written, so a caller can record them for garbage collection. Errors as
// for Write.
func (w *Writer) Close() (_ []DataFile, err error) {
	defer w.recoverPanic(&err)
	if w.closed {
		return nil, ErrClosed
	}
	w.closed = true
	if w.err != nil {
		return nil, w.err
	}
	if err := w.flushBatch(); err != nil {
		return nil, w.fail(err)
	}
	if w.cur != nil {
		if err := w.finishFile(); err != nil {
			return nil, w.fail(err)
		}
	}
	if err := w.joinStoring(); err != nil {
		return nil, w.fail(err)
	}
	return w.Written(), nil
}

// Written returns the data files stored so far.
func (w *Writer) Written() []DataFile { return append([]DataFile(nil), w.written...) }

// Schema is the schema of the files written: the input schema plus FieldIDsMetadataKey.
func (w *Writer) Schema() *arrow.Schema { return w.schema }

// checksumBlocks sets each batch's checksums from the encoded file and returns the
// footer's.
func checksumBlocks(file []byte, schema *arrow.Schema, batches []BatchInfo) (uint32, error) {
	n := len(file)
	if n < 8+ipcTrailerLen {
		return 0, errors.New("file too short")
	}
	footerLen := int(int32(binary.LittleEndian.Uint32(file[n-ipcTrailerLen:])))
	if footerLen <= 0 || footerLen+ipcTrailerLen > n {
		return 0, fmt.Errorf("bad footer length %d", footerLen)
	}
	fi, err := parseFooter(file[n-ipcTrailerLen-footerLen : n-ipcTrailerLen])
	if err != nil {
		return 0, err
	}
	if len(fi.Batches) != len(batches) {
		return 0, fmt.Errorf("footer lists %d batches, %d were written", len(fi.Batches), len(batches))
	}
	for i, b := range fi.Batches {
		metaRaw := file[b.Offset : b.Offset+int64(b.MetaLen)]
		body := file[b.Offset+int64(b.MetaLen) : b.Offset+int64(b.MetaLen)+b.BodyLen]
		batches[i].CRC32C = crc32.Checksum(file[b.Offset:b.Offset+int64(b.MetaLen)+b.BodyLen], castagnoli)
		batches[i].MetaCRC32C = crc32.Checksum(metaRaw, castagnoli)
		meta, err := stripMetaPrefix(metaRaw)
		if err != nil {
			return 0, err
		}
		bm, err := parseBatchMeta(meta)
		if err != nil {
			return 0, err
		}
		layout, err := batchLayout(schema, &bm)
		if errors.Is(err, errUnsupportedLayout) {
			continue
		}
		if err != nil {
			return 0, err
		}
		batches[i].ColumnCRC32C = make([]uint32, len(layout))
		for c, l := range layout {
			batches[i].ColumnCRC32C[c] = crc32.Checksum(body[l.start:l.end], castagnoli)
		}
	}
	return crc32.Checksum(file[n-ipcTrailerLen-footerLen:], castagnoli), nil
}

// chunkBuffer collects the encoded file in chunks of growing size, so a large file is
// copied once (into the contiguous slice Put needs) instead of at every doubling of a
// bytes.Buffer.
type chunkBuffer struct {
	chunks [][]byte
	n      int
}

const (
	firstChunk = 256 << 10
	maxChunk   = 16 << 20
)

func (b *chunkBuffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(b.chunks) == 0 || len(b.chunks[len(b.chunks)-1]) == cap(b.chunks[len(b.chunks)-1]) {
			size := firstChunk
			if k := len(b.chunks); k > 0 {
				size = min(2*cap(b.chunks[k-1]), maxChunk)
			}
			b.chunks = append(b.chunks, make([]byte, 0, max(size, min(len(p), maxChunk))))
		}
		last := &b.chunks[len(b.chunks)-1]
		c := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:c]...)
		p = p[c:]
	}
	b.n += n
	return n, nil
}

// Bytes returns the contents as one slice (the only chunk itself when there is one).
func (b *chunkBuffer) Bytes() []byte {
	if len(b.chunks) == 1 {
		return b.chunks[0]
	}
	out := make([]byte, 0, b.n)
	for _, c := range b.chunks {
		out = append(out, c...)
	}
	return out
}
