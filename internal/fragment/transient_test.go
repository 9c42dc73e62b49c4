package fragment

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/store"
)

// TestDecodeTransientMatchesDecode decodes every batch's columns, whole and in subsets,
// with Decode and DecodeTransient (twice, releasing between, so the second decode reuses
// pooled bodies whose old bytes must not show) and compares them, for each codec.
func TestDecodeTransientMatchesDecode(t *testing.T) {
	for _, comp := range []Compression{CompressionZstd, CompressionLZ4, CompressionNone} {
		t.Run(string(comp), func(t *testing.T) {
			r := seeded(t)
			s := memStore(t)
			schema := allTypesSchema()
			recs := []arrow.RecordBatch{randRecord(r, schema, 9000, 15), randRecord(r, schema, 5000, 0)}
			defer func() {
				for _, rec := range recs {
					rec.Release()
				}
			}()
			files := writeRecords(t, s, "tbl/data", schema, recs, WriterOptions{Compression: comp, MaxRowsPerBatch: 4096})
			nf := schema.NumFields()
			subsets := [][]int{nil, {0}, {nf - 1, 1}, {2, 3, 4}}
			for _, df := range files {
				rd, err := OpenFile(context.Background(), s, df, nil)
				if err != nil {
					t.Fatal(err)
				}
				for bi := range rd.NumBatches() {
					for _, cols := range subsets {
						for _, fetch := range [][]int{nil, cols} {
							name := fmt.Sprintf("%s batch %d columns %v fetched %v", df.Key, bi, cols, fetch)
							b, err := rd.FetchBatch(bi, fetch)
							if err != nil {
								t.Fatal(name, err)
							}
							want, err := b.Decode(cols)
							if err != nil {
								t.Fatal(name, err)
							}
							for range 2 {
								got, err := b.DecodeTransient(cols)
								if err != nil {
									t.Fatal(name, err)
								}
								recordsEqual(t, want, got)
								got.Release()
							}
							want.Release()
						}
					}
				}
				rd.Close()
			}
		})
	}
}

// TestBatchReleaseReusesFetchedBytes: on a store that reads into the caller's buffer
// (the local store), a compressed batch read whole is fetched into pooled memory that
// Release returns; records decoded from the batch (plain and transient) keep their values
// after the batch is released and later batches are fetched into that memory. An
// uncompressed batch's records alias its fetched bytes, so it is never pooled.
func TestBatchReleaseReusesFetchedBytes(t *testing.T) {
	for _, comp := range []Compression{CompressionZstd, CompressionLZ4, CompressionNone} {
		t.Run(string(comp), func(t *testing.T) {
			r := seeded(t)
			s, err := store.Open(context.Background(), "file://"+t.TempDir(), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			schema := allTypesSchema()
			var recs []arrow.RecordBatch
			for range 4 {
				recs = append(recs, randRecord(r, schema, 6000, 10))
			}
			defer func() {
				for _, rec := range recs {
					rec.Release()
				}
			}()
			files := writeRecords(t, s, "tbl/data", schema, recs, WriterOptions{Compression: comp, MaxRowsPerBatch: 6000})
			rd, err := OpenFile(context.Background(), s, files[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			var kept []arrow.RecordBatch
			defer func() {
				for _, rec := range kept {
					rec.Release()
				}
			}()
			pooled := 0
			for round := range 3 { // later rounds fetch into buffers earlier ones released
				for bi := range rd.NumBatches() {
					b, err := rd.FetchBatch(bi, nil)
					if err != nil {
						t.Fatal(err)
					}
					if b.pooled != nil {
						pooled++
					}
					plain, err := b.Decode(nil)
					if err != nil {
						t.Fatal(err)
					}
					tr, err := b.DecodeTransient([]int{0, 3, schema.NumFields() - 1})
					if err != nil {
						t.Fatal(err)
					}
					b.Release()
					if round == 0 {
						kept = append(kept, plain, tr)
					} else {
						plain.Release()
						tr.Release()
					}
				}
			}
			if want := comp != CompressionNone; (pooled > 0) != want {
				t.Fatalf("%d of %d fetches pooled; want pooling %v", pooled, 3*rd.NumBatches(), want)
			}
			for bi := range rd.NumBatches() {
				recordsEqual(t, recs[bi], kept[2*bi])
				want := project(recs[bi], []int{0, 3, schema.NumFields() - 1})
				recordsEqual(t, want, kept[2*bi+1])
				want.Release()
			}
		})
	}
}
