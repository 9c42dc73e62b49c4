package fragment

import (
	"context"
	"errors"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// TestAcrossStores runs the data file and deletion vector paths on every store kind of
// the shared harness (memory, local disk, S3 and GCS protocol fakes): values, request
// counts, projection, a truncated object and a damaged deletion vector.
func TestAcrossStores(t *testing.T) {
	rec := scanRecord(0, 5000)
	defer rec.Release()
	for _, k := range storetest.Kinds() {
		t.Run(k.Name, func(t *testing.T) {
			ctx := context.Background()
			s := k.Open(t)
			files := writeRecords(t, s, "tbl/data", scanSchema(), []arrow.RecordBatch{rec}, WriterOptions{MaxRowsPerBatch: 1000})

			before := s.Counters().Snapshot()
			fr, err := OpenFile(ctx, s, files[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			one, err := fr.ReadBatch(2, nil)
			if err != nil {
				t.Fatal(err)
			}
			one.Release()
			if d := s.Counters().Snapshot().Sub(before); d.Total() != 2 || d.ByOp[store.OpGetRange] != 2 {
				t.Fatalf("open + one batch made %v, want 2 range reads", d)
			}
			proj, err := fr.ReadBatch(4, []int{2})
			if err != nil {
				t.Fatal(err)
			}
			want := project(retained(rec.NewSlice(4000, 5000)), []int{2})
			recordsEqual(t, want, proj)
			want.Release()
			proj.Release()
			fr.Close()
			got := readAll(t, s, files)
			recordsEqual(t, rec, got)
			got.Release()

			// A truncated object: the description records the full size.
			data, err := s.Get(ctx, files[0].Key)
			if err != nil {
				t.Fatal(err)
			}
			short := files[0]
			short.Key = "tbl/data/short.arrow"
			if err := s.Put(ctx, short.Key, data[:len(data)/3]); err != nil {
				t.Fatal(err)
			}
			_, err = OpenFile(ctx, s, short, nil)
			wantCorrupt(t, err, short.Key)

			// A truncated object shorter than the tail read's offset: the range starts past
			// the end of what is stored (S3 answers such a range with 416).
			big := scanRecord(0, 200000)
			bigFiles := writeRecords(t, s, "tbl/data", scanSchema(), []arrow.RecordBatch{big}, WriterOptions{Compression: CompressionNone})
			big.Release()
			data, err = s.Get(ctx, bigFiles[0].Key)
			if err != nil {
				t.Fatal(err)
			}
			short = bigFiles[0]
			short.Key = "tbl/data/short-big.arrow"
			if err := s.Put(ctx, short.Key, data[:TailReadSize]); err != nil {
				t.Fatal(err)
			}
			before = s.Counters().Snapshot()
			_, err = OpenFile(ctx, s, short, nil)
			wantCorrupt(t, err, short.Key)
			if d := s.Counters().Snapshot().Sub(before); d.Total() != 1 {
				t.Fatalf("opening a truncated object made %v, want 1 request (no retries)", d)
			}

			dvKey := "tbl/_deletions/1-1-x.dv"
			if _, err := WriteDeletionVector(ctx, s, dvKey, roaring.BitmapOf(3, 5, 999)); err != nil {
				t.Fatal(err)
			}
			if _, err := WriteDeletionVector(ctx, s, dvKey, roaring.BitmapOf(1)); !errors.Is(err, store.ErrPreconditionFailed) {
				t.Fatalf("second DV write: %v", err)
			}
			bm, err := ReadDeletionVector(ctx, s, dvKey)
			if err != nil || !bm.Equals(roaring.BitmapOf(3, 5, 999)) {
				t.Fatalf("DV read back %v, %v", bm, err)
			}
			raw, err := s.Get(ctx, dvKey)
			if err != nil {
				t.Fatal(err)
			}
			raw[len(raw)/2] ^= 0x10
			if err := s.Put(ctx, "tbl/_deletions/bad.dv", raw); err != nil {
				t.Fatal(err)
			}
			_, err = ReadDeletionVector(ctx, s, "tbl/_deletions/bad.dv")
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("damaged DV: %v", err)
			}
		})
	}
}
