package fragment

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/flightstest"
	"github.com/shale-db/shale/store"
)

// flightsRecords is the first rows rows of the bundled flights data as records of at most
// batchRows rows (internal/flightstest).
func flightsRecords(t testing.TB, rows, batchRows int) []arrow.RecordBatch {
	t.Helper()
	_, recs := flightstest.Batches(t, rows, batchRows)
	return recs
}

// ipcBuffers returns the buffers encodeBatch compresses for rec: arrow-go's uncompressed
// layout, one slice per non-empty buffer.
func ipcBuffers(t testing.TB, rec arrow.RecordBatch) [][]byte {
	t.Helper()
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	meta := p.Meta()
	defer meta.Release()
	bm, err := parseBatchMeta(meta.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var body bodyCapture
	if err := p.SerializeBody(&body); err != nil {
		t.Fatal(err)
	}
	bufs, err := bufferBytes(&bm, body.writes)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, b := range bufs {
		if len(b) > 0 {
			out = append(out, bytes.Clone(b))
		}
	}
	return out
}

// TestZstdBackendsInteroperate: a frame written by each backend compiled into this build
// (with cgo: libzstd and klauspost) decodes with each backend and with the bounded
// decoder of unverified bytes to the same bytes, for flights buffers (one batch of
// 600,000 rows, so its 8-byte columns are 4.8 MB), an empty buffer, a few bytes, random
// bytes and zeros; a decode into the wrong length fails without writing past its
// destination, and a truncated frame fails.
func TestZstdBackendsInteroperate(t *testing.T) {
	for _, c := range zstdBackends {
		t.Logf("backend compiled in: %s", c.name())
	}
	if zstdBackends[0] != zstdBackend {
		t.Fatalf("zstdBackends[0] is %s, the build's backend is %s", zstdBackends[0].name(), zstdBackend.name())
	}
	r := rand.New(rand.NewPCG(7, 13))
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	inputs := map[string][]byte{
		"empty":  {},
		"tiny":   []byte("shale"),
		"random": random,
		"zeros":  make([]byte, 5<<20),
	}
	var large int
	for _, rec := range flightsRecords(t, 600_000, 600_000) {
		for i, b := range ipcBuffers(t, rec) {
			inputs[fmt.Sprintf("flights-%d", i)] = b
			if len(b) > 4<<20 {
				large++
			}
		}
	}
	if large == 0 {
		t.Fatal("no flights buffer is larger than 4 MB")
	}
	prefix := []byte("prefix")
	for name, src := range inputs {
		levels := []int{1, 3}
		if len(src) < 64<<10 {
			levels = append(levels, 19, MaxZstdLevel)
		}
		for _, enc := range zstdBackends {
			for _, level := range levels {
				framed, err := enc.appendFrame(bytes.Clone(prefix), src, level)
				if err != nil {
					t.Fatalf("%s: %s level %d: %v", name, enc.name(), level, err)
				}
				if !bytes.Equal(framed[:len(prefix)], prefix) {
					t.Fatalf("%s: %s level %d overwrote dst's bytes", name, enc.name(), level)
				}
				frame := framed[len(prefix):]
				if name == "zeros" && len(frame) > len(src)/100 {
					t.Fatalf("%s: %s level %d: %d bytes of zeros took %d", name, enc.name(), level, len(src), len(frame))
				}
				for _, dec := range zstdBackends {
					what := fmt.Sprintf("%s (%d bytes): %s level %d → %s", name, len(src), enc.name(), level, dec.name())
					checkDecode(t, what, dec, frame, src, level == 1)
				}
				got, err := decodeBounded(codecZstd, frame, int64(len(src)))
				if err != nil || !bytes.Equal(got, src) {
					t.Fatalf("%s (%d bytes): %s level %d → bounded: %d bytes, %v", name, len(src), enc.name(), level, len(got), err)
				}
			}
		}
	}
}

// checkDecode decodes frame with dec into exactly len(want) bytes and, when wrong is set,
// into one byte more and one byte less (errors, with a guard byte after the destination
// unchanged) and truncated (an error).
func checkDecode(t *testing.T, what string, dec zstdCodec, frame, want []byte, wrong bool) {
	t.Helper()
	const guard = 0xA5
	for _, n := range []int{len(want), len(want) + 1, len(want) - 1} {
		if n < 0 || (n != len(want) && !wrong) {
			continue
		}
		buf := make([]byte, n+1)
		buf[n] = guard
		err := dec.decodeInto(buf[:n], frame)
		if buf[n] != guard {
			t.Fatalf("%s: decoding into %d bytes wrote past them", what, n)
		}
		if n == len(want) {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !bytes.Equal(buf[:n], want) {
				t.Fatalf("%s: decoded bytes differ", what)
			}
		} else if err == nil {
			t.Fatalf("%s: decoding into %d bytes (want %d) succeeded", what, n, len(want))
		}
	}
	if wrong && len(frame) > 1 {
		if err := dec.decodeInto(make([]byte, len(want)), frame[:len(frame)-1]); err == nil {
			t.Fatalf("%s: a frame missing its last byte decoded", what)
		}
	}
}

// withZstdBackend runs f with c as the build's backend (tests here run one at a time).
func withZstdBackend(c zstdCodec, f func()) {
	prev := zstdBackend
	zstdBackend = c
	defer func() { zstdBackend = prev }()
	f()
}

// TestZstdFilesReadAcrossBackends: a data file of flights rows written with each backend
// reads back as its input through this package's reader with each backend and through
// arrow-go's own IPC reader (which decodes with klauspost).
func TestZstdFilesReadAcrossBackends(t *testing.T) {
	recs := flightsRecords(t, 200_000, 50_000)
	want := concatRecords(t, recs)
	defer want.Release()
	for _, enc := range zstdBackends {
		s := memStore(t)
		var files []DataFile
		withZstdBackend(enc, func() {
			files = writeRecords(t, s, "t/data", recs[0].Schema(), recs, WriterOptions{MaxRowsPerBatch: 65536})
		})
		for _, dec := range zstdBackends {
			withZstdBackend(dec, func() {
				got := readAll(t, s, files)
				defer got.Release()
				recordsEqual(t, want, got)
			})
		}
		for _, df := range files {
			data, err := s.Get(context.Background(), df.Key)
			if err != nil {
				t.Fatal(err)
			}
			viaArrow := readWithArrow(t, data)
			if viaArrow.NumRows() != df.Rows {
				t.Fatalf("%s: arrow-go read %d rows of %d", enc.name(), viaArrow.NumRows(), df.Rows)
			}
			viaArrow.Release()
		}
	}
}

// TestZstdBackendConcurrentUse: many goroutines compressing and decoding at once with the
// build's backend (pooled contexts) get their own bytes back.
func TestZstdBackendConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := make([]byte, 200_000+g*1000)
			for i := range src {
				src[i] = byte(i*g) ^ byte(i>>7)
			}
			for range 50 {
				frame, err := compressZstd(binary.LittleEndian.AppendUint64(nil, uint64(g)), src, 1+g%3)
				if err != nil {
					errs <- err
					return
				}
				dst := make([]byte, len(src))
				if err := decompressZstdInto(dst, frame[8:]); err != nil || !bytes.Equal(dst, src) {
					errs <- fmt.Errorf("goroutine %d: %v (bytes equal %v)", g, err, bytes.Equal(dst, src))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestZstdFilesReadByPyarrow: files written with each backend read back in pyarrow (Arrow
// C++, which decodes with libzstd's ZSTD_decompress) as the flights rows they were written
// from. It runs where SHALE_PYTHON names a Python with pyarrow (benchmarks/peers' venv has
// one) and is skipped elsewhere.
func TestZstdFilesReadByPyarrow(t *testing.T) {
	py := os.Getenv("SHALE_PYTHON")
	if py == "" {
		t.Skip("SHALE_PYTHON (a Python with pyarrow) not set")
	}
	const rows = 200_000
	recs := flightsRecords(t, rows, 50_000)
	dir := t.TempDir()
	s, err := store.Open(context.Background(), "file://"+dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, enc := range zstdBackends {
		for _, level := range []int{1, 7} {
			var files []DataFile
			withZstdBackend(enc, func() {
				files = writeRecords(t, s, fmt.Sprintf("%s-%d", enc.name(), level), recs[0].Schema(), recs,
					WriterOptions{CompressionLevel: level, MaxRowsPerBatch: 30_000, MaxRowsPerFile: 120_000})
			})
			paths := make([]string, len(files))
			for i, df := range files {
				paths[i] = filepath.Join(dir, filepath.FromSlash(df.Key))
			}
			script := `
import sys, pyarrow as pa, pyarrow.ipc as ipc, pyarrow.parquet as pq
rows, data, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
got = pa.concat_tables([ipc.open_file(p).read_all() for p in paths])
want = pq.read_table(data).slice(0, rows)
assert got.num_rows == rows, got.num_rows
for name in want.column_names:
    g = got.column(name).combine_chunks()
    w = want.column(name).combine_chunks()
    assert g.equals(w.cast(g.type)), name
print("pyarrow read", got.num_rows, "rows from", len(paths), "files")
`
			args := append([]string{"-c", script, strconv.Itoa(rows), "../../testdata/flights-3m.parquet"}, paths...)
			out, err := exec.Command(py, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s level %d: pyarrow: %v\n%s", enc.name(), level, err, out)
			}
			t.Logf("%s level %d: %s", enc.name(), level, bytes.TrimSpace(out))
		}
	}
}
