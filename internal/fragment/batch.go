package fragment

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/internal/panics"
)

// Batch is one record batch's stored bytes, fetched and checked against the description's
// checksums, to be decoded a few columns at a time: a filtered scan decodes the filter's
// columns first and the others only when some row matches (late materialization). Fetching
// costs what ReadBatch costs for the same columns; each Decode decodes only the buffers of
// the columns it is asked for. A Batch holds only Go memory (Release is optional: it lets
// a later fetch reuse the fetched bytes) and is safe for concurrent use.
type Batch struct {
	r       *FileReader
	i       int
	fetched []bool // file columns whose bytes are held

	// Direct mode (no dictionaries): the batch metadata, each file column's share of it,
	// and the fetched body bytes (the whole body, or the coalesced ranges of a projection).
	bm       batchMeta
	meta     []byte // the message flatbuffer as stored (whole fetch only)
	layout   []columnLayout
	whole    []byte // the whole body (whole fetch), else nil
	ranges   []byteRange
	parts    [][]byte
	verified bool

	// Otherwise every column decoded already (dictionaries, unmapped layouts).
	rec arrow.RecordBatch

	// pooled is the whole fetch's buffer when it came from the scratch pool and no decode
	// can alias it (compressed bodies decode into memory of their own): Release returns it.
	pooled []byte
}

// FetchBatch fetches record batch i's bytes for the given columns (indices into the file
// schema; nil means all) and checks them, without decoding: one GetRange for the whole
// batch, or, for a column subset, one for the metadata plus one per coalesced range of
// those columns' buffers, as ReadBatch. Decode then decodes any subset of them.
// Errors: as ReadBatch.
func (r *FileReader) FetchBatch(i int, columns []int) (_ *Batch, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panics.New("read data file", r.df.Key, v)
		}
	}()
	if err := seamReadBatch.Inject(r.src.context()); err != nil {
		return nil, err
	}
	if i < 0 || i >= len(r.blocks) {
		return nil, fmt.Errorf("fragment: batch %d out of range [0,%d) in %s", i, len(r.blocks), r.df.Key)
	}
	nf := r.schema.NumFields()
	for _, c := range columns {
		if c < 0 || c >= nf {
			return nil, fmt.Errorf("fragment: column %d out of range [0,%d) in %s", c, nf, r.df.Key)
		}
	}
	b := &Batch{r: r, i: i, fetched: make([]bool, nf)}
	switch {
	case !r.direct:
		rec, err := r.readViaArrow(i)
		if err != nil {
			return nil, err
		}
		if err := r.checkRows(i, rec); err != nil {
			return nil, err
		}
		b.rec = rec
	case columns == nil || !r.projectable || coversAll(columns, nf):
		if err := b.fetchWhole(); err != nil {
			return nil, err
		}
	default:
		if err := b.fetchColumns(columns); err != nil {
			return nil, err
		}
	}
	if b.rec != nil || b.whole != nil {
		for c := range b.fetched {
			b.fetched[c] = true
		}
	} else {
		for _, c := range columns {
			b.fetched[c] = true
		}
	}
	return b, nil
}

func (r *FileReader) checkRows(i int, rec arrow.RecordBatch) error {
	if r.df.Batches != nil && rec.NumRows() != r.df.Batches[i].Rows {
		n := rec.NumRows()
		rec.Release()
		return r.corrupt("batch %d has %d rows, its description says %d", i, n, r.df.Batches[i].Rows)
	}
	return nil
}

// fetchWhole reads the batch's metadata and body in one request and checks them.
func (b *Batch) fetchWhole() error {
	r, i := b.r, b.i
	blk := r.blocks[i]
	data, pooled, err := r.src.fetchPooled(blk.Offset, int64(blk.MetaLen)+blk.BodyLen)
	if err != nil {
		return err
	}
	if err := r.verifyBlock(i, data); err != nil {
		return err
	}
	meta, err := stripMetaPrefix(data[:blk.MetaLen])
	if err != nil {
		return r.corrupt("record batch %d: %w", i, err)
	}
	bm, err := parseBatchMeta(meta)
	if err != nil {
		return r.corrupt("record batch %d: %w", i, err)
	}
	if bm.BodyLen != blk.BodyLen {
		return r.corrupt("record batch %d: message body length %d, footer says %d", i, bm.BodyLen, blk.BodyLen)
	}
	// Check the node, buffer and variadic counts against the schema before arrow sizes
	// allocations by them.
	layout, err := batchLayout(r.fr.Schema(), &bm)
	switch {
	case errors.Is(err, errUnsupportedLayout):
		// Decode every column now (they cannot be told apart).
		rec, err := r.decodeBatch(i, r.schemaMsg, bm, meta, data[blk.MetaLen:], r.checked(), false)
		if err != nil {
			return err
		}
		rec = r.withSchema(rec)
		if err := r.checkRows(i, rec); err != nil {
			return err
		}
		b.rec = rec
		return nil
	case err != nil:
		return r.corrupt("record batch %d: %w", i, err)
	}
	b.bm, b.meta, b.layout, b.whole, b.verified = bm, meta, layout, data[blk.MetaLen:], r.checked()
	if pooled && bm.HasCodec { // an uncompressed body is decoded in place: arrays alias it
		b.pooled = data
	}
	return nil
}

// Release returns the batch's fetched bytes to a pool for later fetches, when they came
// from one and no record decoded from them can reference them (a compressed batch read
// whole decodes into memory of its own). Calling it is optional (without it the bytes
// are left to the garbage collector); after it, the batch must not be used, and it must
// not run concurrently with a Decode.
func (b *Batch) Release() {
	if b.pooled == nil {
		return
	}
	p := b.pooled
	b.pooled, b.whole, b.meta = nil, nil, nil
	scratch.Free(p)
}

// fetchColumns reads only the chosen columns' bytes: one request for the batch metadata,
// then one per planned body range, each column checked against its CRC32C.
func (b *Batch) fetchColumns(columns []int) error {
	r, i := b.r, b.i
	blk := r.blocks[i]
	metaRaw, err := r.src.fetch(blk.Offset, int64(blk.MetaLen))
	if err != nil {
		return err
	}
	// Checked descriptions carry CRC32Cs of each batch's metadata and of each column's
	// body span, so a projection is verified like a whole-batch read.
	verified := r.checked() && len(r.df.Batches[i].ColumnCRC32C) == r.schema.NumFields()
	if verified {
		if got, want := crc32.Checksum(metaRaw, castagnoli), r.df.Batches[i].MetaCRC32C; got != want {
			return r.corrupt("record batch %d metadata CRC32C mismatch: computed %08x, description says %08x", i, got, want)
		}
	}
	meta, err := stripMetaPrefix(metaRaw)
	if err != nil {
		return r.corrupt("record batch %d: %w", i, err)
	}
	bm, err := parseBatchMeta(meta)
	if err != nil {
		return r.corrupt("record batch %d: %w", i, err)
	}
	if bm.BodyLen != blk.BodyLen {
		return r.corrupt("record batch %d: message body length %d, footer says %d", i, bm.BodyLen, blk.BodyLen)
	}
	layout, err := batchLayout(r.fr.Schema(), &bm)
	if errors.Is(err, errUnsupportedLayout) {
		return b.fetchWhole()
	}
	if err != nil {
		return r.corrupt("record batch %d: %w", i, err)
	}
	spans := make([]byteRange, 0, len(columns))
	for _, c := range columns {
		spans = append(spans, byteRange{layout[c].start, layout[c].end})
	}
	b.ranges = planRanges(spans, CoalesceGap)
	b.parts = make([][]byte, len(b.ranges))
	bodyStart := blk.Offset + int64(blk.MetaLen)
	for k, rg := range b.ranges {
		if b.parts[k], err = r.src.fetch(bodyStart+rg.start, rg.end-rg.start); err != nil {
			return err
		}
	}
	b.bm, b.layout, b.verified = bm, layout, verified
	if verified {
		for _, c := range columns {
			l := layout[c]
			if got, want := crc32.Checksum(b.bytesAt(byteRange{l.start, l.end}), castagnoli), r.df.Batches[i].ColumnCRC32C[c]; got != want {
				return r.corrupt("record batch %d column %d CRC32C mismatch: computed %08x, description says %08x", i, c, got, want)
			}
		}
	}
	return nil
}

// bytesAt returns the fetched bytes of a body span.
func (b *Batch) bytesAt(s byteRange) []byte {
	if b.whole != nil {
		return b.whole[s.start:s.end]
	}
	for k, rg := range b.ranges {
		if s.start >= rg.start && s.end <= rg.end {
			return b.parts[k][s.start-rg.start : s.end-rg.start]
		}
	}
	return nil
}

// Rows is the batch's row count.
func (b *Batch) Rows() int64 {
	if b.rec != nil {
		return b.rec.NumRows()
	}
	return b.bm.Length
}

// Decode decodes the given columns (file schema indices, any order, each fetched by
// FetchBatch; nil means every fetched column in schema order) into a record batch with
// those fields in that order. The caller owns and releases it. Errors: a column not
// fetched; otherwise as ReadBatch.
func (b *Batch) Decode(columns []int) (arrow.RecordBatch, error) {
	return b.decode(columns, false)
}

// DecodeTransient is Decode into pooled memory: when the last reference to the record's
// arrays is released (arrow's reference counts), their memory is reused by a later
// decode, so nothing read from them may be kept past that release (a string from Value
// aliases it: copy it), and each reference must be released exactly once. A holder that
// retains an array keeps its memory; a record never released is left to the garbage
// collector (its memory does not return to the pool). Nothing of the record may be
// handed to code that does not follow these rules.
func (b *Batch) DecodeTransient(columns []int) (arrow.RecordBatch, error) {
	return b.decode(columns, true)
}

func (b *Batch) decode(columns []int, transient bool) (_ arrow.RecordBatch, err error) {
	r := b.r
	defer func() {
		if v := recover(); v != nil {
			err = panics.New("read data file", r.df.Key, v)
		}
	}()
	nf := r.schema.NumFields()
	if columns == nil {
		for c, ok := range b.fetched {
			if ok {
				columns = append(columns, c)
			}
		}
	}
	for _, c := range columns {
		if c < 0 || c >= nf || !b.fetched[c] {
			return nil, fmt.Errorf("fragment: column %d of batch %d in %s was not fetched", c, b.i, r.df.Key)
		}
	}
	if b.rec != nil {
		b.rec.Retain()
		if len(columns) == nf && isIdentity(columns) {
			return b.rec, nil
		}
		return project(b.rec, columns), nil
	}
	var rec arrow.RecordBatch
	if b.whole != nil && len(columns) == nf && isIdentity(columns) {
		rec, err = r.decodeBatch(b.i, r.schemaMsg, b.bm, b.meta, b.whole, b.verified, transient)
		if err != nil {
			return nil, err
		}
		rec = r.withSchema(rec)
	} else {
		rec, err = b.decodeSubset(columns, transient)
		if err != nil {
			return nil, err
		}
	}
	if err := r.checkRows(b.i, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

func isIdentity(columns []int) bool {
	for i, c := range columns {
		if c != i {
			return false
		}
	}
	return true
}

// decodeSubset decodes a message rebuilt from the chosen columns' share of the batch.
// A compressed whole-batch fetch is decoded in place: the rebuilt metadata points at the
// chosen buffers where they lie in the fetched body, and decompression writes them to a
// new body (copying the compressed bytes first would be one more pass over them).
func (b *Batch) decodeSubset(columns []int, transient bool) (arrow.RecordBatch, error) {
	bm := b.bm
	out := batchMeta{Version: bm.Version, Length: bm.Length, HasCodec: bm.HasCodec, Codec: bm.Codec, CodecMeth: bm.CodecMeth}
	if bm.HasCodec && b.whole != nil {
		for _, c := range columns {
			l := b.layout[c]
			out.Nodes = append(out.Nodes, bm.Nodes[l.nodeLo:l.nodeHi]...)
			out.Variadic = append(out.Variadic, bm.Variadic[l.varLo:l.varHi]...)
			out.Buffers = append(out.Buffers, bm.Buffers[l.bufLo:l.bufHi]...)
		}
		out.BodyLen = int64(len(b.whole))
		return b.r.decodeBatch(b.i, b.r.projectedSchemaMessage(columns), out, nil, b.whole, b.verified, transient)
	}
	var size int64
	for _, c := range columns {
		l := b.layout[c]
		size += align8(l.end - l.start)
	}
	body := make([]byte, size)
	var pos int64
	for _, c := range columns {
		l := b.layout[c]
		copy(body[pos:], b.bytesAt(byteRange{l.start, l.end}))
		out.Nodes = append(out.Nodes, bm.Nodes[l.nodeLo:l.nodeHi]...)
		out.Variadic = append(out.Variadic, bm.Variadic[l.varLo:l.varHi]...)
		for _, buf := range bm.Buffers[l.bufLo:l.bufHi] {
			nb := ipcBuffer{Offset: pos, Length: buf.Length}
			if buf.Length > 0 {
				nb.Offset = pos + buf.Offset - l.start
			}
			out.Buffers = append(out.Buffers, nb)
		}
		pos += align8(l.end - l.start)
	}
	out.BodyLen = int64(len(body))
	return b.r.decodeBatch(b.i, b.r.projectedSchemaMessage(columns), out, nil, body, b.verified, transient)
}
