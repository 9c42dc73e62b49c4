package filter

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFastCmpLitMatchesKernel checks the hand-written comparisons against arrow's kernels
// on every operator and type they take, with nulls, a sliced array (offset 1) and sizes
// around a byte boundary: values and validity must agree where the row is valid.
func TestFastCmpLitMatchesKernel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := compute.WithAllocator(context.Background(), mem)
	r := rand.New(rand.NewSource(seed(t)))
	strs := []string{"", "SEA", "SEB", "SE", "SEAT", "LAX"}
	types := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Uint64,
		arrow.PrimitiveTypes.Float64, tsUS, arrow.FixedWidthTypes.Date32, arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString}
	for _, n := range []int{1, 7, 8, 9, 64, 1000} {
		for _, dt := range types {
			b := array.NewBuilder(mem, dt)
			for range n + 1 {
				if r.Intn(5) == 0 {
					b.AppendNull()
					continue
				}
				k := r.Intn(4) - 1
				switch bb := b.(type) {
				case *array.Int64Builder:
					bb.Append(int64(k))
				case *array.Int32Builder:
					bb.Append(int32(k))
				case *array.Uint64Builder:
					bb.Append(uint64(k + 1))
				case *array.Float64Builder:
					bb.Append(float64(k) / 2)
				case *array.TimestampBuilder:
					bb.Append(arrow.Timestamp(k))
				case *array.Date32Builder:
					bb.Append(arrow.Date32(k))
				case *array.StringBuilder:
					bb.Append(strs[r.Intn(len(strs))])
				case *array.LargeStringBuilder:
					bb.Append(strs[r.Intn(len(strs))])
				}
			}
			whole := b.NewArray()
			b.Release()
			arr := array.NewSlice(whole, 1, int64(n+1))
			whole.Release()
			for op := opEQ; op <= opGE; op++ {
				for _, v := range []value{{i: 0, u: 1, f: 0, s: "SEA"}, {i: -1, u: 0, f: -0.5, s: ""}} {
					name := fmt.Sprintf("n=%d %s %s %+v", n, dt, opText[op], v)
					ev := &evaluator{ctx: ctx, mem: mem, n: n}
					got, ok := ev.fastCmpLit(arr, op, v)
					if !ok {
						if dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING || dt.ID() == arrow.FLOAT64 {
							if op == opEQ || op == opNE {
								t.Errorf("%s: no fast path", name)
							}
							continue
						}
						t.Fatalf("%s: no fast path", name)
					}
					sc, err := scalarOf(dt, v)
					if err != nil {
						t.Fatal(err)
					}
					want, err := ev.call(opKernel[op], nil, datum(arr), datum(sc))
					if err != nil {
						t.Fatal(err)
					}
					for i := range n {
						if got.IsValid(i) != want.IsValid(i) || (want.IsValid(i) && got.Value(i) != want.Value(i)) {
							t.Errorf("%s: row %d: got valid %v value %v, kernel valid %v value %v", name, i, got.IsValid(i), got.Value(i), want.IsValid(i), want.Value(i))
						}
					}
					got.Release()
					want.Release()
				}
			}
			arr.Release()
		}
	}
}
