package fragment

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// ZSTD backends. Every buffer is one ZSTD frame behind the IPC length prefix, whichever
// backend wrote it, so every backend and every Arrow reader (Arrow C++ uses
// ZSTD_decompress) reads what any of them wrote. With cgo, frames are written and
// checksum-verified frames are decoded by libzstd (zstd_cgo.go: github.com/DataDog/zstd,
// which compiles libzstd's C sources into the binary, about 2x faster to encode and 1.4-1.8x
// to decode than klauspost's fastest level on flights buffers); without cgo, or with the
// shale_purego build tag, by klauspost/compress (zstd_purego.go). Unverified bytes are
// always decoded by klauspost (decodeBounded): its output, and so its memory, grows with
// what the frames really hold, where libzstd's one-shot decode needs a buffer of the
// untrusted length prefix's size up front.

// zstdCodec is one ZSTD backend. Implementations are safe for concurrent use.
type zstdCodec interface {
	// name identifies the backend in tests and benchmarks.
	name() string
	// appendFrame appends src compressed as one ZSTD frame (no frame checksum) at level,
	// a zstd level from 1 to MaxZstdLevel, to dst.
	appendFrame(dst, src []byte, level int) ([]byte, error)
	// decodeInto decodes the frames of src, which passed a checksum, into exactly len(dst)
	// bytes: fewer or more is an error, and nothing past dst is written.
	decodeInto(dst, src []byte) error
}

// compressZstd appends src as one ZSTD frame at level to dst with the build's backend.
func compressZstd(dst, src []byte, level int) ([]byte, error) {
	return zstdBackend.appendFrame(dst, src, level)
}

// decompressZstdInto decodes verified src into exactly len(dst) bytes with the build's
// backend.
func decompressZstdInto(dst, src []byte) error {
	return zstdBackend.decodeInto(dst, src)
}

// zstdLevel validates a WriterOptions.CompressionLevel and returns the zstd level it means
// (0 is DefaultZstdLevel).
func zstdLevel(level int) (int, error) {
	if level == 0 {
		level = DefaultZstdLevel
	}
	if level < 1 || level > MaxZstdLevel {
		return 0, fmt.Errorf("%w: zstd level %d (want 1 to %d)", ErrBadLevel, level, MaxZstdLevel)
	}
	return level, nil
}

// klauspostZstd is the pure-Go backend. Its four encoder speeds cover the zstd levels as
// zstd.EncoderLevelFromZstd maps them: 1–2 fastest, 3–5 default, 6–9 better, 10–22 best.
type klauspostZstd struct{}

func (klauspostZstd) name() string { return "klauspost" }

// klauspostEncoders holds one stateless encoder per level, shared by every Writer
// (EncodeAll is safe for concurrent use; each call takes one of the encoder's GOMAXPROCS
// states).
var klauspostEncoders sync.Map // zstd.EncoderLevel → *zstd.Encoder

func klauspostEncoder(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	if e, ok := klauspostEncoders.Load(level); ok {
		return e.(*zstd.Encoder), nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(max(runtime.GOMAXPROCS(0), 2)))
	if err != nil {
		return nil, err
	}
	if prev, loaded := klauspostEncoders.LoadOrStore(level, e); loaded {
		return prev.(*zstd.Encoder), nil
	}
	return e, nil
}

func (klauspostZstd) appendFrame(dst, src []byte, level int) ([]byte, error) {
	e, err := klauspostEncoder(zstd.EncoderLevelFromZstd(level))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return e.EncodeAll(src, dst), nil
}

// klauspostTrusted decodes bytes that passed their CRC32C: a frame checksum (files written
// before this package compressed buffers itself have one) would check them a second time.
var klauspostTrusted = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxBufferBytes), zstd.IgnoreChecksum(true))
})

func (klauspostZstd) decodeInto(dst, src []byte) error {
	dec, err := klauspostTrusted()
	if err != nil {
		return err
	}
	got, err := dec.DecodeAll(src, dst[:0:len(dst)]) // capped: dst is part of a body other goroutines fill
	if err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	if len(got) != len(dst) || (len(got) > 0 && &got[0] != &dst[0]) {
		return fmt.Errorf("zstd: decoded %d bytes, length prefix says %d", len(got), len(dst))
	}
	return nil
}
