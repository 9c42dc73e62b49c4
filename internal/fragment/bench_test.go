package fragment

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Benchmarks: 1M rows of (int64, string, float64, timestamp[us]) written and read through
// this package (in-memory store, so the store costs little) against arrow-go's raw IPC
// file encode/decode of the same records into and out of a bytes.Buffer. MB/s is over the
// uncompressed IPC size of the rows, the same number for every variant, so the rates
// compare directly.
//
//	go test -run '^$' -bench . -benchtime 5x ./internal/fragment/

const benchRows = 1 << 20

var benchData struct {
	once     sync.Once
	recs     []arrow.RecordBatch // 16 records of 65536 rows
	rawBytes int64               // uncompressed IPC file size
}

func benchRecords(b *testing.B) ([]arrow.RecordBatch, int64) {
	benchData.once.Do(func() {
		for first := 0; first < benchRows; first += DefaultMaxRowsPerBatch {
			benchData.recs = append(benchData.recs, scanRecord(first, DefaultMaxRowsPerBatch))
		}
		benchData.rawBytes = int64(len(rawIPC(b, benchData.recs, CompressionNone)))
	})
	return benchData.recs, benchData.rawBytes
}

func rawIPC(b *testing.B, recs []arrow.RecordBatch, c Compression) []byte {
	var buf bytes.Buffer
	opts := []ipc.Option{ipc.WithSchema(recs[0].Schema()), ipc.WithAllocator(memory.DefaultAllocator)}
	switch c {
	case CompressionZstd:
		opts = append(opts, ipc.WithZstd())
	case CompressionLZ4:
		opts = append(opts, ipc.WithLZ4())
	}
	w, err := ipc.NewFileWriter(&buf, opts...)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

var benchCodecs = []Compression{CompressionZstd, CompressionLZ4, CompressionNone}

func BenchmarkWrite1M(b *testing.B) {
	recs, raw := benchRecords(b)
	for _, c := range benchCodecs {
		for _, kind := range []string{"mem", "local"} {
			b.Run(string(c)+"/"+kind, func(b *testing.B) {
				s := memStore(b)
				if kind == "local" {
					s = fileStore(b)
				}
				b.SetBytes(raw)
				b.ReportAllocs()
				var size int64
				for i := 0; i < b.N; i++ {
					w, err := NewWriter(context.Background(), s, "bench/data", recs[0].Schema(), []int32{1, 2, 3, 4}, WriterOptions{Compression: c})
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range recs {
						if err := w.Write(r); err != nil {
							b.Fatal(err)
						}
					}
					files, err := w.Close()
					if err != nil {
						b.Fatal(err)
					}
					size = files[0].Size
					b.StopTimer()
					for _, f := range files {
						s.Delete(context.Background(), f.Key)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(size), "file_bytes")
			})
		}
	}
}

func BenchmarkRawIPCEncode1M(b *testing.B) {
	recs, raw := benchRecords(b)
	for _, c := range benchCodecs {
		b.Run(string(c), func(b *testing.B) {
			b.SetBytes(raw)
			b.ReportAllocs()
			var size int
			for i := 0; i < b.N; i++ {
				size = len(rawIPC(b, recs, c))
			}
			b.ReportMetric(float64(size), "file_bytes")
		})
	}
}

func BenchmarkRead1M(b *testing.B) {
	recs, raw := benchRecords(b)
	for _, c := range benchCodecs {
		s := memStore(b)
		w, err := NewWriter(context.Background(), s, "bench/data", recs[0].Schema(), []int32{1, 2, 3, 4}, WriterOptions{Compression: c})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		files, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, proj := range []struct {
			name string
			cols []int
		}{{"all", nil}, {"id", []int{0}}, {"name", []int{1}}} {
			b.Run(string(c)+"/"+proj.name, func(b *testing.B) {
				b.SetBytes(raw) // logical bytes of the whole table, so projections show their gain
				b.ReportAllocs()
				before := s.Counters().Snapshot()
				for i := 0; i < b.N; i++ {
					fr, err := OpenFile(context.Background(), s, files[0], memory.DefaultAllocator)
					if err != nil {
						b.Fatal(err)
					}
					for j := 0; j < fr.NumBatches(); j++ {
						r, err := fr.ReadBatch(j, proj.cols)
						if err != nil {
							b.Fatal(err)
						}
						r.Release()
					}
					fr.Close()
				}
				d := s.Counters().Snapshot().Sub(before)
				b.ReportMetric(float64(d.Total())/float64(b.N), "requests/op")
				b.ReportMetric(float64(d.BytesRead)/float64(b.N), "bytes_read/op")
			})
		}
	}
}

func BenchmarkRawIPCDecode1M(b *testing.B) {
	recs, raw := benchRecords(b)
	for _, c := range benchCodecs {
		data := rawIPC(b, recs, c)
		b.Run(string(c), func(b *testing.B) {
			b.SetBytes(raw)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				fr, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(memory.DefaultAllocator))
				if err != nil {
					b.Fatal(err)
				}
				for j := 0; j < fr.NumRecords(); j++ {
					r, err := fr.RecordBatchAt(j)
					if err != nil {
						b.Fatal(err)
					}
					r.Release()
				}
				fr.Close()
			}
		})
	}
}
