package fragment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Buffer decompression for the direct read path. arrow-go creates a streaming zstd decoder
// per record batch (with per-core goroutines and window buffers), which dominated the cost
// of small and projected reads (full reads were 2-3x slower), and it allocates whatever a
// buffer's length prefix claims, so one flipped prefix byte in an unchecked file can
// exhaust memory. Here every buffer is decoded with the build's zstd backend (zstd.go) or
// a pooled LZ4 frame reader into one body that arrow then loads without a codec. Bytes
// verified against the writer's CRC32C are trusted (decoded in place); unverified bytes
// are decoded with output bounded by what the frames really hold (klauspost's stateless
// DecodeAll, whatever the backend).

// IPC BodyCompression codecs (format/Message.fbs CompressionType).
const (
	codecLZ4Frame = 0
	codecZstd     = 1
)

// maxBufferBytes bounds one decoded buffer (4 GiB).
const maxBufferBytes = 1 << 32

var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxBufferBytes))
})

// decodeHelpers bounds the goroutines decoding a batch's large buffers beside the batch's
// own goroutine (one batch's columns decode in parallel when a core is free).
var decodeHelpers = make(helpers, max(runtime.GOMAXPROCS(0)-1, 1))

var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

// decompressBody returns m and body rewritten without compression: every buffer is
// decoded (or copied, when stored raw behind the -1 length prefix) to an 8-aligned offset
// of a new body from newBody (nil: make; its bytes need not be zeroed). verified says
// the bytes passed their checksum.
func decompressBody(m batchMeta, body []byte, verified bool, newBody func(n int) []byte) (batchMeta, []byte, error) {
	if !m.HasCodec {
		return m, body, nil
	}
	if m.Codec != codecZstd && m.Codec != codecLZ4Frame {
		return m, nil, fmt.Errorf("unknown compression codec %d", m.Codec)
	}
	sizes := make([]int64, len(m.Buffers))
	raw := make([]bool, len(m.Buffers))
	for i, b := range m.Buffers {
		if b.Length == 0 {
			continue
		}
		if b.Length < 8 {
			return m, nil, fmt.Errorf("compressed buffer %d is %d bytes, shorter than its length prefix", i, b.Length)
		}
		n := int64(binary.LittleEndian.Uint64(body[b.Offset:]))
		if n == -1 {
			n, raw[i] = b.Length-8, true
		}
		if n < 0 || n > maxBufferBytes {
			return m, nil, fmt.Errorf("buffer %d claims %d uncompressed bytes", i, n)
		}
		sizes[i] = n
	}
	src := func(i int) []byte { b := m.Buffers[i]; return body[b.Offset+8 : b.Offset+b.Length] }

	parts := make([][]byte, len(m.Buffers))
	if !verified { // decode first, with output bounded by the frames, then lay out
		for i, b := range m.Buffers {
			if b.Length == 0 || raw[i] {
				continue
			}
			p, err := decodeBounded(m.Codec, src(i), sizes[i])
			if err != nil {
				return m, nil, fmt.Errorf("buffer %d: %w", i, err)
			}
			parts[i] = p
		}
	}
	var total int64
	for _, n := range sizes {
		total += align8(n)
	}
	var out []byte
	if newBody != nil {
		out = newBody(int(total))
	} else {
		out = make([]byte, total)
	}
	nm := m
	nm.HasCodec = false
	nm.Buffers = make([]ipcBuffer, len(m.Buffers))
	var pos int64
	errs := make([]error, len(m.Buffers))
	var wg sync.WaitGroup
	for i, b := range m.Buffers {
		nm.Buffers[i] = ipcBuffer{Offset: pos, Length: sizes[i]}
		if b.Length == 0 {
			continue
		}
		dst := out[pos : pos+sizes[i]]
		clear(out[pos+sizes[i] : pos+align8(sizes[i])]) // padding (newBody's bytes may be old)
		switch {
		case raw[i]:
			copy(dst, src(i))
		case parts[i] != nil:
			copy(dst, parts[i])
		case sizes[i] >= helpMinBytes:
			decodeHelpers.do(&wg, func() { errs[i] = decodeInto(m.Codec, dst, src(i)) })
		default:
			errs[i] = decodeInto(m.Codec, dst, src(i))
		}
		pos += align8(sizes[i])
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return m, nil, fmt.Errorf("buffer %d: %w", i, err)
		}
	}
	nm.BodyLen = int64(len(out))
	return nm, out, nil
}

// decodeInto decodes src, which passed its checksum, into exactly len(dst) bytes.
func decodeInto(codec int8, dst, src []byte) error {
	if codec == codecZstd {
		return decompressZstdInto(dst, src)
	}
	zr := lz4Readers.Get().(*lz4.Reader)
	defer lz4Readers.Put(zr)
	zr.Reset(bytes.NewReader(src))
	if _, err := io.ReadFull(zr, dst); err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	if n, _ := zr.Read(make([]byte, 1)); n != 0 {
		return fmt.Errorf("lz4: more than the %d bytes the length prefix says", len(dst))
	}
	return nil
}

// decodeBounded decodes src without trusting want for the allocation: memory grows with
// the output the frame really produces, and a result of another length is an error.
func decodeBounded(codec int8, src []byte, want int64) ([]byte, error) {
	initial := min(want, 8*int64(len(src))+64<<10)
	if codec == codecZstd {
		dec, err := zstdDecoder()
		if err != nil {
			return nil, err
		}
		got, err := dec.DecodeAll(src, make([]byte, 0, initial))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		if int64(len(got)) != want {
			return nil, fmt.Errorf("zstd: decoded %d bytes, length prefix says %d", len(got), want)
		}
		return got, nil
	}
	zr := lz4Readers.Get().(*lz4.Reader)
	defer lz4Readers.Put(zr)
	zr.Reset(bytes.NewReader(src))
	buf := bytes.NewBuffer(make([]byte, 0, initial))
	if _, err := io.Copy(buf, io.LimitReader(zr, want+1)); err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	if int64(buf.Len()) != want {
		return nil, fmt.Errorf("lz4: decoded %d bytes, length prefix says %d", buf.Len(), want)
	}
	return buf.Bytes(), nil
}
