package fragment

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestStatsEdgeCases(t *testing.T) {
	mem := memory.DefaultAllocator

	fb := array.NewFloat64Builder(mem)
	fb.AppendValues([]float64{math.NaN(), 0, math.NaN()}, []bool{true, false, true})
	allNaN := fb.NewArray()
	defer allNaN.Release()
	if s := columnStats(1, allNaN); s.NullCount != 1 || s.HasMin || s.HasMax || s.HasMinMax {
		t.Fatalf("NaN and null only: %+v", s)
	}
	fb.AppendValues([]float64{math.NaN(), -2.5, math.Inf(1), 3}, nil)
	withNaN := fb.NewArray()
	defer withNaN.Release()
	if s := columnStats(1, withNaN); !s.HasMinMax || s.Min.Float != -2.5 || !math.IsInf(s.Max.Float, 1) {
		t.Fatalf("NaN ignored: %+v", s)
	}

	long := "ab" + strings.Repeat("水", 30) // 92 bytes; byte 64 falls inside a rune
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{long + "b", long + "a", "zz"}, nil)
	strs := sb.NewArray()
	defer strs.Release()
	s := finalizeStats(columnStats(2, strs))
	if !s.HasMin || !s.MinTruncated || s.Min.Str != "ab"+strings.Repeat("水", 20) || !s.HasMax || s.Max.Str != "zz" {
		t.Fatalf("long min: %+v", s)
	}
	sb.AppendValues([]string{"a", "zz" + long}, nil)
	longMax := sb.NewArray()
	defer longMax.Release()
	s2 := finalizeStats(columnStats(2, longMax))
	if !s2.HasMin || s2.Min.Str != "a" || s2.MinTruncated || s2.HasMax || s2.HasMinMax {
		t.Fatalf("long max must be dropped: %+v", s2)
	}
	// Exact statistics merge before truncation: a batch whose own maximum was too long
	// to keep does not hide a larger short maximum elsewhere in the file.
	sb.AppendValues([]string{"zzz"}, nil)
	short := sb.NewArray()
	defer short.Release()
	m := finalizeStats(mergeRaw(columnStats(2, longMax), columnStats(2, short)))
	if !m.HasMinMax || m.Min.Str != "a" || m.Max.Str != "zzz" {
		t.Fatalf("merge: %+v", m)
	}
	m = finalizeStats(mergeRaw(columnStats(2, longMax), columnStats(2, strs)))
	if m.HasMax || m.Min.Str != "a" {
		t.Fatalf("merge keeping the long maximum: %+v", m)
	}
	empty := columnStats(2, allNaN) // no values at all
	if m := mergeRaw(empty, columnStats(2, short)); !m.HasMinMax || m.Max.Str != "zzz" || m.NullCount != 1 {
		t.Fatalf("merge with an empty side: %+v", m)
	}

	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues([]bool{true, true}, []bool{true, false})
	bools := bb.NewArray()
	defer bools.Release()
	if s := columnStats(3, bools); !s.HasMinMax || !s.Min.Bool || !s.Max.Bool || s.NullCount != 1 {
		t.Fatalf("bools: %+v", s)
	}
}

// TestStringStatsFirstByteShortcut: string and binary minima and maxima, which skip the
// byte-wise comparisons for values strictly inside the bounds by their first byte, match
// the brute-force statistics on values that share first bytes, are empty or null, in
// many random orders.
func TestStringStatsFirstByteShortcut(t *testing.T) {
	rng := seeded(t)
	alphabet := []byte{0, 'a', 'b', 'c', 0xff}
	for round := range 500 {
		sb := array.NewLargeStringBuilder(memory.DefaultAllocator)
		bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
		for range 1 + rng.IntN(40) {
			if rng.IntN(8) == 0 {
				sb.AppendNull()
				bb.AppendNull()
				continue
			}
			v := make([]byte, rng.IntN(4))
			for i := range v {
				v[i] = alphabet[rng.IntN(len(alphabet))]
			}
			sb.Append(strings.ToValidUTF8(string(v), "z"))
			bb.Append(v)
		}
		for _, a := range []arrow.Array{sb.NewArray(), bb.NewArray()} {
			if got, want := finalizeStats(columnStats(4, a)), bruteStats(4, a); got != want {
				t.Fatalf("round %d, %s: got %+v, want %+v", round, a.DataType(), got, want)
			}
			a.Release()
		}
		sb.Release()
		bb.Release()
	}
}
