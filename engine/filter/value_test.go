package filter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var (
	tsUSType = &arrow.TimestampType{Unit: arrow.Microsecond}
	i8Type   = arrow.PrimitiveTypes.Int8
	i64Type  = arrow.PrimitiveTypes.Int64
	f64Type  = arrow.PrimitiveTypes.Float64
	strType  = arrow.BinaryTypes.String
)

// valueBatch has 4 rows; the last is null in every nullable column.
func valueBatch(t *testing.T) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: i64Type},
		{Name: "i8", Type: i8Type, Nullable: true},
		{Name: "i64", Type: i64Type, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "f64", Type: f64Type, Nullable: true},
		{Name: "s", Type: strType, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ts", Type: tsUSType, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(strType), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	valid := []bool{true, true, true, false}
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4}, nil)
	b.Field(1).(*array.Int8Builder).AppendValues([]int8{-128, 0, 100, 0}, valid)
	b.Field(2).(*array.Int64Builder).AppendValues([]int64{10, 0, -7, 0}, valid)
	b.Field(3).(*array.Uint32Builder).AppendValues([]uint32{1, 5, math.MaxUint32, 0}, valid)
	b.Field(4).(*array.Float64Builder).AppendValues([]float64{1.5, -2, 0.25, 0}, valid)
	b.Field(5).(*array.StringBuilder).AppendValues([]string{"a", "bb", "", ""}, valid)
	b.Field(6).(*array.BooleanBuilder).AppendValues([]bool{true, false, true, false}, valid)
	base := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC).UnixMicro()
	b.Field(7).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{arrow.Timestamp(base), arrow.Timestamp(base + 1), arrow.Timestamp(base + 2), 0}, valid)
	lb := b.Field(8).(*array.ListBuilder)
	for i := 0; i < 4; i++ {
		if i == 3 {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint("t", i))
	}
	return b.NewRecordBatch()
}

// values renders an array's entries as strings ("null" for nulls).
func values(arr arrow.Array) []string {
	out := make([]string, arr.Len())
	for i := range out {
		if arr.IsNull(i) {
			out[i] = "null"
		} else {
			out[i] = arr.ValueStr(i)
		}
	}
	return out
}

func TestValueExpressions(t *testing.T) {
	rec := valueBatch(t)
	defer rec.Release()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	ctx := compute.WithAllocator(context.Background(), mem)
	cases := []struct {
		expr   string
		target arrow.DataType // nil: natural type
		want   string         // values joined by "|"
		typ    arrow.DataType // natural type expected when target is nil
	}{
		{"i64 + 1", nil, "11|1|-6|null", i64Type},
		{"i8 + 1", i8Type, "-127|1|101|null", nil},
		{"i8 * 2 - i8", nil, "-128|0|100|null", i64Type},
		{"-i8", nil, "128|0|-100|null", i64Type},
		{"i64 / 4", nil, "2.5|0|-1.75|null", f64Type},
		{"i64 DIV 4", nil, "2|0|-1|null", i64Type},
		{"i64 % 4", nil, "2|0|-3|null", i64Type},
		{"i64 * 2", f64Type, "20|0|-14|null", nil},
		{"f64 * 2", arrow.PrimitiveTypes.Float32, "3|-4|0.5|null", nil},
		{"u32 + u32", nil, "2|10|8589934590|null", arrow.PrimitiveTypes.Uint64},
		{"u32 - 1", nil, "0|4|4294967294|null", i64Type},
		{"42", i8Type, "42|42|42|42", nil},
		{"'42'", i64Type, "42|42|42|42", nil},
		{"2.0", i64Type, "2|2|2|2", nil},
		{"2.5", nil, "2.5|2.5|2.5|2.5", f64Type},
		{"NULL", i64Type, "null|null|null|null", nil},
		{"i64 + NULL", nil, "null|null|null|null", i64Type},
		{"'x'", arrow.BinaryTypes.LargeString, "x|x|x|x", nil},
		{"s", arrow.BinaryTypes.LargeString, "a|bb||null", nil},
		{"TRUE", arrow.FixedWidthTypes.Boolean, "true|true|true|true", nil},
		{"i64 > 0", nil, "true|false|false|null", arrow.FixedWidthTypes.Boolean},
		{"NOT b", nil, "false|true|false|null", arrow.FixedWidthTypes.Boolean},
		{"s LIKE 'b%'", nil, "false|true|false|null", arrow.FixedWidthTypes.Boolean},
		{"TIMESTAMP '2024-01-02 03:04:05.25'", tsUSType, strings.Repeat("2024-01-02T03:04:05.25|", 3) + "2024-01-02T03:04:05.25", nil},
		{"'2024-01-02'", tsUSType, strings.Repeat("2024-01-02T00:00:00|", 3) + "2024-01-02T00:00:00", nil},
		{"DATE '2024-01-02'", arrow.FixedWidthTypes.Date32, "2024-01-02|2024-01-02|2024-01-02|2024-01-02", nil},
		{"ts", &arrow.TimestampType{Unit: arrow.Nanosecond}, "2024-01-02T03:04:05|2024-01-02T03:04:05.000001|2024-01-02T03:04:05.000002|null", nil},
		{"COALESCE(i64, id * 100)", nil, "10|0|-7|400", i64Type},
		{"IFNULL(s, 'none')", nil, "a|bb||none", strType},
		{"COALESCE(NULL, f64, 9)", nil, "1.5|-2|0.25|9", f64Type},
		{"CASE WHEN i64 <> 0 THEN 100 DIV i64 ELSE -1 END", nil, "10|-1|-14|-1", i64Type},
		{"CASE WHEN i64 > 0 THEN 'pos' WHEN i64 < 0 THEN 'neg' END", strType, "pos|null|neg|null", nil},
		{"CASE id WHEN 1 THEN 'one' WHEN 4 THEN 'four' ELSE s END", nil, "one|bb||four", strType},
		{"CASE WHEN i64 + 1 > 5 THEN 1.5 ELSE 2 END", nil, "1.5|2|2|2", f64Type},
		{"tags", arrow.ListOf(strType), "[\"t0\"]|[\"t1\"]|[\"t2\"]|null", nil},
		{"(i64 DIV 0) IS NULL", nil, "", arrow.FixedWidthTypes.Boolean}, // division by zero: an error
	}
	for _, c := range cases {
		e, err := ParseValue(c.expr, rec.Schema(), c.target)
		if err != nil {
			t.Errorf("ParseValue(%q): %v", c.expr, err)
			continue
		}
		if c.target == nil && !arrow.TypeEqual(e.Type(), c.typ) {
			t.Errorf("%q: type %s, want %s", c.expr, e.Type(), c.typ)
		}
		// The normalized text parses back to the same expression.
		if again, err := ParseValue(e.String(), rec.Schema(), c.target); err != nil || again.String() != e.String() {
			t.Errorf("%q normalized to %q, which reparses as %v (%v)", c.expr, e.String(), again, err)
		}
		arr, err := e.Evaluate(ctx, rec)
		if c.want == "" {
			if !errors.Is(err, ErrArithmetic) {
				t.Errorf("%q: %v, want ErrArithmetic", c.expr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if !arrow.TypeEqual(arr.DataType(), e.Type()) || arr.Len() != 4 {
			t.Errorf("%q: %s with %d rows, want %s with 4", c.expr, arr.DataType(), arr.Len(), e.Type())
		}
		if got := strings.Join(values(arr), "|"); got != c.want {
			t.Errorf("%q = %s, want %s", c.expr, got, c.want)
		}
		arr.Release()
	}
	mem.AssertSize(t, 0)
}

func TestValueErrors(t *testing.T) {
	rec := valueBatch(t)
	defer rec.Release()
	schema := rec.Schema()
	parse := []struct {
		expr   string
		target arrow.DataType
		want   error
		msg    string
	}{
		{"300", i8Type, ErrType, "out of range"},
		{"2.5", i64Type, ErrType, "not an integer"},
		{"'abc'", i64Type, ErrType, "not a number"},
		{"1", strType, ErrType, "string literal"},
		{"s", i64Type, ErrType, "cannot be stored as int64"},
		{"i64", strType, ErrType, "cannot be stored as utf8"},
		{"TIMESTAMP '2024-01-02 00:00:00.0000001'", tsUSType, ErrType, "finer than"},
		{"TIMESTAMP '2024-01-02 10:00:00'", arrow.FixedWidthTypes.Date32, ErrType, "finer than"},
		{"'noon'", tsUSType, ErrType, "timestamp"},
		{"i64 + s", nil, ErrType, "needs numbers"},
		{"f64 DIV 2", nil, ErrType, "integers"},
		{"-s", nil, ErrType, "unary minus"},
		{"CASE WHEN b THEN 1 ELSE 'x' END", nil, ErrType, "mixes"},
		{"CASE WHEN b THEN 1 ELSE 'x' END", i64Type, ErrType, "not a number"},
		{"COALESCE(s, 1)", strType, ErrType, "string literal"},
		{"lower(s)", nil, ErrUnsupported, "LOWER"},
		{"(SELECT 1)", nil, ErrUnsupported, ""},
		{"nope + 1", nil, ErrUnknownColumn, "nope"},
		{"i64 +", nil, ErrSyntax, "at the end"},
		{"", nil, ErrSyntax, "empty value"},
		{"1 ORDER BY 1", nil, ErrSyntax, "after the value expression"},
		{"IFNULL(s)", nil, ErrSyntax, "IFNULL"},
		{"TRUE", i64Type, ErrType, "cannot be stored"},
		{"9223372036854775808", i64Type, ErrType, "out of range"},
		{"18446744073709551616", nil, ErrType, "out of range"},
	}
	for _, c := range parse {
		_, err := ParseValue(c.expr, schema, c.target)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseValue(%q, %v) = %v, want %v containing %q", c.expr, c.target, err, c.want, c.msg)
		}
	}
	// Evaluate's errors name the part that failed (the caller names the whole expression:
	// WHERE "…" or SET col = …), without a "filter" prefix.
	eval := []struct {
		expr   string
		target arrow.DataType
		want   error
		msg    string
	}{
		{"i8 * 2", i8Type, ErrType, "type mismatch: a value does not fit int8: "},    // -256 and 200 do not fit int8
		{"i64 / 4", i64Type, ErrType, "type mismatch: a value does not fit int64: "}, // 2.5 is not an integer
		{"i64 + 9223372036854775807", nil, ErrArithmetic, "integer overflow in i64 + 9223372036854775807 (10 + 9223372036854775807)"},
		{"id DIV i64", nil, ErrArithmetic, "division by zero in id DIV i64 (2 DIV 0)"}, // row 2: 2 DIV 0
		{"id % i64", nil, ErrArithmetic, "division by zero in id % i64 (2 % 0)"},
		{"f64 / 0", nil, ErrArithmetic, "division by zero in f64 / 0"},
		{"u32 + u32 * 4294967297", nil, ErrArithmetic, "integer overflow in u32 * 4294967297 (4294967295 * 4294967297)"},
		{"CASE WHEN id = 3 THEN i8 * 2 ELSE i8 END", i8Type, ErrType, "type mismatch: a value does not fit int8"}, // 200 does not fit int8
		{"f64 * 1e300", arrow.PrimitiveTypes.Float32, ErrType, "type mismatch: a value does not fit float32"},
		{"f64 * 0.5", arrow.PrimitiveTypes.Int64, ErrType, "type mismatch: a value does not fit int64"}, // 0.75 is not an integer
	}
	for _, c := range eval {
		e, err := ParseValue(c.expr, schema, c.target)
		if err != nil {
			t.Errorf("ParseValue(%q): %v", c.expr, err)
			continue
		}
		arr, err := e.Evaluate(context.Background(), rec)
		if !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), c.msg) || strings.Contains(err.Error(), "filter") {
			t.Errorf("Evaluate(%q) = %v, %v; want %v starting %q", c.expr, arr, err, c.want, c.msg)
		}
	}
	// Two unsigned operands compute as uint64: going below zero is an error.
	e, _ := ParseValue("u32 - (u32 + u32)", schema, nil)
	if _, err := e.Evaluate(context.Background(), rec); !errors.Is(err, ErrArithmetic) {
		t.Errorf("unsigned underflow: %v", err)
	}
	// AlwaysNull lets a caller refuse NULL into a non-nullable column up front.
	for expr, want := range map[string]bool{"NULL": true, "i64 * NULL": true, "-(i64 + NULL)": true, "i64": false, "COALESCE(NULL)": false} {
		e, err := ParseValue(expr, schema, i64Type)
		if err != nil || e.AlwaysNull() != want {
			t.Errorf("%q: AlwaysNull %v (%v), want %v", expr, e != nil && e.AlwaysNull(), err, want)
		}
	}
	// A batch without the column is refused, also when it has no rows.
	e, _ = ParseValue("i64 + 1", schema, nil)
	empty := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, 0)
	if _, err := e.Evaluate(context.Background(), empty); !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("empty batch without the column: %v", err)
	}
	if cols := e.Columns(); len(cols) != 1 || cols[0] != "i64" {
		t.Errorf("Columns = %v", cols)
	}
}

// TestWhereWithExpressions: comparisons between value expressions and IS
// NULL of an expression work in WHERE; statistics never prune them.
func TestWhereWithExpressions(t *testing.T) {
	rec := valueBatch(t)
	defer rec.Release()
	cases := map[string][]bool{
		"i64 + 1 > 5":                             {true, false, false, false},
		"i64 * 2 = id * 20":                       {true, false, false, false},
		"id % 2 = 0 AND id > 1":                   {false, true, false, true},
		"i64 + NULL IS NULL":                      {true, true, true, true},
		"(i64 - id) IS NOT NULL":                  {true, true, true, false},
		"f64 * 2 < i8":                            {false, true, true, false},
		"CASE WHEN b THEN 'y' ELSE 'n' END = 'y'": {true, false, true, false},
		"COALESCE(s, 'none') = 'none'":            {false, false, false, true},
		"ts + 0 > 0":                              nil, // timestamps are not numbers
	}
	for where, want := range cases {
		e, err := Parse(where, rec.Schema())
		if want == nil {
			if !errors.Is(err, ErrType) {
				t.Errorf("Parse(%q) = %v, want ErrType", where, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", where, err)
			continue
		}
		m, err := e.Evaluate(context.Background(), rec)
		if err != nil {
			t.Errorf("Evaluate(%q): %v", where, err)
			continue
		}
		if got := maskBools(m); !equalBools(got, want) {
			t.Errorf("%q = %v, want %v", where, got, want)
		}
		m.Release()
		if _, ok := e.root.(*cmpExpr); ok && !e.MayMatch(4, func(string) (ColumnStats, bool) { return ColumnStats{NullCount: 4}, true }) {
			t.Errorf("%q: statistics pruned an expression comparison", where)
		}
		if again, err := Parse(e.String(), rec.Schema()); err != nil || again.String() != e.String() {
			t.Errorf("%q normalized to %q, reparsed %v", where, e.String(), err)
		}
	}
}

// arithRef is a random integer arithmetic expression with a row-at-a-time
// reference computed in big integers, checked against int64/uint64 bounds
// exactly where the engine computes.
type arithRef struct {
	sql      string
	unsigned bool // computed as uint64 (both operands unsigned)
	// eval returns the row's value (nil for NULL) or an error for overflow
	// or division by zero.
	eval func(row int) (*big.Int, error)
}

var (
	minI64 = big.NewInt(math.MinInt64)
	maxI64 = big.NewInt(math.MaxInt64)
	maxU64 = new(big.Int).SetUint64(math.MaxUint64)
)

func inRange(v *big.Int, unsigned bool) bool {
	if unsigned {
		return v.Sign() >= 0 && v.Cmp(maxU64) <= 0
	}
	return v.Cmp(minI64) >= 0 && v.Cmp(maxI64) <= 0
}

var errRef = errors.New("reference: arithmetic error")

// genArith makes an expression of at most depth operators; depth > 0
// gives at least one (a bare literal into int16 fails when parsed).
func genArith(r *rand.Rand, b *tbatch, depth int) arithRef {
	if depth == 0 {
		if r.Intn(3) == 0 {
			k := int64(r.Intn(21) - 10)
			if r.Intn(8) == 0 {
				k = []int64{math.MaxInt64, math.MinInt64 + 1, 1 << 32}[r.Intn(3)]
			}
			sql := fmt.Sprint(k)
			if k < 0 {
				sql = "(" + sql + ")"
			}
			return arithRef{sql: sql, eval: func(int) (*big.Int, error) { return big.NewInt(k), nil }}
		}
		name := []string{"i16", "i64", "u32"}[r.Intn(3)]
		ci := colIndex(name)
		return arithRef{sql: name, unsigned: name == "u32", eval: func(row int) (*big.Int, error) {
			v := b.vals[ci][row]
			if v == nil {
				return nil, nil
			}
			return new(big.Int).Set(v.(*big.Rat).Num()), nil
		}}
	}
	l, rr := genArith(r, b, r.Intn(depth)), genArith(r, b, r.Intn(depth))
	op := []string{"+", "-", "*", "DIV", "%"}[r.Intn(5)]
	unsigned := l.unsigned && rr.unsigned
	return arithRef{sql: "(" + l.sql + " " + op + " " + rr.sql + ")", unsigned: unsigned, eval: func(row int) (*big.Int, error) {
		x, err1 := l.eval(row)
		y, err2 := rr.eval(row)
		if err1 != nil || err2 != nil {
			return nil, errRef
		}
		// Operands are cast to the computation type first, each on its own
		// (so a value that does not fit fails even beside a NULL).
		if (x != nil && !inRange(x, unsigned)) || (y != nil && !inRange(y, unsigned)) {
			return nil, errRef
		}
		if x == nil || y == nil {
			return nil, nil
		}
		var v *big.Int
		switch op {
		case "+":
			v = new(big.Int).Add(x, y)
		case "-":
			v = new(big.Int).Sub(x, y)
		case "*":
			v = new(big.Int).Mul(x, y)
		default:
			if y.Sign() == 0 {
				return nil, errRef
			}
			v = new(big.Int).Quo(x, y)
			if op == "%" {
				if !inRange(v, unsigned) {
					return nil, errRef
				}
				v = new(big.Int).Rem(x, y)
			}
		}
		if !inRange(v, unsigned) {
			return nil, errRef
		}
		return v, nil
	}}
}

// TestArithmeticMatchesReference evaluates random integer expressions over
// random batches (with nulls, extreme values and sliced buffers): either
// every value equals the big-integer reference, or the reference overflows
// or divides by zero on some non-null row and Evaluate fails with
// ErrArithmetic. Stored into int16, values outside int16 fail with ErrType.
func TestArithmeticMatchesReference(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	ctx := compute.WithAllocator(context.Background(), mem)
	schema := testSchema()
	rounds := 3000
	if testing.Short() {
		rounds = 600
	}
	var ok, failed int
	for i := 0; i < rounds; i++ {
		b := genBatch(r, memory.NewGoAllocator(), 1+r.Intn(20))
		g := genArith(r, b, 1+r.Intn(3))
		target := arrow.DataType(nil)
		if r.Intn(2) == 0 {
			target = arrow.PrimitiveTypes.Int16
		}
		e, err := ParseValue(g.sql, schema, target)
		if err != nil {
			t.Fatalf("ParseValue(%q): %v", g.sql, err)
		}
		want := make([]*big.Int, b.n)
		refErr := false
		for row := 0; row < b.n; row++ {
			if want[row], err = g.eval(row); err != nil {
				refErr = true
			}
		}
		fits := true
		for _, v := range want {
			if v != nil && (v.Cmp(big.NewInt(math.MinInt16)) < 0 || v.Cmp(big.NewInt(math.MaxInt16)) > 0) {
				fits = false
			}
		}
		arr, err := e.Evaluate(ctx, b.rec)
		switch {
		case refErr:
			if !errors.Is(err, ErrArithmetic) {
				t.Fatalf("%q: got %v, %v; the reference fails on some row, want ErrArithmetic", g.sql, arr, err)
			}
			failed++
			continue
		case target != nil && !fits:
			if !errors.Is(err, ErrType) {
				t.Fatalf("%q into int16: got %v, %v; want ErrType (reference %v)", g.sql, arr, err, want)
			}
			continue
		case err != nil:
			t.Fatalf("%q: %v (reference %v)", g.sql, err, want)
		}
		got := values(arr)
		for row, v := range want {
			w := "null"
			if v != nil {
				w = v.String()
			}
			if got[row] != w {
				t.Fatalf("%q row %d = %s, reference %s (all: %v vs %v)", g.sql, row, got[row], w, got, want)
			}
		}
		arr.Release()
		b.rec.Release()
		ok++
	}
	t.Logf("%d expressions matched, %d failed as the reference did", ok, failed)
	mem.AssertSize(t, 0)
}

// TestCastIgnoresValuesUnderNulls: the bytes under a null slot (anything a
// kernel left there) never fail a cast or an operation.
func TestCastIgnoresValuesUnderNulls(t *testing.T) {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: i64Type, Nullable: true},
		{Name: "f", Type: f64Type, Nullable: true},
	}, nil)
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{math.MaxInt64, 5, 0}, []bool{true, true, true})
	xs := ib.NewInt64Array()
	fb := array.NewFloat64Builder(mem)
	fb.AppendValues([]float64{math.NaN(), 2, 1e300}, nil)
	fs := fb.NewFloat64Array()
	// The same buffers with a validity bitmap marking rows 0 and 2 null.
	vb := array.NewBooleanBuilder(mem)
	vb.AppendValues([]bool{false, true, false}, nil)
	valid := vb.NewBooleanArray()
	withNulls := func(a arrow.Array) arrow.Array {
		d := array.NewData(a.DataType(), 3, []*memory.Buffer{valid.Data().Buffers()[1], a.Data().Buffers()[1]}, nil, 2, 0)
		defer d.Release()
		return array.MakeFromData(d)
	}
	rec := array.NewRecordBatch(schema, []arrow.Array{withNulls(xs), withNulls(fs)}, 3)
	for _, c := range []struct {
		expr   string
		target arrow.DataType
	}{
		{"x", i8Type}, {"x + 1", i8Type}, {"x * 2", nil}, {"-x", nil}, {"7 DIV (x - 5)", nil},
		{"f", i8Type}, {"f * 2", arrow.PrimitiveTypes.Float32}, {"x DIV 0 + 1", nil},
	} {
		e, err := ParseValue(c.expr, schema, c.target)
		if err != nil {
			t.Fatalf("ParseValue(%q): %v", c.expr, err)
		}
		arr, err := e.Evaluate(context.Background(), rec)
		if c.expr == "7 DIV (x - 5)" || c.expr == "x DIV 0 + 1" {
			if !errors.Is(err, ErrArithmetic) { // row 1 is valid: 7 DIV 0, 5 DIV 0
				t.Errorf("%q: %v, want ErrArithmetic from the valid row", c.expr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if got := values(arr); got[0] != "null" || got[2] != "null" || got[1] == "null" {
			t.Errorf("%q = %v", c.expr, got)
		}
		arr.Release()
	}
}

// TestParseConcurrently: parsers are pooled and reuse their memory; parses on several
// goroutines at once must each bind their own text (run with -race).
func TestParseConcurrently(t *testing.T) {
	schema := testSchema()
	texts := []string{"i64 + 1 > 5", "s = 'x' OR i16 IN (1, 2)", "f64 BETWEEN 1 AND 2", "ts > '2006-01-02'", "NOT b"}
	values := []string{"i64 * 2", "CASE WHEN b THEN s ELSE ls END", "COALESCE(i16, u32, 7)", "-f32"}
	want := map[string]string{}
	for _, w := range texts {
		e, err := Parse(w, schema)
		if err != nil {
			t.Fatal(err)
		}
		want[w] = e.String()
	}
	for _, v := range values {
		e, err := ParseValue(v, schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[v] = e.String()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				w, v := texts[(g+i)%len(texts)], values[(g+i)%len(values)]
				e, err := Parse(w, schema)
				if err != nil || e.String() != want[w] {
					errs <- fmt.Errorf("Parse(%q) = %v, %v; want %s", w, e, err, want[w])
					return
				}
				ve, err := ParseValue(v, schema, nil)
				if err != nil || ve.String() != want[v] {
					errs <- fmt.Errorf("ParseValue(%q) = %v, %v; want %s", v, ve, err, want[v])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
