package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkCommitWrites compares a commit's two writes on local disk, alternating in one
// run: a transaction record into a new directory's sibling and a manifest, as Put then
// PutIfAbsent (sequential) and as PutThenPutIfAbsent (overlapped staging). It reports
// the median time of each and the median of the per-pair ratios (overlapped /
// sequential; lower is better). go test -run '^$' -bench CommitWrites ./store/
func BenchmarkCommitWrites(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, "file://"+b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	rec, man := make([]byte, 600), make([]byte, 3000)
	var seq, ovl, ratio []float64
	for i := 0; i < b.N; i++ {
		k := func(v string) string { return fmt.Sprintf("t/_%s/%d-%s", v, i, v) }
		t0 := time.Now()
		if err := s.Put(ctx, k("txn")+"s", rec); err != nil {
			b.Fatal(err)
		}
		if err := s.PutIfAbsent(ctx, k("versions")+"s", man); err != nil {
			b.Fatal(err)
		}
		d1 := time.Since(t0).Seconds()
		t0 = time.Now()
		if pe, err := PutThenPutIfAbsent(ctx, s, k("txn")+"o", rec, nil, k("versions")+"o", man); pe != nil || err != nil {
			b.Fatal(pe, err)
		}
		d2 := time.Since(t0).Seconds()
		seq, ovl, ratio = append(seq, d1), append(ovl, d2), append(ratio, d2/d1)
	}
	med := func(x []float64) float64 { x = slices.Clone(x); slices.Sort(x); return x[len(x)/2] }
	b.ReportMetric(med(seq)*1e6, "seq-us")
	b.ReportMetric(med(ovl)*1e6, "overlap-us")
	b.ReportMetric(med(ratio), "overlap/seq")
}
