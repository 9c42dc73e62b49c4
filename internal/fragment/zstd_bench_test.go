package fragment

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// Benchmarks of the ZSTD backends on flights buffers: the buffers encodeBatch compresses
// for the first 1M rows of testdata/flights-3m.parquet in batches of batchRows rows.
// MB/s is over the uncompressed buffer bytes; "ratio" is compressed ÷ uncompressed.
// "MB/cpu-s" divides the same bytes by the process's CPU time (user + system) over the
// timed loop, the number to read on a shared machine, where wall time waits for a core.
//
//	go test -run '^$' -bench ZstdBackends -benchtime 20x ./internal/fragment/
//	go test -tags shale_purego ... (klauspost alone)

func flightsBufferSet(b *testing.B, batchRows int) ([][]byte, int64) {
	var bufs [][]byte
	var total int64
	for _, rec := range flightsRecords(b, 1<<20, batchRows) {
		for _, buf := range ipcBuffers(b, rec) {
			bufs = append(bufs, buf)
			total += int64(len(buf))
		}
	}
	return bufs, total
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuRate starts measuring; the function it returns reports MB/cpu-s for b.N rounds of
// total bytes.
func cpuRate(b *testing.B, total int64) func() {
	start := processCPU(b)
	return func() {
		if cpu := processCPU(b) - start; cpu > 0 {
			b.ReportMetric(float64(total)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
		}
	}
}

func BenchmarkZstdBackends(b *testing.B) {
	for _, batchRows := range []int{DefaultMaxRowsPerBatch, 4096} {
		bufs, total := flightsBufferSet(b, batchRows)
		for _, c := range zstdBackends {
			b.Run(fmt.Sprintf("encode/rows=%d/%s", batchRows, c.name()), func(b *testing.B) {
				b.SetBytes(total)
				b.ReportAllocs()
				var out int
				defer cpuRate(b, total)()
				for i := 0; i < b.N; i++ {
					out = 0
					for _, src := range bufs {
						f, err := c.appendFrame(make([]byte, 0, len(src)/3+64), src, DefaultZstdLevel)
						if err != nil {
							b.Fatal(err)
						}
						out += len(f)
					}
				}
				b.ReportMetric(float64(out)/float64(total), "ratio")
			})
			b.Run(fmt.Sprintf("encode-parallel/rows=%d/%s", batchRows, c.name()), func(b *testing.B) {
				b.SetBytes(total)
				defer cpuRate(b, total)()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						for _, src := range bufs {
							if _, err := c.appendFrame(make([]byte, 0, len(src)/3+64), src, DefaultZstdLevel); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
			})
		}
		// Decoding: frames written by the build's backend (level 1), as in new files.
		frames := make([][]byte, len(bufs))
		for i, src := range bufs {
			f, err := zstdBackend.appendFrame(nil, src, DefaultZstdLevel)
			if err != nil {
				b.Fatal(err)
			}
			frames[i] = f
		}
		for _, c := range zstdBackends {
			b.Run(fmt.Sprintf("decode/rows=%d/%s", batchRows, c.name()), func(b *testing.B) {
				dsts := make([][]byte, len(bufs))
				for i, src := range bufs {
					dsts[i] = make([]byte, len(src))
				}
				b.SetBytes(total)
				b.ReportAllocs()
				defer cpuRate(b, total)()
				for i := 0; i < b.N; i++ {
					for j, f := range frames {
						if err := c.decodeInto(dsts[j], f); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
			b.Run(fmt.Sprintf("decode-parallel/rows=%d/%s", batchRows, c.name()), func(b *testing.B) {
				b.SetBytes(total)
				defer cpuRate(b, total)()
				b.RunParallel(func(pb *testing.PB) {
					dsts := make([][]byte, len(bufs))
					for i, src := range bufs {
						dsts[i] = make([]byte, len(src))
					}
					for pb.Next() {
						for j, f := range frames {
							if err := c.decodeInto(dsts[j], f); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
			})
		}
	}
}
