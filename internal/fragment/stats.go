package fragment

import (
	"bytes"
	"cmp"
	"math"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ValueKind says which field of a Value is set.
type ValueKind uint8

// Value kinds. Temporal types (date32/64, time32/64, timestamp, duration) are KindInt
// holding their physical value; the column type gives the unit.
const (
	KindNone   ValueKind = iota // no value
	KindInt                     // Int: int8..int64 and temporal types
	KindUint                    // Uint: uint8..uint64
	KindFloat                   // Float: float32 and float64 (float32 widened exactly)
	KindString                  // Str: string, large_string, string_view (valid UTF-8 prefix when truncated)
	KindBinary                  // Str: the raw bytes of binary, large_binary, binary_view
	KindBool                    // Bool
)

// MaxStatBytes is the longest string or binary statistic kept. A longer minimum is
// truncated to a prefix (still ≤ every value); a longer maximum is dropped, because a
// truncated maximum would not bound the values.
const MaxStatBytes = 64

// Value is a scalar statistic. Kind says which field is set.
type Value struct {
	Kind  ValueKind `cbor:"1,keyasint,omitempty"`
	Int   int64     `cbor:"2,keyasint,omitempty"`
	Uint  uint64    `cbor:"3,keyasint,omitempty"`
	Float float64   `cbor:"4,keyasint,omitempty"`
	Str   string    `cbor:"5,keyasint,omitempty"`
	Bool  bool      `cbor:"6,keyasint,omitempty"`
}

// Compare orders two values of the same kind: -1, 0 or +1. Strings and binaries compare
// bytewise; false < true. Values of different kinds compare by kind.
func (v Value) Compare(o Value) int {
	if v.Kind != o.Kind {
		return cmp.Compare(v.Kind, o.Kind)
	}
	switch v.Kind {
	case KindInt:
		return cmp.Compare(v.Int, o.Int)
	case KindUint:
		return cmp.Compare(v.Uint, o.Uint)
	case KindFloat:
		return cmp.Compare(v.Float, o.Float)
	case KindString, KindBinary:
		return strings.Compare(v.Str, o.Str)
	case KindBool:
		switch {
		case v.Bool == o.Bool:
			return 0
		case !v.Bool:
			return -1
		}
		return 1
	}
	return 0
}

// ColumnStats are the statistics of one top-level column over a batch or a whole file.
//
// NullCount is exact for every type. Min and Max are kept for integer, unsigned, float,
// string, binary, bool and temporal columns (NaN is ignored; a column of only nulls and NaN
// has none). HasMinMax is HasMin && HasMax. HasMin without HasMax happens for strings and
// binaries whose maximum is longer than MaxStatBytes. MinTruncated says Min is a prefix of
// the true minimum (so still ≤ every value).
type ColumnStats struct {
	FieldID      int32 `cbor:"1,keyasint,omitempty"`
	NullCount    int64 `cbor:"2,keyasint,omitempty"`
	HasMinMax    bool  `cbor:"3,keyasint,omitempty"`
	Min          Value `cbor:"4,keyasint,omitempty"`
	Max          Value `cbor:"5,keyasint,omitempty"`
	HasMin       bool  `cbor:"6,keyasint,omitempty"`
	HasMax       bool  `cbor:"7,keyasint,omitempty"`
	MinTruncated bool  `cbor:"8,keyasint,omitempty"`
}

// columnStats computes the exact statistics of one column of a batch: string and binary
// bounds are not yet truncated (finalizeStats does that).
func columnStats(fieldID int32, arr arrow.Array) ColumnStats {
	s := ColumnStats{FieldID: fieldID, NullCount: int64(arr.NullN())}
	switch a := arr.(type) {
	case *array.Int8:
		intStats(&s, a, a.Int8Values())
	case *array.Int16:
		intStats(&s, a, a.Int16Values())
	case *array.Int32:
		intStats(&s, a, a.Int32Values())
	case *array.Int64:
		intStats(&s, a, a.Int64Values())
	case *array.Date32:
		intStats(&s, a, a.Date32Values())
	case *array.Date64:
		intStats(&s, a, a.Date64Values())
	case *array.Time32:
		intStats(&s, a, a.Time32Values())
	case *array.Time64:
		intStats(&s, a, a.Time64Values())
	case *array.Timestamp:
		intStats(&s, a, a.TimestampValues())
	case *array.Duration:
		intStats(&s, a, a.DurationValues())
	case *array.Uint8:
		uintStats(&s, a, a.Uint8Values())
	case *array.Uint16:
		uintStats(&s, a, a.Uint16Values())
	case *array.Uint32:
		uintStats(&s, a, a.Uint32Values())
	case *array.Uint64:
		uintStats(&s, a, a.Uint64Values())
	case *array.Float32:
		floatStats(&s, a, a.Float32Values())
	case *array.Float64:
		floatStats(&s, a, a.Float64Values())
	case *array.String:
		offsetBytesStats(&s, a, KindString, a.ValueOffsets(), a.ValueBytes())
	case *array.LargeString:
		offsetBytesStats(&s, a, KindString, a.ValueOffsets(), a.ValueBytes())
	case *array.StringView:
		bytesStats(&s, a, KindString, func(i int) []byte { return unsafeBytes(a.Value(i)) })
	case *array.Binary:
		offsetBytesStats(&s, a, KindBinary, a.ValueOffsets(), a.ValueBytes())
	case *array.LargeBinary:
		offsetBytesStats(&s, a, KindBinary, a.ValueOffsets(), a.ValueBytes())
	case *array.BinaryView:
		bytesStats(&s, a, KindBinary, a.Value)
	case *array.Boolean:
		boolStats(&s, a)
	}
	s.HasMinMax = s.HasMin && s.HasMax
	return s
}

// unsafeBytes views a string's bytes without copying; the result is only compared, and
// kept statistics are copied out with string(...).
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func intStats[T ~int8 | ~int16 | ~int32 | ~int64](s *ColumnStats, a arrow.Array, vals []T) {
	lo, hi, ok := minMax(a, vals, nil)
	if ok {
		s.Min, s.Max = Value{Kind: KindInt, Int: int64(lo)}, Value{Kind: KindInt, Int: int64(hi)}
		s.HasMin, s.HasMax = true, true
	}
}

func uintStats[T ~uint8 | ~uint16 | ~uint32 | ~uint64](s *ColumnStats, a arrow.Array, vals []T) {
	lo, hi, ok := minMax(a, vals, nil)
	if ok {
		s.Min, s.Max = Value{Kind: KindUint, Uint: uint64(lo)}, Value{Kind: KindUint, Uint: uint64(hi)}
		s.HasMin, s.HasMax = true, true
	}
}

func floatStats[T float32 | float64](s *ColumnStats, a arrow.Array, vals []T) {
	lo, hi, ok := minMax(a, vals, func(v T) bool { return !math.IsNaN(float64(v)) })
	if ok {
		s.Min, s.Max = Value{Kind: KindFloat, Float: float64(lo)}, Value{Kind: KindFloat, Float: float64(hi)}
		s.HasMin, s.HasMax = true, true
	}
}

// minMax scans the non-null values accepted by keep. A column without nulls is scanned
// without consulting the validity bitmap (and, for integers, without keep).
func minMax[T cmp.Ordered](a arrow.Array, vals []T, keep func(T) bool) (lo, hi T, ok bool) {
	noNulls := a.NullN() == 0
	if noNulls && len(vals) > 0 && keep == nil {
		lo, hi = vals[0], vals[0]
		for _, v := range vals[1:] {
			lo = min(lo, v)
			hi = max(hi, v)
		}
		return lo, hi, true
	}
	for i, v := range vals {
		if (!noNulls && a.IsNull(i)) || (keep != nil && !keep(v)) {
			continue
		}
		if !ok {
			lo, hi, ok = v, v, true
			continue
		}
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi, ok
}

func bytesStats(s *ColumnStats, a arrow.Array, kind ValueKind, value func(int) []byte) {
	var lo, hi []byte
	ok := false
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			continue
		}
		v := value(i)
		if !ok {
			lo, hi, ok = v, v, true
			continue
		}
		// Most values fall strictly inside [lo, hi] by their first byte alone: then they
		// change neither bound, and the two byte-wise comparisons are skipped.
		if len(v) > 0 && len(lo) > 0 && len(hi) > 0 && v[0] > lo[0] && v[0] < hi[0] {
			continue
		}
		if bytes.Compare(v, lo) < 0 {
			lo = v
		}
		if bytes.Compare(v, hi) > 0 {
			hi = v
		}
	}
	if !ok {
		return
	}
	s.HasMin, s.HasMax = true, true
	s.Min = Value{Kind: kind, Str: string(lo)}
	s.Max = Value{Kind: kind, Str: string(hi)}
}

// offsetBytesStats is bytesStats for offset-based strings and binaries: values are sliced
// from the data buffer directly, the bitmap is consulted only when there are nulls, and a
// value is compared with the maximum only when it is not below the minimum.
func offsetBytesStats[O int32 | int64](s *ColumnStats, a arrow.Array, kind ValueKind, offsets []O, data []byte) {
	n := a.Len()
	if n == 0 || len(offsets) < n+1 {
		return
	}
	noNulls := a.NullN() == 0
	base := offsets[0] // data (ValueBytes) starts at the first value, offsets are absolute
	var lo, hi []byte
	ok := false
	for i := 0; i < n; i++ {
		if !noNulls && a.IsNull(i) {
			continue
		}
		v := data[offsets[i]-base : offsets[i+1]-base]
		if !ok {
			lo, hi, ok = v, v, true
			continue
		}
		// Most values fall strictly inside [lo, hi] by their first byte alone: then they
		// change neither bound, and the two byte-wise comparisons are skipped.
		if len(v) > 0 && len(lo) > 0 && len(hi) > 0 && v[0] > lo[0] && v[0] < hi[0] {
			continue
		}
		if bytes.Compare(v, lo) < 0 {
			lo = v
		} else if bytes.Compare(v, hi) > 0 {
			hi = v
		}
	}
	if !ok {
		return
	}
	s.HasMin, s.HasMax = true, true
	s.Min = Value{Kind: kind, Str: string(lo)}
	s.Max = Value{Kind: kind, Str: string(hi)}
}

// truncatePrefix cuts b to at most MaxStatBytes; for strings the cut is moved back to a
// UTF-8 rune boundary so the prefix stays valid UTF-8.
func truncatePrefix(b []byte, kind ValueKind) []byte {
	n := MaxStatBytes
	if kind == KindString {
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
	}
	return b[:n]
}

func boolStats(s *ColumnStats, a *array.Boolean) {
	sawTrue, sawFalse := false, false
	for i := 0; i < a.Len() && !(sawTrue && sawFalse); i++ {
		if a.IsNull(i) {
			continue
		}
		if a.Value(i) {
			sawTrue = true
		} else {
			sawFalse = true
		}
	}
	if !sawTrue && !sawFalse {
		return
	}
	s.HasMin, s.HasMax = true, true
	s.Min = Value{Kind: KindBool, Bool: !sawFalse}
	s.Max = Value{Kind: KindBool, Bool: sawTrue}
}

// mergeRaw combines the exact (untruncated) statistics of two disjoint row sets of the
// same column.
func mergeRaw(a, b ColumnStats) ColumnStats {
	out := ColumnStats{FieldID: a.FieldID, NullCount: a.NullCount + b.NullCount}
	switch {
	case a.HasMin && b.HasMin:
		out.HasMin, out.HasMax = true, true
		out.Min, out.Max = a.Min, a.Max
		if b.Min.Compare(a.Min) < 0 {
			out.Min = b.Min
		}
		if b.Max.Compare(a.Max) > 0 {
			out.Max = b.Max
		}
	case a.HasMin:
		out.HasMin, out.HasMax, out.Min, out.Max = true, true, a.Min, a.Max
	case b.HasMin:
		out.HasMin, out.HasMax, out.Min, out.Max = true, true, b.Min, b.Max
	}
	out.HasMinMax = out.HasMin && out.HasMax
	return out
}

// finalizeStats applies the MaxStatBytes rule to exact statistics: a longer minimum is cut
// to a prefix (at a UTF-8 rune boundary for strings), a longer maximum is dropped.
func finalizeStats(s ColumnStats) ColumnStats {
	if s.Min.Kind != KindString && s.Min.Kind != KindBinary {
		return s
	}
	if s.HasMin && len(s.Min.Str) > MaxStatBytes {
		s.Min.Str = string(truncatePrefix([]byte(s.Min.Str), s.Min.Kind))
		s.MinTruncated = true
	}
	if s.HasMax && len(s.Max.Str) > MaxStatBytes {
		s.HasMax, s.Max = false, Value{}
	}
	s.HasMinMax = s.HasMin && s.HasMax
	return s
}

// batchStats computes exact statistics for every column of rec.
func batchStats(rec arrow.RecordBatch, fieldIDs []int32) []ColumnStats {
	out := make([]ColumnStats, rec.NumCols())
	for i := range out {
		out[i] = columnStats(fieldIDs[i], rec.Column(i))
	}
	return out
}

func finalizeAll(raw []ColumnStats) []ColumnStats {
	out := make([]ColumnStats, len(raw))
	for i, s := range raw {
		out[i] = finalizeStats(s)
	}
	return out
}

// StatsOf returns the statistics of arr as a data file records them for a column with
// field id fieldID (string and binary bounds cut to MaxStatBytes): what zone maps store.
func StatsOf(fieldID int32, arr arrow.Array) ColumnStats {
	return finalizeStats(columnStats(fieldID, arr))
}
