package fragment

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"

	"github.com/shale-db/shale/store"
)

var storeSeq atomic.Int64

// memStore opens a fresh in-process store.
func memStore(t testing.TB) store.Store {
	t.Helper()
	url := fmt.Sprintf("mem://fragment-%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano(), storeSeq.Add(1))
	s, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fileStore opens a store on local disk under t.TempDir().
func fileStore(t testing.TB) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "file://"+t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// seeded returns a random source and logs its seed so a failure can be replayed.
func seeded(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SHALE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SHALE_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// allTypesSchema covers every type with statistics plus nested and view types.
func allTypesSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "bool", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "dur", Type: arrow.FixedWidthTypes.Duration_ns, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 2}, Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "sv", Type: arrow.BinaryTypes.StringView, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "nul", Type: arrow.Null, Nullable: true},
	}, nil)
}

func fieldIDsFor(s *arrow.Schema) []int32 {
	ids := make([]int32, s.NumFields())
	for i := range ids {
		ids[i] = int32(100 + 3*i)
	}
	return ids
}

// randString returns ASCII or multi-byte text, sometimes longer than MaxStatBytes.
func randString(r *rand.Rand) string {
	n := r.IntN(12)
	if r.IntN(10) == 0 {
		n = MaxStatBytes - 2 + r.IntN(8)
	}
	var sb strings.Builder
	for sb.Len() < n {
		switch r.IntN(6) {
		case 0:
			sb.WriteRune('é')
		case 1:
			sb.WriteRune('水')
		default:
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return sb.String()
}

// randRecord builds n random rows of schema; about nullPct percent of values are null.
// Floats include NaN and ±Inf.
func randRecord(r *rand.Rand, schema *arrow.Schema, n int, nullPct int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, f := range schema.Fields() {
		fillRandom(r, b.Field(i), f.Type, n, nullPct)
	}
	return b.NewRecordBatch()
}

func fillRandom(r *rand.Rand, fb array.Builder, dt arrow.DataType, n int, nullPct int) {
	for j := 0; j < n; j++ {
		if dt.ID() == arrow.NULL || r.IntN(100) < nullPct {
			fb.AppendNull()
			continue
		}
		appendRandom(r, fb, nullPct)
	}
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(40) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	}
	return (r.Float64() - 0.5) * 1e6
}

func appendRandom(r *rand.Rand, fb array.Builder, nullPct int) {
	switch b := fb.(type) {
	case *array.Int8Builder:
		b.Append(int8(r.Uint32()))
	case *array.Int16Builder:
		b.Append(int16(r.Uint32()))
	case *array.Int32Builder:
		b.Append(int32(r.Uint32()))
	case *array.Int64Builder:
		b.Append(int64(r.Uint64()))
	case *array.Uint8Builder:
		b.Append(uint8(r.Uint32()))
	case *array.Uint16Builder:
		b.Append(uint16(r.Uint32()))
	case *array.Uint32Builder:
		b.Append(r.Uint32())
	case *array.Uint64Builder:
		b.Append(r.Uint64())
	case *array.Float32Builder:
		b.Append(float32(randFloat(r)))
	case *array.Float64Builder:
		b.Append(randFloat(r))
	case *array.StringBuilder:
		b.Append(randString(r))
	case *array.LargeStringBuilder:
		b.Append(randString(r))
	case *array.StringViewBuilder:
		b.Append(randString(r))
	case *array.BinaryBuilder:
		v := make([]byte, r.IntN(8))
		if r.IntN(10) == 0 {
			v = make([]byte, MaxStatBytes+r.IntN(4)-1)
		}
		for k := range v {
			v[k] = byte(r.Uint32())
		}
		b.Append(v)
	case *array.BooleanBuilder:
		b.Append(r.IntN(2) == 0)
	case *array.Date32Builder:
		b.Append(arrow.Date32(r.Int32N(40000) - 20000))
	case *array.Date64Builder:
		b.Append(arrow.Date64(r.Int64N(1e12) - 5e11))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(r.Int64N(4e15)))
	case *array.DurationBuilder:
		b.Append(arrow.Duration(r.Int64N(1e12) - 5e11))
	case *array.Decimal128Builder:
		b.Append(decimal128.FromI64(r.Int64N(1e9)))
	case *array.FixedSizeBinaryBuilder:
		b.Append([]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
	case *array.ListBuilder:
		b.Append(true)
		vb := b.ValueBuilder().(*array.Int32Builder)
		for k := r.IntN(4); k > 0; k-- {
			vb.Append(r.Int32N(100))
		}
	case *array.StructBuilder:
		b.Append(true)
		if r.IntN(5) == 0 {
			b.FieldBuilder(0).AppendNull()
		} else {
			b.FieldBuilder(0).(*array.Int32Builder).Append(r.Int32N(1000))
		}
		b.FieldBuilder(1).(*array.StringBuilder).Append(randString(r))
	default:
		panic(fmt.Sprintf("no random values for %T", fb))
	}
}

// recordsEqual compares values column by column (NaN equals NaN, no tolerance).
func recordsEqual(t testing.TB, want, got arrow.RecordBatch) {
	t.Helper()
	if want.NumCols() != got.NumCols() || want.NumRows() != got.NumRows() {
		t.Fatalf("shape: want %dx%d, got %dx%d", want.NumRows(), want.NumCols(), got.NumRows(), got.NumCols())
	}
	for i := 0; i < int(want.NumCols()); i++ {
		if want.Schema().Field(i).Name != got.Schema().Field(i).Name ||
			!arrow.TypeEqual(want.Schema().Field(i).Type, got.Schema().Field(i).Type) {
			t.Fatalf("column %d: want field %v, got %v", i, want.Schema().Field(i), got.Schema().Field(i))
		}
		if !array.ApproxEqual(want.Column(i), got.Column(i), array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
			t.Fatalf("column %d (%s) differs:\nwant %v\ngot  %v", i, want.Schema().Field(i).Name, want.Column(i), got.Column(i))
		}
	}
}

// concatRecords concatenates records of one schema.
func concatRecords(t testing.TB, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	schema := recs[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows)
}

// readAll reads every batch of every file back (all columns) and concatenates them.
func readAll(t testing.TB, s store.Store, files []DataFile) arrow.RecordBatch {
	t.Helper()
	var recs []arrow.RecordBatch
	for _, df := range files {
		fr, err := OpenFile(context.Background(), s, df, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < fr.NumBatches(); i++ {
			rec, err := fr.ReadBatch(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
		fr.Close()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return concatRecords(t, recs)
}

// bruteStats computes a column's statistics the slow way: every value through the scalar
// package, sorted with Value.Compare, truncation rules applied afterwards.
func bruteStats(fieldID int32, arr arrow.Array) ColumnStats {
	s := ColumnStats{FieldID: fieldID}
	if arr.DataType().ID() == arrow.NULL { // a null array has no validity bitmap
		s.NullCount = int64(arr.Len())
		return s
	}
	var vals []Value
	for i := 0; i < arr.Len(); i++ {
		if arr.IsNull(i) {
			s.NullCount++
			continue
		}
		if sv, ok := arr.(*array.StringView); ok { // no scalar type for views
			vals = append(vals, Value{Kind: KindString, Str: sv.Value(i)})
			continue
		}
		sc, err := scalar.GetScalar(arr, i)
		if err != nil {
			panic(err)
		}
		if v, ok := scalarValue(sc); ok {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return s
	}
	slices.SortStableFunc(vals, Value.Compare)
	lo, hi := vals[0], vals[len(vals)-1]
	s.HasMin, s.Min = true, lo
	if (lo.Kind == KindString || lo.Kind == KindBinary) && len(lo.Str) > MaxStatBytes {
		cut := MaxStatBytes
		for lo.Kind == KindString && !utf8.RuneStart(lo.Str[cut]) {
			cut--
		}
		s.Min.Str, s.MinTruncated = lo.Str[:cut], true
	}
	if !((hi.Kind == KindString || hi.Kind == KindBinary) && len(hi.Str) > MaxStatBytes) {
		s.HasMax, s.Max = true, hi
	}
	s.HasMinMax = s.HasMin && s.HasMax
	return s
}

func scalarValue(sc scalar.Scalar) (Value, bool) {
	switch v := sc.(type) {
	case *scalar.Int8:
		return Value{Kind: KindInt, Int: int64(v.Value)}, true
	case *scalar.Int16:
		return Value{Kind: KindInt, Int: int64(v.Value)}, true
	case *scalar.Int32:
		return Value{Kind: KindInt, Int: int64(v.Value)}, true
	case *scalar.Int64:
		return Value{Kind: KindInt, Int: v.Value}, true
	case *scalar.Date32:
		return Value{Kind: KindInt, Int: int64(v.Value)}, true
	case *scalar.Date64:
		return Value{Kind: KindInt, Int: int64(v.Value)}, true
	case *scalar.Timestamp:
		return Value{Kind: KindInt, Int: int64(v.Value)}, true
	case *scalar.Duration:
		return Value{Kind: KindInt, Int: int64(v.Value)}, true
	case *scalar.Uint8:
		return Value{Kind: KindUint, Uint: uint64(v.Value)}, true
	case *scalar.Uint16:
		return Value{Kind: KindUint, Uint: uint64(v.Value)}, true
	case *scalar.Uint32:
		return Value{Kind: KindUint, Uint: uint64(v.Value)}, true
	case *scalar.Uint64:
		return Value{Kind: KindUint, Uint: v.Value}, true
	case *scalar.Float32:
		if math.IsNaN(float64(v.Value)) {
			return Value{}, false
		}
		return Value{Kind: KindFloat, Float: float64(v.Value)}, true
	case *scalar.Float64:
		if math.IsNaN(v.Value) {
			return Value{}, false
		}
		return Value{Kind: KindFloat, Float: v.Value}, true
	case *scalar.String:
		return Value{Kind: KindString, Str: string(v.Data())}, true
	case *scalar.LargeString:
		return Value{Kind: KindString, Str: string(v.Data())}, true
	case *scalar.Binary:
		return Value{Kind: KindBinary, Str: string(v.Data())}, true
	case *scalar.LargeBinary:
		return Value{Kind: KindBinary, Str: string(v.Data())}, true
	case *scalar.Boolean:
		return Value{Kind: KindBool, Bool: v.Value}, true
	}
	return Value{}, false
}
