package fragment

import (
	"fmt"
	"runtime/debug"
	"syscall"
	"testing"
)

// minorFaults is the process's minor page faults so far.
func minorFaults(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Minflt
}

// BenchmarkZstdDecodeMemory decodes the flights buffers of 1M rows (65,536-row batches)
// with the build's backend into three kinds of output memory: the same buffers every
// round (reused), a new Go allocation per buffer (fresh: what a full scan's Decode does),
// and a new allocation after the heap was returned to the OS (cold: what the first scan
// after debug.FreeOSMemory does; the return is outside the timer). The difference is the
// cost of the memory, not of zstd: page faults (minflt/op) and zeroing, much of it in the
// kernel (sys-ms/op).
//
//	go test -run '^$' -bench ZstdDecodeMemory -benchtime 20x ./internal/fragment/
func BenchmarkZstdDecodeMemory(b *testing.B) {
	bufs, total := flightsBufferSet(b, DefaultMaxRowsPerBatch)
	frames := make([][]byte, len(bufs))
	for i, src := range bufs {
		f, err := zstdBackend.appendFrame(nil, src, DefaultZstdLevel)
		if err != nil {
			b.Fatal(err)
		}
		frames[i] = f
	}
	for _, mode := range []string{"reused", "fresh", "cold"} {
		b.Run(fmt.Sprintf("%s/%s", mode, zstdBackend.name()), func(b *testing.B) {
			dsts := make([][]byte, len(bufs))
			for i, src := range bufs {
				dsts[i] = make([]byte, len(src))
			}
			b.SetBytes(total)
			var faults, sys int64
			done := cpuRate(b, total)
			for i := 0; i < b.N; i++ {
				if mode == "cold" {
					b.StopTimer()
					clear(dsts)
					debug.FreeOSMemory()
					b.StartTimer()
				}
				f0, s0 := minorFaults(b), sysTime(b)
				for j, f := range frames {
					if mode != "reused" {
						dsts[j] = make([]byte, len(bufs[j]))
					}
					if err := zstdBackend.decodeInto(dsts[j], f); err != nil {
						b.Fatal(err)
					}
				}
				faults += minorFaults(b) - f0
				sys += sysTime(b) - s0
			}
			done()
			b.ReportMetric(float64(faults)/float64(b.N), "minflt/op")
			b.ReportMetric(float64(sys)/1e6/float64(b.N), "sys-ms/op")
		})
	}
}

// sysTime is the process's system CPU time in nanoseconds.
func sysTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Stime.Nano()
}
