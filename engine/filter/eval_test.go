package filter

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// seed returns the property-test seed: $FILTER_SEED if set, else the clock.
// It is logged so a failure can be replayed.
func seed(t *testing.T) int64 {
	s := time.Now().UnixNano()
	if v := os.Getenv("FILTER_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("FILTER_SEED: %v", err)
		}
	}
	t.Logf("seed %d (rerun with FILTER_SEED=%d)", s, s)
	return s
}

func maskBools(m *array.Boolean) []bool {
	out := make([]bool, m.Len())
	for i := range out {
		out[i] = m.Value(i)
	}
	return out
}

// TestEvaluateMatchesReference evaluates random predicates over random
// batches with nulls and compares every row with the brute-force model. It
// also checks the mask has no nulls and that nothing leaks.
func TestEvaluateMatchesReference(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	dataMem := memory.NewGoAllocator()
	evalMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	ctx := compute.WithAllocator(context.Background(), evalMem)
	schema := testSchema()
	batches, preds := 150, 25
	if testing.Short() {
		batches = 40
	}
	checked := 0
	for bi := 0; bi < batches; bi++ {
		b := genBatch(r, dataMem, r.Intn(200))
		g := &gen{r: r, b: b}
		for pi := 0; pi < preds; pi++ {
			p := g.pred(3)
			e, err := Parse(p.sql, schema)
			if err != nil {
				t.Fatalf("batch %d: Parse(%q): %v", bi, p.sql, err)
			}
			m, err := e.Evaluate(ctx, b.rec)
			if err != nil {
				t.Fatalf("batch %d: Evaluate(%q): %v", bi, p.sql, err)
			}
			if m.Len() != b.n || m.NullN() != 0 {
				t.Fatalf("%q: mask has %d rows and %d nulls, want %d rows, no nulls", p.sql, m.Len(), m.NullN(), b.n)
			}
			for i := 0; i < b.n; i++ {
				if want := p.eval(i) == tvTrue; m.Value(i) != want {
					row := make(map[string]any)
					for ci, c := range testCols {
						row[c.name] = b.vals[ci][i]
					}
					t.Fatalf("batch %d row %d: %q (normalized %q) selected=%v, reference says %v\nrow: %v",
						bi, i, p.sql, e.String(), m.Value(i), want, row)
				}
			}
			m.Release()

			// The normalized text must mean the same thing.
			e2, err := Parse(e.String(), schema)
			if err != nil {
				t.Fatalf("Parse(String()) of %q = %q: %v", p.sql, e.String(), err)
			}
			if e2.String() != e.String() {
				t.Fatalf("String is not stable: %q -> %q -> %q", p.sql, e.String(), e2.String())
			}
			m2, err := e2.Evaluate(ctx, b.rec)
			if err != nil {
				t.Fatalf("Evaluate(%q): %v", e.String(), err)
			}
			for i := 0; i < b.n; i++ {
				if want := p.eval(i) == tvTrue; m2.Value(i) != want {
					t.Fatalf("row %d: normalized %q of %q selected=%v, want %v", i, e.String(), p.sql, m2.Value(i), want)
				}
			}
			m2.Release()
			checked++
		}
		b.rec.Release()
	}
	evalMem.AssertSize(t, 0)
	t.Logf("%d predicates checked row by row", checked)
}

// TestEvaluateCases pins the semantics that matter most on a small batch.
func TestEvaluateCases(t *testing.T) {
	mem := memory.NewGoAllocator()
	schema := testSchema()
	bld := array.NewRecordBuilder(mem, schema)
	defer bld.Release()
	// Rows: 0 and 1 hold values, 2 is all null.
	bld.Field(0).(*array.Int16Builder).AppendValues([]int16{-32768, 32767, 0}, []bool{true, true, false})
	bld.Field(1).(*array.Int64Builder).AppendValues([]int64{1 << 53, 1<<53 + 1, 0}, []bool{true, true, false})
	bld.Field(2).(*array.Uint32Builder).AppendValues([]uint32{0, 4294967295, 0}, []bool{true, true, false})
	bld.Field(3).(*array.Float32Builder).AppendValues([]float32{0.1, 2.5, 0}, []bool{true, true, false})
	bld.Field(4).(*array.Float64Builder).AppendValues([]float64{0.1, 2.5, 0}, []bool{true, true, false})
	bld.Field(5).(*array.StringBuilder).AppendValues([]string{"SFO", "sfo", ""}, []bool{true, true, false})
	bld.Field(6).(*array.LargeStringBuilder).AppendValues([]string{"a%b", "ab", ""}, []bool{true, true, false})
	bld.Field(7).(*array.BooleanBuilder).AppendValues([]bool{true, false, false}, []bool{true, true, false})
	for _, v := range []string{"2006-01-01T00:00:00Z", "2006-03-31T23:59:59.999999Z"} {
		ts, _ := time.Parse(time.RFC3339Nano, v)
		bld.Field(8).(*array.TimestampBuilder).Append(arrowTS(ts))
	}
	bld.Field(8).AppendNull()
	bld.Field(9).(*array.Date32Builder).AppendValues([]arrowDate{baseDay, baseDay + 89, 0}, []bool{true, true, false})
	// bin: an empty value (not NULL), bytes that are not UTF-8; lbin: "é" as UTF-8, "a".
	bld.Field(10).(*array.BinaryBuilder).AppendValues([][]byte{{}, {0xff, 0x00}, nil}, []bool{true, true, false})
	bld.Field(11).(*array.BinaryBuilder).AppendValues([][]byte{[]byte("é"), []byte("a"), nil}, []bool{true, true, false})
	rec := bld.NewRecordBatch()
	defer rec.Release()

	cases := []struct {
		where string
		want  []bool
	}{
		{"i16 > 100000", []bool{false, false, false}},
		{"i16 < 100000", []bool{true, true, false}},
		{"NOT (i16 > 100000)", []bool{true, true, false}}, // NULL row stays unselected
		{"i16 >= -32768", []bool{true, true, false}},
		{"i16 = -40000 OR i16 = 32767", []bool{false, true, false}},
		{"i16 = 2.5", []bool{false, false, false}},
		{"i16 != 2.5", []bool{true, true, false}},
		{"i16 < -32767.5", []bool{true, false, false}},
		{"'5' > i16", []bool{true, false, false}},
		{"i64 = 9007199254740993", []bool{false, true, false}}, // exact, not via float64
		{"i64 > 9007199254740992.5", []bool{false, true, false}},
		{"u32 = 4294967295", []bool{false, true, false}},
		{"u32 > -1", []bool{true, true, false}},
		{"u32 < 0", []bool{false, false, false}},
		{"f32 = 0.1", []bool{false, false, false}}, // float32(0.1) is not the double 0.1
		{"f64 = 0.1", []bool{true, false, false}},
		{"f32 = 2.5", []bool{false, true, false}},
		{"f32 IN (2.5, 7)", []bool{false, true, false}},
		{"s = 'SFO'", []bool{true, false, false}}, // case-sensitive
		{"s IN ('SFO', NULL)", []bool{true, false, false}},
		{"s NOT IN ('SFO', NULL)", []bool{false, false, false}}, // NULL in list: never TRUE
		{"s NOT IN ('SFO')", []bool{false, true, false}},
		{"ls LIKE 'a\\%%'", []bool{true, false, false}},
		{"ls LIKE 'a_'", []bool{false, true, false}},
		{"ls NOT LIKE 'a%'", []bool{false, false, false}},
		{"b", []bool{true, false, false}},
		{"NOT b", []bool{false, true, false}},
		{"b IS NOT TRUE", []bool{false, true, true}},
		{"b IS FALSE", []bool{false, true, false}},
		{"b IS NOT FALSE", []bool{true, false, true}},
		{"b IN (TRUE)", []bool{true, false, false}},
		{"b = 1", []bool{true, false, false}},
		{"b > FALSE", []bool{true, false, false}},
		{"i16 IS NULL", []bool{false, false, true}},
		{"(i16 > 0) IS NULL", []bool{false, false, true}},
		{"i16 = NULL", []bool{false, false, false}},
		{"NOT (i16 = NULL)", []bool{false, false, false}},
		{"i16 > 0 OR b IS NULL", []bool{false, true, true}},
		{"ts BETWEEN '2006-01-01' AND '2006-03-31'", []bool{true, false, false}},
		{"ts BETWEEN '2006-01-01' AND '2006-03-31 23:59:59.999999'", []bool{true, true, false}},
		{"ts < '2006-03-31T23:59:59.9999991Z'", []bool{true, true, false}},
		{"ts = TIMESTAMP '2006-01-01 00:00:00'", []bool{true, false, false}},
		{"ts = DATE '2006-01-01'", []bool{true, false, false}},
		{"ts > '2006-01-01T01:00:00+02:00'", []bool{true, true, false}}, // = 2005-12-31T23:00Z
		{"d32 = '2006-03-31'", []bool{false, true, false}},
		{"d32 > '2006-01-01 00:00:01'", []bool{false, true, false}},
		{"d32 >= TIMESTAMP '2006-01-01 00:00:00.000000001'", []bool{false, true, false}},
		{"d32 < DATE '2006-01-02'", []bool{true, false, false}},
		{"i16 < i64", []bool{true, true, false}},
		{"i16 > u32", []bool{false, false, false}},
		{"f32 < f64", []bool{false, false, false}},
		{"f32 > f64", []bool{true, false, false}}, // float32(0.1) > 0.1
		{"s = ls", []bool{false, false, false}},
		{"b = b", []bool{true, true, false}},
		{"ts = ts", []bool{true, true, false}},
		{"1 = 1", []bool{true, true, true}},
		{"1 = 0 OR i16 > 0", []bool{false, true, false}},
		{"TRUE", []bool{true, true, true}},
		{"NULL", []bool{false, false, false}},
		{"NOT NULL", []bool{false, false, false}},
		{"`I16` > 0", []bool{false, true, false}}, // case-insensitive fallback
		{"t.i16 > 0", []bool{false, true, false}},
		{"bin IS NULL", []bool{false, false, true}},
		{"bin IS NOT NULL", []bool{true, true, false}},
		{"bin = ''", []bool{true, false, false}}, // the empty value, not NULL
		{"bin = X''", []bool{true, false, false}},
		{"bin = 0xFF00", []bool{false, true, false}},
		{"bin = x'ff'", []bool{false, false, false}},
		{"bin > 'z'", []bool{false, true, false}},  // bytewise: 0xff > 'z'
		{"bin < 0xFF", []bool{true, false, false}}, // a prefix orders first
		{"bin >= X'FF'", []bool{false, true, false}},
		{"X'FF' <= bin", []bool{false, true, false}},
		{"bin BETWEEN '' AND X'FF'", []bool{true, false, false}},
		{"bin NOT BETWEEN '' AND X'FF'", []bool{false, true, false}},
		{"bin IN (X'FF00', 'x')", []bool{false, true, false}},
		{"bin IN (X'FF00', NULL)", []bool{false, true, false}},
		{"bin NOT IN ('')", []bool{false, true, false}},
		{"bin <> ''", []bool{false, true, false}},
		{"lbin = 'é'", []bool{true, false, false}}, // a string literal is its UTF-8 bytes
		{"lbin = X'C3A9'", []bool{true, false, false}},
		{"lbin > 'a'", []bool{true, false, false}},
		{"lbin = b'01100001'", []bool{false, true, false}},
		{"lbin IN ('a', 0xC3A9)", []bool{true, true, false}},
		{"lbin < bin", []bool{false, true, false}},
		{"bin = bin", []bool{true, true, false}},
		{"lbin = s", []bool{false, false, false}},
		{"lbin > s", []bool{true, false, false}}, // 0xC3A9 > 'SFO'; 'a' < 'sfo'
		{"COALESCE(bin, X'00') = X'00'", []bool{false, false, true}},
		{"COALESCE(lbin, 'é') = 'é'", []bool{true, false, true}},
		{"CASE WHEN bin IS NULL THEN X'01' ELSE bin END < 'a'", []bool{true, false, true}},
		{"X'41' = 'A'", []bool{true, true, true}},
		{"bin IS NULL OR bin = 0xFF00", []bool{false, true, true}},
	}
	evalMem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	ctx := compute.WithAllocator(context.Background(), evalMem)
	for _, c := range cases {
		e, err := Parse(c.where, schema)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.where, err)
			continue
		}
		for _, sub := range []struct {
			name string
			off  int64
		}{{"whole", 0}, {"tail", 1}} {
			r := rec.NewSlice(sub.off, rec.NumRows())
			m, err := e.Evaluate(ctx, r)
			r.Release()
			if err != nil {
				t.Errorf("Evaluate(%q): %v", c.where, err)
				continue
			}
			if got, want := maskBools(m), c.want[sub.off:]; !equalBools(got, want) {
				t.Errorf("%s: %q (normalized %q) = %v, want %v", sub.name, c.where, e.String(), got, want)
			}
			m.Release()
		}
	}
	evalMem.AssertSize(t, 0)
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type arrowDate = arrow.Date32

func arrowTS(t time.Time) arrow.Timestamp { return arrow.Timestamp(t.UnixMicro()) }

// TestOtherTypes covers column types outside the property test: timestamp
// units and zones, date64, int8, uint64, and BETWEEN with column bounds.
func TestOtherTypes(t *testing.T) {
	mem := memory.NewGoAllocator()
	tsS := &arrow.TimestampType{Unit: arrow.Second, TimeZone: "America/New_York"}
	tsNS := &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	tsMS := &arrow.TimestampType{Unit: arrow.Millisecond}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: tsS, Nullable: true},
		{Name: "ns", Type: tsNS, Nullable: true},
		{Name: "ms", Type: tsMS, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	bld := array.NewRecordBuilder(mem, schema)
	defer bld.Release()
	t0 := time.Date(2006, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := time.Date(2006, 1, 1, 0, 0, 1, 0, time.UTC)
	bld.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(t0.Unix()), arrow.Timestamp(t1.Unix()), 0}, []bool{true, true, false})
	bld.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(t0.UnixNano() + 1), arrow.Timestamp(t1.UnixNano()), 0}, []bool{true, true, false})
	bld.Field(2).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(t0.UnixMilli()), arrow.Timestamp(t1.UnixMilli() - 1), 0}, []bool{true, true, false})
	bld.Field(3).(*array.Date64Builder).AppendValues([]arrow.Date64{arrow.Date64(t0.UnixMilli()), arrow.Date64(t0.AddDate(0, 0, 1).UnixMilli()), 0}, []bool{true, true, false})
	bld.Field(4).(*array.Int8Builder).AppendValues([]int8{-128, 127, 0}, []bool{true, true, false})
	bld.Field(5).(*array.Uint64Builder).AppendValues([]uint64{0, math.MaxUint64, 0}, []bool{true, true, false})
	bld.Field(6).(*array.Int32Builder).AppendValues([]int32{-5, 100, 0}, []bool{true, true, false})
	rec := bld.NewRecordBatch()
	defer rec.Release()
	cases := []struct {
		where string
		want  []bool
	}{
		{"s > '2006-01-01 00:00:00.5'", []bool{false, true, false}},
		{"s = '2006-01-01T00:00:01Z'", []bool{false, true, false}},
		{"s = '2005-12-31T19:00:00-05:00'", []bool{true, false, false}},
		{"s IN ('2006-01-01', '2007-01-01')", []bool{true, false, false}},
		{"ns > '2006-01-01'", []bool{true, true, false}},
		{"ns = '2006-01-01 00:00:00.000000001'", []bool{true, false, false}},
		{"ns > s", []bool{true, false, false}}, // different units and zones: compared as instants
		{"ms < s", []bool{false, true, false}}, // 00:00:00.999 < 00:00:01
		{"ms >= ns", []bool{false, false, false}},
		{"d64 = DATE '2006-01-02'", []bool{false, true, false}},
		{"d64 < '2006-01-01 12:00'", []bool{true, false, false}},
		{"i8 > 127.5", []bool{false, false, false}},
		{"i8 >= 127", []bool{false, true, false}},
		{"i8 < -128", []bool{false, false, false}},
		{"i8 IN (-128, 300)", []bool{true, false, false}},
		{"u64 = 18446744073709551615", []bool{false, true, false}},
		{"u64 > 18446744073709551614.5", []bool{false, true, false}},
		{"u64 < -1", []bool{false, false, false}},
		{"u64 IN (0, -3)", []bool{true, false, false}},
		{"i8 < i32", []bool{true, false, false}},
		{"i32 BETWEEN i8 AND 100", []bool{true, false, false}},
		{"-10 BETWEEN i8 AND i32", []bool{true, false, false}},
		{"i32 NOT BETWEEN i8 AND 100", []bool{false, true, false}}, // 127 > 100: empty range
	}
	for _, c := range cases {
		e, err := Parse(c.where, schema)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.where, err)
			continue
		}
		m, err := e.Evaluate(context.Background(), rec)
		if err != nil {
			t.Errorf("Evaluate(%q): %v", c.where, err)
			continue
		}
		if got := maskBools(m); !equalBools(got, c.want) {
			t.Errorf("%q = %v, want %v", c.where, got, c.want)
		}
		m.Release()
	}
	if _, err := Parse("u64 = i8", schema); !errors.Is(err, ErrType) {
		t.Errorf("uint64 = int8: %v, want ErrType", err)
	}
}

// TestEvaluateSchemaMismatch: a batch without the bound column, or with it
// under another type, is refused; a batch with the columns in another order
// (a projection) is evaluated by name.
func TestEvaluateSchemaMismatch(t *testing.T) {
	mem := memory.NewGoAllocator()
	e, err := Parse("delay > 5 AND origin = 'SFO'", flightsSchema())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(fields []arrow.Field, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
		defer b.Release()
		fill(b)
		return b.NewRecordBatch()
	}
	projected := mk([]arrow.Field{
		{Name: "origin", Type: arrow.BinaryTypes.LargeString},
		{Name: "delay", Type: arrow.PrimitiveTypes.Int64},
	}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.LargeStringBuilder).AppendValues([]string{"SFO", "SFO", "LAX"}, nil)
		b.Field(1).(*array.Int64Builder).AppendValues([]int64{10, 1, 10}, nil)
	})
	defer projected.Release()
	m, err := e.Evaluate(context.Background(), projected)
	if err != nil {
		t.Fatalf("projected batch: %v", err)
	}
	if got := maskBools(m); !equalBools(got, []bool{true, false, false}) {
		t.Errorf("projected batch: %v", got)
	}
	m.Release()

	missing := mk([]arrow.Field{{Name: "delay", Type: arrow.PrimitiveTypes.Int64}}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).Append(1)
	})
	defer missing.Release()
	if _, err := e.Evaluate(context.Background(), missing); !errors.Is(err, ErrUnknownColumn) || !strings.Contains(err.Error(), "origin") {
		t.Errorf("batch without origin: %v, want ErrUnknownColumn naming origin", err)
	}
	retyped := mk([]arrow.Field{
		{Name: "delay", Type: arrow.PrimitiveTypes.Int32},
		{Name: "origin", Type: arrow.BinaryTypes.LargeString},
	}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int32Builder).Append(1)
		b.Field(1).(*array.LargeStringBuilder).Append("SFO")
	})
	defer retyped.Release()
	if _, err := e.Evaluate(context.Background(), retyped); !errors.Is(err, ErrType) || !strings.Contains(err.Error(), "int32") {
		t.Errorf("batch with delay int32: %v, want ErrType naming the type", err)
	}
	empty := mk(flightsSchema().Fields(), func(*array.RecordBuilder) {})
	defer empty.Release()
	m, err = e.Evaluate(context.Background(), empty)
	if err != nil || m.Len() != 0 {
		t.Errorf("empty batch: %v, %v", m, err)
	}
	if m != nil {
		m.Release()
	}
}
