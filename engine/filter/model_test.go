package filter

// A brute-force reference for the property tests: random batches whose
// values are also kept as plain Go values, and random predicates that carry
// both their SQL text and a row-at-a-time evaluator written independently of
// the package (exact rationals for integers and times, float64 for floats).

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type tkind int

const (
	kInt tkind = iota
	kFloat
	kStr
	kBool
	kTime // timestamp[us]: reference value is microseconds
	kDate // date32: reference value is days
	kBin  // binary, large_binary: reference value is the bytes as a Go string
)

type tcol struct {
	name string
	typ  arrow.DataType
	kind tkind
}

var tsUS = &arrow.TimestampType{Unit: arrow.Microsecond}

var testCols = []tcol{
	{"i16", arrow.PrimitiveTypes.Int16, kInt},
	{"i64", arrow.PrimitiveTypes.Int64, kInt},
	{"u32", arrow.PrimitiveTypes.Uint32, kInt},
	{"f32", arrow.PrimitiveTypes.Float32, kFloat},
	{"f64", arrow.PrimitiveTypes.Float64, kFloat},
	{"s", arrow.BinaryTypes.String, kStr},
	{"ls", arrow.BinaryTypes.LargeString, kStr},
	{"b", arrow.FixedWidthTypes.Boolean, kBool},
	{"ts", tsUS, kTime},
	{"d32", arrow.FixedWidthTypes.Date32, kDate},
	{"bin", arrow.BinaryTypes.Binary, kBin},
	{"lbin", arrow.BinaryTypes.LargeBinary, kBin},
}

func testSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(testCols))
	for i, c := range testCols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// tbatch is a record batch plus its values as Go values: nil for null,
// *big.Rat for integers, booleans (0/1), timestamps (µs) and dates (days),
// float64 for floats, string for strings.
type tbatch struct {
	n    int
	rec  arrow.RecordBatch
	vals [][]any
}

const (
	baseUS  = int64(1136073600) * 1e6 // 2006-01-01T00:00:00Z
	baseDay = 13149                   // 2006-01-01
	strRune = "abAé"
)

func rat(i int64) *big.Rat { return new(big.Rat).SetInt64(i) }

func randString(r *rand.Rand) string {
	runes := []rune(strRune)
	var sb strings.Builder
	for n := r.Intn(4); n > 0; n-- {
		sb.WriteRune(runes[r.Intn(len(runes))])
	}
	return sb.String()
}

func randFloat(r *rand.Rand) float64 {
	switch r.Intn(12) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*r.Intn(2))
	case 2:
		return math.Copysign(0, -1)
	case 3:
		return 0.1
	}
	return float64(r.Intn(41)-20) / 4
}

// binBytes are the bytes of random binary values: NUL, ASCII, bytes that are not
// UTF-8 on their own (0x80, 0xc3, 0xff) and the two bytes of "é" (0xc3 0xa9).
var binBytes = []byte{0x00, 'a', 'b', 0x7f, 0x80, 0xc3, 0xa9, 0xff}

// randBytes returns 0 to 3 random bytes (often empty, often not UTF-8).
func randBytes(r *rand.Rand) string {
	b := make([]byte, r.Intn(4))
	for i := range b {
		b[i] = binBytes[r.Intn(len(binBytes))]
	}
	return string(b)
}

// genBatch makes n rows; the record is a slice at a random offset of a
// larger one, so offsets into buffers are exercised.
func genBatch(r *rand.Rand, mem memory.Allocator, n int) *tbatch {
	off := r.Intn(9)
	total := n + off + r.Intn(5)
	bld := array.NewRecordBuilder(mem, testSchema())
	defer bld.Release()
	vals := make([][]any, len(testCols))
	for ci, c := range testCols {
		nullP := []float64{0, 0, 0.1, 0.5, 1}[r.Intn(5)]
		col := make([]any, total)
		fb := bld.Field(ci)
		for i := 0; i < total; i++ {
			if r.Float64() < nullP {
				fb.AppendNull()
				continue
			}
			switch c.name {
			case "i16":
				v := int16(r.Intn(101) - 50)
				if r.Intn(20) == 0 {
					v = []int16{math.MaxInt16, math.MinInt16}[r.Intn(2)]
				}
				fb.(*array.Int16Builder).Append(v)
				col[i] = rat(int64(v))
			case "i64":
				v := int64(r.Intn(201) - 100)
				if r.Intn(20) == 0 {
					v = []int64{math.MaxInt64, math.MinInt64, 1 << 53, 1<<53 + 1}[r.Intn(4)]
				}
				fb.(*array.Int64Builder).Append(v)
				col[i] = rat(v)
			case "u32":
				v := uint32(r.Intn(101))
				if r.Intn(20) == 0 {
					v = math.MaxUint32
				}
				fb.(*array.Uint32Builder).Append(v)
				col[i] = rat(int64(v))
			case "f32":
				v := float32(randFloat(r))
				fb.(*array.Float32Builder).Append(v)
				col[i] = float64(v)
			case "f64":
				v := randFloat(r)
				fb.(*array.Float64Builder).Append(v)
				col[i] = v
			case "s":
				v := randString(r)
				fb.(*array.StringBuilder).Append(v)
				col[i] = v
			case "ls":
				v := randString(r)
				fb.(*array.LargeStringBuilder).Append(v)
				col[i] = v
			case "b":
				v := r.Intn(2) == 1
				fb.(*array.BooleanBuilder).Append(v)
				col[i] = rat(int64(r2i(v)))
			case "ts":
				v := baseUS + int64(r.Intn(120))*86400e6
				switch r.Intn(3) {
				case 1:
					v += int64(r.Intn(86400)) * 1e6
				case 2:
					v += r.Int63n(86400e6)
				}
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(v))
				col[i] = rat(v)
			case "d32":
				v := int32(baseDay + r.Intn(130) - 10)
				fb.(*array.Date32Builder).Append(arrow.Date32(v))
				col[i] = rat(int64(v))
			case "bin", "lbin":
				v := randBytes(r)
				fb.(*array.BinaryBuilder).Append([]byte(v))
				col[i] = v
			}
		}
		vals[ci] = col[off : off+n]
	}
	full := bld.NewRecordBatch()
	defer full.Release()
	return &tbatch{n: n, rec: full.NewSlice(int64(off), int64(off+n)), vals: vals}
}

func r2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ---- reference semantics ----

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case *big.Rat:
		f, _ := x.Float64()
		return f
	}
	panic(fmt.Sprintf("toFloat(%T)", v))
}

// compareRef orders a and b; unordered is true when a NaN is involved.
func compareRef(a, b any) (c int, unordered bool) {
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string)), false
	case *big.Rat:
		if y, ok := b.(*big.Rat); ok {
			return x.Cmp(y), false
		}
	}
	fa, fb := toFloat(a), toFloat(b)
	switch {
	case math.IsNaN(fa) || math.IsNaN(fb):
		return 0, true
	case fa < fb:
		return -1, false
	case fa > fb:
		return 1, false
	}
	return 0, false
}

func cmpRef(op cmpOp, a, b any) tv {
	if a == nil || b == nil {
		return tvNull
	}
	c, unord := compareRef(a, b)
	if unord {
		return tvOf(op == opNE)
	}
	return tvOf(op.holds(c))
}

func andRef(a, b tv) tv {
	switch {
	case a == tvFalse || b == tvFalse:
		return tvFalse
	case a == tvNull || b == tvNull:
		return tvNull
	}
	return tvTrue
}

func orRef(a, b tv) tv {
	switch {
	case a == tvTrue || b == tvTrue:
		return tvTrue
	case a == tvNull || b == tvNull:
		return tvNull
	}
	return tvFalse
}

func notRef(a tv) tv {
	switch a {
	case tvTrue:
		return tvFalse
	case tvFalse:
		return tvTrue
	}
	return tvNull
}

// likeRef matches SQL LIKE by recursion over runes (escape '\').
func likeRef(s, p []rune) bool {
	if len(p) == 0 {
		return len(s) == 0
	}
	switch {
	case p[0] == '\\' && len(p) > 1:
		return len(s) > 0 && s[0] == p[1] && likeRef(s[1:], p[2:])
	case p[0] == '%':
		for i := 0; i <= len(s); i++ {
			if likeRef(s[i:], p[1:]) {
				return true
			}
		}
		return false
	case p[0] == '_':
		return len(s) > 0 && likeRef(s[1:], p[1:])
	}
	return len(s) > 0 && s[0] == p[0] && likeRef(s[1:], p[1:])
}

// ---- random predicates ----

// tpred is a predicate as SQL text plus its reference evaluator.
type tpred struct {
	sql  string
	eval func(row int) tv
}

type gen struct {
	r *rand.Rand
	b *tbatch
}

func (g *gen) col() (int, tcol) {
	i := g.r.Intn(len(testCols))
	return i, testCols[i]
}

// sample returns a non-null value of column ci from the batch, if any.
func (g *gen) sample(ci int) any {
	vs := g.b.vals[ci]
	for k := 0; k < 4 && len(vs) > 0; k++ {
		if v := vs[g.r.Intn(len(vs))]; v != nil {
			return v
		}
	}
	return nil
}

func quoteSQL(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// lit returns a literal for column ci: its SQL text and reference value
// (nil for NULL).
func (g *gen) lit(ci int) (string, any) {
	r := g.r
	c := testCols[ci]
	if r.Intn(25) == 0 {
		return "NULL", nil
	}
	switch c.kind {
	case kInt, kFloat:
		var text string
		if v := g.sample(ci); v != nil && r.Intn(3) == 0 {
			if f, ok := v.(float64); ok {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					text = "7"
				} else {
					text = strconv.FormatFloat(f, 'g', -1, 64)
					if f == 0 {
						text = "0"
					}
				}
			} else {
				text = v.(*big.Rat).RatString()
			}
		} else {
			switch r.Intn(8) {
			case 0:
				text = []string{"40000", "-40000", "32767", "-32768", "5000000000", "9223372036854775807",
					"-9223372036854775808", "99999999999999999999", "-99999999999999999999",
					"18446744073709551615", "4294967295", "4294967296", "9007199254740993"}[r.Intn(13)]
			case 1:
				text = fmt.Sprintf("%d.%s", r.Intn(41)-20, []string{"5", "25", "1", "75"}[r.Intn(4)])
			case 2:
				text = fmt.Sprintf("%de0", r.Intn(41)-20)
				if r.Intn(2) == 0 {
					text = fmt.Sprintf("%d.5e0", r.Intn(41)-20)
				}
			case 3:
				text = quoteSQL(strconv.Itoa(r.Intn(41) - 20))
				if r.Intn(2) == 0 {
					text = quoteSQL(fmt.Sprintf("%d.5", r.Intn(21)-10))
				}
			default:
				text = strconv.Itoa(r.Intn(121) - 60)
			}
		}
		num := strings.Trim(text, "'")
		v, ok := new(big.Rat).SetString(num)
		if !ok {
			panic("bad generated number " + text)
		}
		if c.kind == kFloat {
			return text, toFloat(v)
		}
		return text, v
	case kStr:
		if v := g.sample(ci); v != nil && r.Intn(2) == 0 {
			return quoteSQL(v.(string)), v
		}
		if r.Intn(10) == 0 {
			return quoteSQL("it's"), "it's"
		}
		s := randString(r)
		if r.Intn(2) == 0 {
			return `"` + s + `"`, s
		}
		return quoteSQL(s), s
	case kBool:
		if r.Intn(4) == 0 {
			b := r.Intn(2)
			return strconv.Itoa(b), rat(int64(b))
		}
		if r.Intn(2) == 0 {
			return "TRUE", rat(1)
		}
		return "FALSE", rat(0)
	case kTime, kDate:
		return g.timeLit(ci)
	case kBin:
		v := randBytes(r)
		if s := g.sample(ci); s != nil && r.Intn(2) == 0 {
			v = s.(string)
		}
		return bytesLit(r, v), v
	}
	panic("unreachable")
}

// bytesLit spells the bytes v as a literal a binary column compares with: a string
// (when v is printable UTF-8), X'…', 0x… (not for no bytes) or b'…'.
func bytesLit(r *rand.Rand, v string) string {
	printable := utf8.ValidString(v) && !strings.ContainsFunc(v, func(c rune) bool { return c < ' ' || c == 0x7f || c == '\\' })
	switch k := r.Intn(4); {
	case k == 0 && printable:
		return quoteSQL(v)
	case k == 1 && v != "":
		return "0x" + hex.EncodeToString([]byte(v))
	case k == 2:
		var sb strings.Builder
		for _, c := range []byte(v) {
			fmt.Fprintf(&sb, "%08b", c)
		}
		return "b'" + sb.String() + "'"
	}
	return "X'" + strings.ToUpper(hex.EncodeToString([]byte(v))) + "'"
}

// timeLit returns a temporal literal near the data in one of the accepted
// spellings; the reference value is exact in the column's unit.
func (g *gen) timeLit(ci int) (string, any) {
	r := g.r
	c := testCols[ci]
	var t time.Time
	if v := g.sample(ci); v != nil && r.Intn(3) == 0 {
		n := v.(*big.Rat).Num().Int64()
		if c.kind == kTime {
			t = time.UnixMicro(n).UTC()
		} else {
			t = time.Unix(n*86400, 0).UTC()
		}
	} else {
		t = time.Unix(baseUS/1e6, 0).UTC().AddDate(0, 0, r.Intn(140)-10)
		switch r.Intn(5) {
		case 1:
			t = t.Add(time.Duration(r.Intn(86400)) * time.Second)
		case 2:
			t = t.Add(time.Duration(r.Int63n(86400e6)) * time.Microsecond)
		case 3:
			t = t.Add(time.Duration(r.Int63n(86400e9)))
		}
	}
	midnight := t.Equal(t.Truncate(24 * time.Hour))
	var text string
	switch k := r.Intn(6); {
	case midnight && k == 0:
		text = "DATE '" + t.Format("2006-01-02") + "'"
	case midnight && k == 1:
		text = quoteSQL(t.Format("2006-01-02"))
	case k == 2:
		text = quoteSQL(t.Format(time.RFC3339Nano))
	case k == 3:
		text = quoteSQL(t.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano))
	case k == 4:
		text = "TIMESTAMP '" + t.Format("2006-01-02 15:04:05.999999999") + "'"
	default:
		text = quoteSQL(t.Format("2006-01-02 15:04:05.999999999"))
	}
	ns := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(1e9))
	ns.Add(ns, big.NewInt(int64(t.Nanosecond())))
	den := big.NewInt(1000)
	if c.kind == kDate {
		den = big.NewInt(86400e9)
	}
	return text, new(big.Rat).SetFrac(ns, den)
}

var opsSQL = map[cmpOp][]string{opEQ: {"="}, opNE: {"!=", "<>"}, opLT: {"<"}, opLE: {"<="}, opGT: {">"}, opGE: {">="}}

func (g *gen) op() (cmpOp, string) {
	op := cmpOp(g.r.Intn(6))
	s := opsSQL[op]
	return op, s[g.r.Intn(len(s))]
}

// colPairs are column pairs the filter compares directly.
var colPairs = [][2]string{{"i16", "i64"}, {"i16", "u32"}, {"i64", "f64"}, {"f32", "f64"}, {"i16", "f32"},
	{"s", "ls"}, {"b", "b"}, {"ts", "ts"}, {"d32", "d32"}, {"i64", "i64"}, {"u32", "u32"}, {"bin", "lbin"}, {"bin", "bin"}, {"s", "bin"}, {"lbin", "ls"}}

func colIndex(name string) int {
	for i, c := range testCols {
		if c.name == name {
			return i
		}
	}
	panic(name)
}

func (g *gen) leaf() tpred {
	r := g.r
	vals := g.b.vals
	switch r.Intn(10) {
	case 0, 1, 2: // column op literal, either order
		ci, c := g.col()
		op, ops := g.op()
		text, lv := g.lit(ci)
		sql := c.name + " " + ops + " " + text
		if r.Intn(3) == 0 {
			sql = text + " " + opsSQL[op.flip()][0] + " " + c.name
		}
		return tpred{sql, func(i int) tv { return cmpRef(op, vals[ci][i], lv) }}
	case 3: // column op column
		p := colPairs[r.Intn(len(colPairs))]
		a, b := colIndex(p[0]), colIndex(p[1])
		op, ops := g.op()
		if p[0] == "b" {
			op, ops = []cmpOp{opEQ, opNE}[r.Intn(2)], []string{"=", "<>"}[r.Intn(2)]
			if ops == "=" {
				op = opEQ
			} else {
				op = opNE
			}
		}
		if r.Intn(2) == 0 {
			a, b = b, a
		}
		return tpred{testCols[a].name + " " + ops + " " + testCols[b].name,
			func(i int) tv { return cmpRef(op, vals[a][i], vals[b][i]) }}
	case 4: // [NOT] IN
		ci, c := g.col()
		n := 1 + r.Intn(4)
		texts := make([]string, n)
		lvs := make([]any, n)
		for k := range texts {
			texts[k], lvs[k] = g.lit(ci)
		}
		not := r.Intn(2) == 0
		kw := " IN ("
		if not {
			kw = " NOT IN ("
		}
		return tpred{c.name + kw + strings.Join(texts, ", ") + ")", func(i int) tv {
			v := vals[ci][i]
			if v == nil {
				return tvNull
			}
			res := tvFalse
			for _, lv := range lvs {
				switch cmpRef(opEQ, v, lv) {
				case tvTrue:
					res = tvTrue
				case tvNull:
					if res == tvFalse {
						res = tvNull
					}
				}
			}
			if not {
				return notRef(res)
			}
			return res
		}}
	case 5: // [NOT] BETWEEN
		ci, c := g.col()
		lt, lo := g.lit(ci)
		ht, hi := g.lit(ci)
		not := r.Intn(3) == 0
		kw := " BETWEEN "
		if not {
			kw = " NOT BETWEEN "
		}
		return tpred{c.name + kw + lt + " AND " + ht, func(i int) tv {
			res := andRef(cmpRef(opGE, vals[ci][i], lo), cmpRef(opLE, vals[ci][i], hi))
			if not {
				return notRef(res)
			}
			return res
		}}
	case 6: // IS [NOT] NULL
		ci, c := g.col()
		not := r.Intn(2) == 0
		kw := " IS NULL"
		if not {
			kw = " IS NOT NULL"
		}
		return tpred{c.name + kw, func(i int) tv { return tvOf((vals[ci][i] == nil) != not) }}
	case 7: // bare boolean column
		bi := colIndex("b")
		return tpred{"b", func(i int) tv {
			if vals[bi][i] == nil {
				return tvNull
			}
			return tvOf(vals[bi][i].(*big.Rat).Sign() != 0)
		}}
	default: // [NOT] LIKE
		ci := colIndex([]string{"s", "ls"}[r.Intn(2)])
		runes := []rune(strRune + "%%__")
		var pb strings.Builder
		for n := r.Intn(4); n > 0; n-- {
			pb.WriteRune(runes[r.Intn(len(runes))])
		}
		pat := pb.String()
		if r.Intn(10) == 0 {
			pat = `a\%`
		}
		not := r.Intn(3) == 0
		kw := " LIKE "
		if not {
			kw = " NOT LIKE "
		}
		sqlPat := strings.ReplaceAll(pat, `\`, `\\`)
		return tpred{testCols[ci].name + kw + quoteSQL(sqlPat), func(i int) tv {
			v := vals[ci][i]
			if v == nil {
				return tvNull
			}
			return tvOf(likeRef([]rune(v.(string)), []rune(pat)) != not)
		}}
	}
}

func (g *gen) pred(depth int) tpred {
	r := g.r
	if depth == 0 || r.Intn(3) == 0 {
		return g.leaf()
	}
	switch r.Intn(7) {
	case 0, 1:
		a, b := g.pred(depth-1), g.pred(depth-1)
		kw := []string{" AND ", " && "}[r.Intn(2)]
		return tpred{"(" + a.sql + ")" + kw + "(" + b.sql + ")", func(i int) tv { return andRef(a.eval(i), b.eval(i)) }}
	case 2, 3:
		a, b := g.pred(depth-1), g.pred(depth-1)
		kw := []string{" OR ", " || "}[r.Intn(2)]
		return tpred{"(" + a.sql + ")" + kw + "(" + b.sql + ")", func(i int) tv { return orRef(a.eval(i), b.eval(i)) }}
	case 4:
		a := g.pred(depth - 1)
		kw := []string{"NOT ", "!"}[r.Intn(2)]
		return tpred{kw + "(" + a.sql + ")", func(i int) tv { return notRef(a.eval(i)) }}
	case 5:
		a := g.pred(depth - 1)
		truth, not := r.Intn(2) == 0, r.Intn(2) == 0
		kw := map[[2]bool]string{{true, false}: "TRUE", {false, false}: "FALSE", {true, true}: "NOT TRUE", {false, true}: "NOT FALSE"}[[2]bool{truth, not}]
		return tpred{"(" + a.sql + ") IS " + kw, func(i int) tv {
			v := a.eval(i)
			return tvOf(((truth && v == tvTrue) || (!truth && v == tvFalse)) != not)
		}}
	default:
		a := g.pred(depth - 1)
		not := r.Intn(2) == 0
		kw := " IS NULL"
		if not {
			kw = " IS NOT NULL"
		}
		return tpred{"(" + a.sql + ")" + kw, func(i int) tv { return tvOf((a.eval(i) == tvNull) != not) }}
	}
}

// trueStats computes exact statistics of a column of the batch, the way a
// fragment writer would: NaN is left out of float bounds.
func trueStats(b *tbatch, ci int) ColumnStats {
	c := testCols[ci]
	var st ColumnStats
	var lo, hi any
	for _, v := range b.vals[ci] {
		if v == nil {
			st.NullCount++
			continue
		}
		if f, ok := v.(float64); ok && math.IsNaN(f) {
			continue
		}
		if lo == nil {
			lo, hi = v, v
			continue
		}
		if c, _ := compareRef(v, lo); c < 0 {
			lo = v
		}
		if c, _ := compareRef(v, hi); c > 0 {
			hi = v
		}
	}
	if lo == nil {
		return st
	}
	st.HasMinMax = true
	conv := func(v any) any {
		switch c.kind {
		case kFloat:
			return v.(float64)
		case kStr:
			return v.(string)
		case kBin:
			if r := []byte(v.(string)); len(r)%2 == 0 { // either spelling the filter takes
				return r
			}
			return v.(string)
		case kBool:
			return v.(*big.Rat).Sign() != 0
		}
		n := v.(*big.Rat).Num()
		if c.name == "u32" {
			return n.Uint64()
		}
		return n.Int64()
	}
	st.Min, st.Max = conv(lo), conv(hi)
	return st
}
