package failpoint_test

import (
	"context"
	"testing"

	"github.com/shale-db/shale/internal/failpoint"
)

var benchSeam = failpoint.Seam("failpoint_test.bench")

// BenchmarkInjectDisabled is the production cost of a seam: nothing enabled. It loops on
// b.N, not b.Loop, because calls inside a b.Loop loop are not inlined, and Inject inlined
// into its caller is the production shape.
func BenchmarkInjectDisabled(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		if err := benchSeam.Inject(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInjectDisabledParallel: disabled seams on every core (the load is of a
// read-only cache line, so it scales).
func BenchmarkInjectDisabledParallel(b *testing.B) {
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchSeam.Inject(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInjectCount: an enabled seam that only counts (an atomic add per hit).
func BenchmarkInjectCount(b *testing.B) {
	ctx := context.Background()
	b.Cleanup(failpoint.Enable(benchSeam.Name(), failpoint.Count()))
	for range b.N {
		benchSeam.Inject(ctx)
	}
}

// baseline: an empty non-inlined call, to compare a seam with.
//
//go:noinline
func emptyCall(ctx context.Context) error { return nil }

func BenchmarkEmptyCall(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		if err := emptyCall(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
