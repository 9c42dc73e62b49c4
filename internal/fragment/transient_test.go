package fragment

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
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
