//go:build cgo && !shale_purego

package fragment

import (
	"fmt"
	"sync"

	ddzstd "github.com/DataDog/zstd"
)

// zstdBackend is libzstd when cgo is on (build with -tags shale_purego or CGO_ENABLED=0
// for klauspost/compress).
var zstdBackend zstdCodec = libzstd{}

// zstdBackends are the backends compiled into this build, the build's own first.
var zstdBackends = []zstdCodec{libzstd{}, klauspostZstd{}}

// libzstd is the cgo backend: libzstd's one-shot ZSTD_compressCCtx and
// ZSTD_decompressDCtx, with contexts reused across calls.
type libzstd struct{}

func (libzstd) name() string { return "libzstd" }

// libzstdCtxs are idle compression and decompression contexts. A context is used by one
// goroutine at a time; reusing one skips allocating and initialising its tables (a
// buffer of a few KB otherwise spends more on its context than on its bytes). The pool
// lets the GC drop idle ones: their finalizer frees the C memory.
var libzstdCtxs = sync.Pool{New: func() any { return ddzstd.NewCtx() }}

// libzstdScratch holds output buffers of ZSTD_compressBound size (libzstd wants room for
// the worst case, while callers size dst for the expected compressed size).
var libzstdScratch sync.Pool // *[]byte

// maxPooledScratch bounds the scratch buffers kept for reuse.
const maxPooledScratch = 16 << 20

func (libzstd) appendFrame(dst, src []byte, level int) ([]byte, error) {
	bound := ddzstd.CompressBound(len(src))
	ctx := libzstdCtxs.Get().(ddzstd.Ctx)
	defer libzstdCtxs.Put(ctx)
	if cap(dst)-len(dst) >= bound { // compress in place after dst's bytes
		out, err := ctx.CompressLevel(dst[len(dst):], src, level)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return dst[:len(dst)+len(out)], nil
	}
	var buf []byte
	p, _ := libzstdScratch.Get().(*[]byte)
	if p != nil && cap(*p) >= bound {
		buf = *p
	} else {
		buf = make([]byte, bound)
	}
	out, err := ctx.CompressLevel(buf, src, level)
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	dst = append(dst, out...)
	if cap(buf) <= maxPooledScratch {
		if p == nil {
			p = new([]byte)
		}
		*p = buf[:0]
		libzstdScratch.Put(p)
	}
	return dst, nil
}

func (libzstd) decodeInto(dst, src []byte) error {
	if len(src) == 0 { // no frame: zero bytes (the C call needs a non-empty slice)
		if len(dst) != 0 {
			return fmt.Errorf("zstd: decoded 0 bytes, length prefix says %d", len(dst))
		}
		return nil
	}
	out := dst
	if len(dst) == 0 {
		out = make([]byte, 1) // room to learn that a frame holds more than nothing
	}
	ctx := libzstdCtxs.Get().(ddzstd.Ctx)
	defer libzstdCtxs.Put(ctx)
	n, err := ctx.DecompressInto(out, src)
	if err != nil {
		if ddzstd.IsDstSizeTooSmallError(err) {
			return fmt.Errorf("zstd: more than the %d bytes the length prefix says", len(dst))
		}
		return fmt.Errorf("zstd: %w", err)
	}
	if n != len(dst) {
		return fmt.Errorf("zstd: decoded %d bytes, length prefix says %d", n, len(dst))
	}
	return nil
}
