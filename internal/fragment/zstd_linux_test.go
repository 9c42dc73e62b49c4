package fragment

import (
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time the calling OS thread has used (Linux RUSAGE_THREAD).
func threadCPU(b *testing.B) time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkZstdBackendsInterleaved encodes and decodes the flights buffers (batches of
// 65,536 rows) with every backend in turn, alternating which goes first, on one locked OS
// thread, and reports each backend's median MB per CPU-second of that thread over the b.N
// rounds: neither GC nor other processes' load on a shared machine enter the numbers,
// and both backends see the same conditions.
//
//	go test -run '^$' -bench ZstdBackendsInterleaved -benchtime 15x ./internal/fragment/
func BenchmarkZstdBackendsInterleaved(b *testing.B) {
	bufs, total := flightsBufferSet(b, DefaultMaxRowsPerBatch)
	frames := make([][]byte, len(bufs))
	dsts := make([][]byte, len(bufs))
	for i, src := range bufs {
		f, err := zstdBackend.appendFrame(nil, src, DefaultZstdLevel)
		if err != nil {
			b.Fatal(err)
		}
		frames[i], dsts[i] = f, make([]byte, len(src))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := len(zstdBackends)
	enc := make([][]float64, n)
	dec := make([][]float64, n)
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range n {
			j := (i + k) % n
			c := zstdBackends[j]
			t0 := threadCPU(b)
			for _, src := range bufs {
				if _, err := c.appendFrame(make([]byte, 0, len(src)/3+64), src, DefaultZstdLevel); err != nil {
					b.Fatal(err)
				}
			}
			t1 := threadCPU(b)
			for x, f := range frames {
				if err := c.decodeInto(dsts[x], f); err != nil {
					b.Fatal(err)
				}
			}
			t2 := threadCPU(b)
			enc[j] = append(enc[j], float64(total)/1e6/(t1-t0).Seconds())
			dec[j] = append(dec[j], float64(total)/1e6/(t2-t1).Seconds())
		}
	}
	median := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	for j, c := range zstdBackends {
		b.ReportMetric(median(enc[j]), "enc-MB/cpu-s-"+c.name())
		b.ReportMetric(median(dec[j]), "dec-MB/cpu-s-"+c.name())
	}
}
