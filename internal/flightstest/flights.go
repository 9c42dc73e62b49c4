// Package flightstest reads the bundled U.S. flights data (testdata/flights-3m.parquet:
// 3,000,000 rows of date timestamp[us], delay and distance int64, origin and destination
// large_string) for tests and benchmarks, and any Parquet file as another tool would read
// it (ReadParquet), so that each package's tests need not carry their own Parquet reader.
package flightstest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Path returns the path of testdata/flights-3m.parquet in this module (found from the
// working directory upwards: a test runs in its package's directory), or of the team's
// shared copy (../shared/data beside the module) when the module has none. It skips t
// when neither exists.
func Path(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			for _, p := range []string{
				filepath.Join(dir, "testdata", "flights-3m.parquet"),
				filepath.Join(dir, "..", "shared", "data", "flights-3m.parquet"),
			} {
				if _, err := os.Stat(p); err == nil {
					return p
				}
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Skip("flights-3m.parquet not found")
	return ""
}

// Batches reads the first rows rows of the flights data as record batches of at most
// batchRows rows each (pqarrow, batch size batchRows; a batch the reader returns longer is
// sliced), in file order. The batches are released when t ends. Errors fail t.
func Batches(t testing.TB, rows, batchRows int) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	f, err := os.Open(Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []arrow.RecordBatch
	left := int64(rows)
	for left > 0 && rdr.Next() {
		rec := rdr.RecordBatch()
		for off := int64(0); off < rec.NumRows() && left > 0; {
			n := min(int64(batchRows), rec.NumRows()-off, left)
			out = append(out, rec.NewSlice(off, off+n))
			off += n
			left -= n
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.Release()
		}
	})
	return rdr.Schema(), out
}

// ReadParquet reads the whole Parquet file r with pqarrow and props (its batch size,
// parallel column reads; no other change of method), as another tool would: the file's
// schema and its batches in file order, released when t ends. Errors fail t.
func ReadParquet(t testing.TB, r parquet.ReaderAtSeeker, props pqarrow.ArrowReadProperties) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	pf, err := file.NewParquetReader(r)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, props, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []arrow.RecordBatch
	t.Cleanup(func() {
		for _, rec := range out {
			rec.Release()
		}
	})
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return rdr.Schema(), out
}
