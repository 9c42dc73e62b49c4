//go:build cgo && !shale_purego

package fragment

import (
	"fmt"
	"testing"

	ddzstd "github.com/DataDog/zstd"
)

// TestCgoBuildUsesLibzstd: a cgo build without shale_purego writes with libzstd and still
// has klauspost for unverified bytes and the cross-backend tests.
func TestCgoBuildUsesLibzstd(t *testing.T) {
	if zstdBackend.name() != "libzstd" || len(zstdBackends) != 2 || zstdBackends[1].name() != "klauspost" {
		t.Fatalf("backend %s, compiled in %d", zstdBackend.name(), len(zstdBackends))
	}
}

// BenchmarkLibzstdContexts compares libzstd's stateless calls (ZSTD_compress and
// ZSTD_decompress create and free a context per call) with the backend's pooled contexts.
func BenchmarkLibzstdContexts(b *testing.B) {
	for _, batchRows := range []int{DefaultMaxRowsPerBatch, 4096} {
		bufs, total := flightsBufferSet(b, batchRows)
		frames := make([][]byte, len(bufs))
		dsts := make([][]byte, len(bufs))
		for i, src := range bufs {
			f, err := ddzstd.CompressLevel(nil, src, 1)
			if err != nil {
				b.Fatal(err)
			}
			frames[i] = f
			dsts[i] = make([]byte, len(src))
		}
		b.Run(fmt.Sprintf("encode/rows=%d/stateless", batchRows), func(b *testing.B) {
			b.SetBytes(total)
			defer cpuRate(b, total)()
			for i := 0; i < b.N; i++ {
				for _, src := range bufs {
					f, err := ddzstd.CompressLevel(nil, src, 1)
					if err != nil {
						b.Fatal(err)
					}
					_ = append(make([]byte, 0, len(src)/3+64), f...)
				}
			}
		})
		b.Run(fmt.Sprintf("encode/rows=%d/pooled", batchRows), func(b *testing.B) {
			b.SetBytes(total)
			defer cpuRate(b, total)()
			for i := 0; i < b.N; i++ {
				for _, src := range bufs {
					if _, err := (libzstd{}).appendFrame(make([]byte, 0, len(src)/3+64), src, 1); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("decode/rows=%d/stateless", batchRows), func(b *testing.B) {
			b.SetBytes(total)
			defer cpuRate(b, total)()
			for i := 0; i < b.N; i++ {
				for j, f := range frames {
					if _, err := ddzstd.DecompressInto(dsts[j], f); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("decode/rows=%d/pooled", batchRows), func(b *testing.B) {
			b.SetBytes(total)
			defer cpuRate(b, total)()
			for i := 0; i < b.N; i++ {
				for j, f := range frames {
					if err := (libzstd{}).decodeInto(dsts[j], f); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
