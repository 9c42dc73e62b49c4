package benchmarks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Dataset is an in-memory table the suites import and scan: record batches of exactly
// BatchRows rows (the last may be shorter), compact (no shared or sliced buffers), so that
// no Parquet decoding or re-chunking is timed.
type Dataset struct {
	Source    string // the Parquet path, or "synthetic(<seed>)"
	Schema    *arrow.Schema
	Records   []arrow.RecordBatch
	Rows      int64
	Bytes     int64 // in-memory Arrow bytes of every buffer (the "input MB" of MB/s figures)
	BatchRows int
}

// Release frees the records.
func (d *Dataset) Release() {
	for _, r := range d.Records {
		r.Release()
	}
	d.Records = nil
}

// Reader returns a RecordReader over the records (the caller releases it).
func (d *Dataset) Reader() (array.RecordReader, error) {
	return array.NewRecordReader(d.Schema, d.Records)
}

// FlightsSchema is the schema of the flights data (testdata/flights-3m.parquet): date
// timestamp[us], delay int64, distance int64, origin large_utf8, destination large_utf8.
var FlightsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "date", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "delay", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "distance", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "origin", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "destination", Type: arrow.BinaryTypes.LargeString, Nullable: true},
}, nil)

// LoadParquet reads up to maxRows rows (0 = all) of a Parquet file into memory and
// re-chunks them into compact batches of batchRows rows. Errors name the path.
func LoadParquet(ctx context.Context, path string, maxRows int64, batchRows int) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("benchmarks: open data %s: %w", path, err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("benchmarks: read parquet %s: %w", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows)}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("benchmarks: read parquet %s: %w", path, err)
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("benchmarks: read parquet %s: %w", path, err)
	}
	defer rr.Release()
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	var rows int64
	for rr.Next() && (maxRows <= 0 || rows < maxRows) {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		if maxRows > 0 && rows+n > maxRows {
			n = maxRows - rows
		}
		parts = append(parts, rec.NewSlice(0, n))
		rows += n
	}
	if err := rr.Err(); err != nil {
		return nil, fmt.Errorf("benchmarks: read parquet %s: %w", path, err)
	}
	if rows == 0 {
		return nil, fmt.Errorf("benchmarks: parquet %s holds no rows", path)
	}
	d, err := rechunk(rr.Schema(), parts, batchRows)
	if err != nil {
		return nil, fmt.Errorf("benchmarks: re-chunk %s: %w", path, err)
	}
	d.Source = path
	return d, nil
}

var airports = []string{"ATL", "ORD", "DFW", "LAX", "DEN", "PHX", "IAH", "LAS", "DTW", "SFO",
	"MSP", "EWR", "STL", "BOS", "CLT", "PHL", "LGA", "SEA", "JFK", "MCO", "SLC", "BWI", "MIA",
	"CVG", "PIT", "IAD", "SAN", "TPA", "MDW", "DCA", "MEM", "FLL", "OAK", "BNA", "HOU", "SJC"}

// SyntheticFlights generates rows rows with FlightsSchema from seed: dates ascending over
// 2001 (so date predicates prune by statistics like the real data), delays around 0 with a
// long tail (about 6% over an hour), distances 100..2,600 and 36 airport codes.
func SyntheticFlights(rows int64, seed uint64, batchRows int) (*Dataset, error) {
	if rows <= 0 {
		return nil, fmt.Errorf("benchmarks: synthetic data needs rows > 0, got %d", rows)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	mem := memory.DefaultAllocator
	start := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	span := int64(365 * 24 * time.Hour / time.Microsecond)
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for off := int64(0); off < rows; off += int64(batchRows) {
		n := min(int64(batchRows), rows-off)
		b := array.NewRecordBuilder(mem, FlightsSchema)
		for i := int64(0); i < n; i++ {
			r := off + i
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(start + r*span/rows))
			delay := int64(rng.NormFloat64()*15) - 2
			if rng.IntN(12) == 0 {
				delay += int64(rng.IntN(300))
			}
			b.Field(1).(*array.Int64Builder).Append(delay)
			b.Field(2).(*array.Int64Builder).Append(100 + int64(rng.IntN(2500)))
			o := rng.IntN(len(airports))
			b.Field(3).(*array.LargeStringBuilder).Append(airports[o])
			b.Field(4).(*array.LargeStringBuilder).Append(airports[(o+1+rng.IntN(len(airports)-1))%len(airports)])
		}
		parts = append(parts, b.NewRecordBatch())
		b.Release()
	}
	d, err := rechunk(FlightsSchema, parts, batchRows)
	if err != nil {
		return nil, err
	}
	d.Source = fmt.Sprintf("synthetic(seed %d)", seed)
	return d, nil
}

// rechunk concatenates parts into new compact batches of batchRows rows each.
func rechunk(schema *arrow.Schema, parts []arrow.RecordBatch, batchRows int) (*Dataset, error) {
	d := &Dataset{Schema: schema, BatchRows: batchRows}
	var pending []arrow.RecordBatch
	var pendingRows int64
	flush := func() error {
		if pendingRows == 0 {
			return nil
		}
		cols := make([]arrow.Array, schema.NumFields())
		for c := range cols {
			arrs := make([]arrow.Array, len(pending))
			for j, p := range pending {
				arrs[j] = p.Column(c)
			}
			col, err := array.Concatenate(arrs, memory.DefaultAllocator)
			if err != nil {
				for _, x := range cols[:c] {
					x.Release()
				}
				return err
			}
			cols[c] = col
		}
		rec := array.NewRecordBatch(schema, cols, pendingRows)
		for _, c := range cols {
			c.Release()
		}
		for _, p := range pending {
			p.Release()
		}
		d.Records = append(d.Records, rec)
		d.Rows += rec.NumRows()
		d.Bytes += recordBytes(rec)
		pending, pendingRows = nil, 0
		return nil
	}
	for _, p := range parts {
		for off := int64(0); off < p.NumRows(); {
			take := min(int64(batchRows)-pendingRows, p.NumRows()-off)
			pending = append(pending, p.NewSlice(off, off+take))
			pendingRows += take
			off += take
			if pendingRows == int64(batchRows) {
				if err := flush(); err != nil {
					d.Release()
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		d.Release()
		return nil, err
	}
	return d, nil
}

// recordBytes is the total length of every buffer of rec's columns (children included).
// For sliced arrays it counts the whole shared buffers, so call it on compact batches.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
