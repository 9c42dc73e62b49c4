package fragment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
	"github.com/pierrec/lz4/v4"
)

// Record batch encoding for the Writer. arrow-go's IPC writer compresses with a streaming
// ZSTD encoder at klauspost's default level (about zstd 3) with a frame checksum, one batch
// at a time, and offers no level. Here arrow-go only lays a batch out (an uncompressed
// payload, referencing the arrays' buffers), and this package compresses every buffer with
// a stateless encoder at the chosen level, on worker goroutines, several batches and
// columns at once. The result is the same Arrow IPC file format (BodyCompression with
// one ZSTD or LZ4 frame per buffer behind its 8-byte length prefix; a buffer that does not
// shrink is stored raw behind the -1 prefix, as the format allows), so every Arrow reader
// and every earlier build of this package reads it.

// DefaultZstdLevel is the ZSTD level of WriterOptions.CompressionLevel's zero value: the
// fastest (zstd level 1), which is also what Arrow C++ and pyarrow use, and on columnar
// data compresses about as well as the default level.
const DefaultZstdLevel = 1

// MaxZstdLevel is the largest ZSTD level accepted. Levels are libzstd's when cgo is on;
// the pure-Go backend (zstd.go) maps them to its four encoder speeds.
const MaxZstdLevel = 22

// ErrBadLevel is returned by NewWriter for a compression level out of range.
var ErrBadLevel = errors.New("fragment: compression level out of range")

// lz4Writers are LZ4 frame writers with arrow-go's settings (64 KB blocks, no checksum).
var lz4Writers = sync.Pool{New: func() any {
	w := lz4.NewWriter(nil)
	if err := w.Apply(lz4.ChecksumOption(false), lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
		panic(err)
	}
	return w
}}

// codecEncoder compresses one buffer, appending the 8-byte length prefix and the frame to
// dst. A buffer the codec does not shrink is appended raw behind the -1 prefix.
type codecEncoder struct {
	codec int8 // codecZstd or codecLZ4Frame
	level int  // zstd level (zstdLevel)
}

func (c codecEncoder) compress(dst, src []byte) ([]byte, error) {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(src)))
	switch c.codec {
	case codecZstd:
		var err error
		if dst, err = compressZstd(dst, src, c.level); err != nil {
			return nil, err
		}
	default:
		w := lz4Writers.Get().(*lz4.Writer)
		buf := bytes.NewBuffer(dst)
		w.Reset(buf)
		_, err := w.Write(src)
		if err == nil {
			err = w.Close()
		}
		w.Reset(nil)
		lz4Writers.Put(w)
		if err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		dst = buf.Bytes()
	}
	if len(dst)-start-8 >= len(src) {
		dst = binary.LittleEndian.AppendUint64(dst[:start], ^uint64(0)) // -1: stored raw
		dst = append(dst, src...)
	}
	return dst, nil
}

// encodedBatch is one record batch message ready to be appended to a file.
type encodedBatch struct {
	msg     []byte // metadata prefix, flatbuffer and padding, then the body; transient memory (scratch)
	metaLen int32  // bytes of msg before the body
	bodyLen int64
}

// bodyCapture records the slices arrow-go's Payload.SerializeBody writes: the payload's
// buffers themselves (not copies) and the padding after each.
type bodyCapture struct {
	writes [][]byte
	n      int64
}

func (b *bodyCapture) Write(p []byte) (int, error) {
	b.n += int64(len(p))
	b.writes = append(b.writes, p)
	return len(p), nil
}

// helpers bounds the goroutines that compress buffers beside a batch's own goroutine.
type helpers chan struct{}

// do runs f on a new goroutine when a helper slot is free (wg waits for it), else here.
func (h helpers) do(wg *sync.WaitGroup, f func()) {
	select {
	case h <- struct{}{}:
		wg.Add(1)
		go func() {
			defer func() { <-h; wg.Done() }()
			f()
		}()
	default:
		f()
	}
}

// helpMinBytes is the smallest buffer worth a helper goroutine.
const helpMinBytes = 64 << 10

// encodeBatch lays rec out with arrow-go (uncompressed, zero-copy where the arrays allow)
// and compresses its buffers with enc (nil: stored uncompressed), several at once through h.
func encodeBatch(rec arrow.RecordBatch, enc *codecEncoder, h helpers, mem memory.Allocator) (eb encodedBatch, err error) {
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(mem))
	if err != nil {
		return eb, fmt.Errorf("lay out record batch: %w", err)
	}
	defer p.Release()
	metaBuf := p.Meta()
	defer metaBuf.Release()
	bm, err := parseBatchMeta(metaBuf.Bytes())
	if err != nil {
		return eb, fmt.Errorf("re-read record batch metadata: %w", err)
	}
	var body bodyCapture
	if err := p.SerializeBody(&body); err != nil {
		return eb, err
	}
	if body.n != bm.BodyLen {
		return eb, fmt.Errorf("record batch body is %d bytes, its metadata says %d", body.n, bm.BodyLen)
	}
	src, err := bufferBytes(&bm, body.writes)
	if err != nil {
		return eb, err
	}

	out := bm
	out.Buffers = make([]ipcBuffer, len(bm.Buffers))
	parts := make([][]byte, len(bm.Buffers))
	if enc == nil {
		copy(out.Buffers, bm.Buffers)
		for i := range src {
			parts[i] = src[i]
		}
	} else {
		out.HasCodec, out.Codec, out.CodecMeth = true, enc.codec, 0
		errs := make([]error, len(src))
		// Each buffer is compressed into transient memory with room for the codec's
		// worst case (libzstd then compresses in place, with no copy out of a scratch
		// buffer), copied once into the message below, and the memory returned.
		bufs := make([][]byte, len(src))
		defer func() {
			for _, b := range bufs {
				if b != nil {
					scratch.Free(b)
				}
			}
		}()
		var wg sync.WaitGroup
		for i, s := range src {
			if len(s) == 0 {
				continue
			}
			run := func() {
				bufs[i] = scratch.Allocate(compressRoom(len(s)))
				parts[i], errs[i] = enc.compress(bufs[i][:0], s)
			}
			if len(s) < helpMinBytes || h == nil {
				run()
			} else {
				h.do(&wg, run)
			}
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return eb, err
		}
	}
	var pos int64
	for i, part := range parts {
		out.Buffers[i] = ipcBuffer{Offset: pos, Length: int64(len(part))}
		pos += align8(int64(len(part)))
	}
	out.BodyLen = pos

	meta := metaBuf.Bytes()
	if enc != nil || !sameBuffers(out.Buffers, bm.Buffers) {
		meta = buildBatchMeta(out)
	}
	padded := align8(int64(len(meta)) + 8)
	// The message is transient memory too (not zeroed: every byte is written below,
	// padding included); the file builder returns it once the file is assembled.
	msg := scratch.Allocate(int(padded + out.BodyLen))
	binary.LittleEndian.PutUint32(msg, 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(msg[4:], uint32(padded-8))
	clear(msg[8+copy(msg[8:], meta) : padded])
	for i, part := range parts {
		at := padded + out.Buffers[i].Offset
		end := padded + out.BodyLen
		if i+1 < len(parts) {
			end = padded + out.Buffers[i+1].Offset
		}
		clear(msg[at+int64(copy(msg[at:], part)) : end])
	}
	return encodedBatch{msg: msg, metaLen: int32(padded), bodyLen: out.BodyLen}, nil
}

// compressRoom is the capacity a buffer of n bytes is compressed into: its 8-byte length
// prefix and at least the worst case of every codec here (ZSTD_compressBound is n +
// n/256 + 64 at most, an LZ4 frame of 64 KiB blocks n + n/255 + 4 a block + 19), or the
// n raw bytes a buffer that does not shrink is stored as.
func compressRoom(n int) int { return 8 + n + n>>7 + 1024 }

func sameBuffers(a, b []ipcBuffer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bufferBytes matches the captured body writes to the metadata's buffers as arrow-go's
// SerializeBody makes them: for every buffer of positive length, one write of exactly its
// bytes, then one write of padding when its length is not a multiple of 8.
func bufferBytes(bm *batchMeta, writes [][]byte) ([][]byte, error) {
	out := make([][]byte, len(bm.Buffers))
	k := 0
	for i, b := range bm.Buffers {
		if b.Length == 0 {
			continue
		}
		if k >= len(writes) || int64(len(writes[k])) != b.Length {
			return nil, fmt.Errorf("record batch body: buffer %d of %d bytes has no matching write", i, b.Length)
		}
		out[i] = writes[k]
		k++
		if pad := align8(b.Length) - b.Length; pad > 0 {
			if k >= len(writes) || int64(len(writes[k])) != pad {
				return nil, fmt.Errorf("record batch body: buffer %d is not followed by %d bytes of padding", i, pad)
			}
			k++
		}
	}
	if k != len(writes) {
		return nil, fmt.Errorf("record batch body: %d writes, %d expected", len(writes), k)
	}
	return out, nil
}

// fileFrame is what surrounds the record batches of a data file of one schema: the magic
// and schema message before them, and the end-of-stream marker and footer (schema, no
// record batches yet) after them, as arrow-go writes an empty file.
type fileFrame struct {
	header []byte // magic, padding, schema message
	eos    []byte // end-of-stream marker
	footer []byte // footer flatbuffer of the empty file
	// recsField is the position in footer of the Footer table's recordBatches offset.
	recsField int
}

var eosMarker = []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}

func newFileFrame(schema *arrow.Schema, mem memory.Allocator) (*fileFrame, error) {
	var buf bytes.Buffer
	fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err != nil {
		return nil, err
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	n := len(b)
	if n < 8+ipcTrailerLen || string(b[n-len(ipcMagic):]) != ipcMagic {
		return nil, errors.New("empty file has no trailer")
	}
	footerLen := int(int32(binary.LittleEndian.Uint32(b[n-ipcTrailerLen:])))
	footerStart := n - ipcTrailerLen - footerLen
	if footerLen <= 0 || footerStart < 8+len(eosMarker) || footerStart%8 != 0 {
		return nil, fmt.Errorf("empty file footer of %d bytes at %d", footerLen, footerStart)
	}
	if !bytes.Equal(b[footerStart-len(eosMarker):footerStart], eosMarker) {
		return nil, errors.New("empty file has no end-of-stream marker before its footer")
	}
	f := &fileFrame{
		header: bytes.Clone(b[:footerStart-len(eosMarker)]),
		eos:    eosMarker,
		footer: bytes.Clone(b[footerStart : n-ipcTrailerLen]),
	}
	fi, err := parseFooter(f.footer)
	if err != nil {
		return nil, err
	}
	if len(fi.Batches) != 0 || fi.NumDicts != 0 {
		return nil, errors.New("empty file footer lists batches")
	}
	t := rootTable(f.footer)
	o := int(t.Offset(10)) // recordBatches
	if o == 0 {
		return nil, errors.New("empty file footer has no record batch vector")
	}
	f.recsField = int(t.Pos) + o
	return f, nil
}

// footerWith returns the frame's footer listing blocks: the record batch vector is
// appended after the empty file's footer and its offset redirected to it (flatbuffer
// offsets point forward, so the rest of the footer is unchanged and stays valid).
func (f *fileFrame) footerWith(blocks []ipcBlock) []byte {
	out := make([]byte, len(f.footer), len(f.footer)+8+4+len(blocks)*blockStructSize)
	copy(out, f.footer)
	for len(out)%8 != 4 { // the elements (8-byte aligned structs) follow the length word
		out = append(out, 0)
	}
	vec := len(out)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(blocks)))
	for _, b := range blocks {
		out = binary.LittleEndian.AppendUint64(out, uint64(b.Offset))
		out = binary.LittleEndian.AppendUint32(out, uint32(b.MetaLen))
		out = binary.LittleEndian.AppendUint32(out, 0)
		out = binary.LittleEndian.AppendUint64(out, uint64(b.BodyLen))
	}
	flatbuffers.WriteUOffsetT(out[f.recsField:], flatbuffers.UOffsetT(vec-f.recsField))
	return out
}
