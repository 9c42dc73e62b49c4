package filter

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// litKind is the kind of a literal as written in the WHERE text.
type litKind uint8

const (
	litNull   litKind = iota
	litBool           // TRUE / FALSE
	litNum            // integer, decimal or float literal, held exactly as a rational
	litString         // 'text' or "text"
	litTime           // TIMESTAMP '…' or DATE '…'
	litBytes          // X'0A0B', 0x0A0B, b'1010', 0b1010: bytes, held in str
)

// literal is a constant from the WHERE text, kept as written so String can
// render it; coercion to a column's type happens when it is bound.
type literal struct {
	kind     litKind
	b        bool
	num      *big.Rat // litNum: exact value
	numFloat bool     // litNum: written as a float (1e3) rather than an integer/decimal
	str      string   // litString: the text; litBytes: the bytes
	t        time.Time
	dateOnly bool // litTime: written as DATE '…'
}

func (l literal) String() string {
	switch l.kind {
	case litNull:
		return "NULL"
	case litBool:
		if l.b {
			return "TRUE"
		}
		return "FALSE"
	case litNum:
		return ratText(l.num, l.numFloat)
	case litString:
		return quoteString(l.str)
	case litBytes:
		return "X'" + strings.ToUpper(hex.EncodeToString([]byte(l.str))) + "'"
	case litTime:
		if l.dateOnly {
			return "DATE '" + l.t.Format("2006-01-02") + "'"
		}
		return "TIMESTAMP '" + l.t.Format("2006-01-02 15:04:05.999999999") + "'"
	}
	return "?"
}

// ratText renders an exact rational so the parser reads back the same value:
// integers plainly, other values as decimals when they terminate, else as floats.
func ratText(r *big.Rat, asFloat bool) string {
	if r.IsInt() {
		return r.Num().String()
	}
	if !asFloat {
		if prec, exact := r.FloatPrec(); exact {
			return r.FloatString(prec)
		}
	}
	f, _ := r.Float64()
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += "e0"
	}
	return s
}

func quoteString(s string) string {
	var sb strings.Builder
	sb.WriteByte('\'')
	for _, c := range []byte(s) {
		switch c {
		case '\'':
			sb.WriteString("''")
		case '\\':
			sb.WriteString(`\\`)
		case 0:
			sb.WriteString(`\0`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case 0x1a:
			sb.WriteString(`\Z`)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('\'')
	return sb.String()
}

// domain is how a column's values compare: integer-valued (signed or
// unsigned, including timestamps, dates and booleans as 0/1), floating point,
// or strings (binary columns too: their bytes, in bytewise order, held as a
// Go string).
type domain uint8

const (
	domSigned domain = iota
	domUnsigned
	domFloat
	domString
)

// colDomain describes the comparable value space of a supported column type.
type colDomain struct {
	dom      domain
	lo, hi   *big.Int // integer domains: the type's range
	unitNano *big.Int // temporal types: nanoseconds per stored unit; nil otherwise
	isBool   bool
	isBinary bool // binary, large_binary: domString over bytes (string and hex/bit literals)
}

var (
	bigNanosPerDay = big.NewInt(86400 * 1e9)
	bigBillion     = big.NewInt(1e9)
)

func intRange(bits uint) (*big.Int, *big.Int) {
	hi := new(big.Int).Lsh(big.NewInt(1), bits-1)
	lo := new(big.Int).Neg(hi)
	return lo, hi.Sub(hi, big.NewInt(1))
}

func uintRange(bits uint) (*big.Int, *big.Int) {
	hi := new(big.Int).Lsh(big.NewInt(1), bits)
	return big.NewInt(0), hi.Sub(hi, big.NewInt(1))
}

// domainOf returns the domain of a column type, or false when the filter
// does not support columns of that type.
func domainOf(dt arrow.DataType) (colDomain, bool) {
	signed := func(bits uint) (colDomain, bool) {
		lo, hi := intRange(bits)
		return colDomain{dom: domSigned, lo: lo, hi: hi}, true
	}
	unsigned := func(bits uint) (colDomain, bool) {
		lo, hi := uintRange(bits)
		return colDomain{dom: domUnsigned, lo: lo, hi: hi}, true
	}
	switch dt.ID() {
	case arrow.INT8:
		return signed(8)
	case arrow.INT16:
		return signed(16)
	case arrow.INT32:
		return signed(32)
	case arrow.INT64:
		return signed(64)
	case arrow.UINT8:
		return unsigned(8)
	case arrow.UINT16:
		return unsigned(16)
	case arrow.UINT32:
		return unsigned(32)
	case arrow.UINT64:
		return unsigned(64)
	case arrow.BOOL:
		return colDomain{dom: domSigned, lo: big.NewInt(0), hi: big.NewInt(1), isBool: true}, true
	case arrow.FLOAT32, arrow.FLOAT64:
		return colDomain{dom: domFloat}, true
	case arrow.STRING, arrow.LARGE_STRING:
		return colDomain{dom: domString}, true
	case arrow.BINARY, arrow.LARGE_BINARY:
		return colDomain{dom: domString, isBinary: true}, true
	case arrow.TIMESTAMP:
		d, _ := signed(64)
		unit := dt.(*arrow.TimestampType).Unit
		d.unitNano = big.NewInt(int64(unit.Multiplier()))
		return d, true
	case arrow.DATE32:
		d, _ := signed(32)
		d.unitNano = bigNanosPerDay
		return d, true
	case arrow.DATE64:
		d, _ := signed(64)
		d.unitNano = big.NewInt(int64(time.Millisecond))
		return d, true
	}
	return colDomain{}, false
}

// value is a constant in a column's domain: i for signed (timestamps, dates
// and booleans included), u for unsigned, f for float, s for string (the
// bytes, for a binary column).
type value struct {
	i int64
	u uint64
	f float64
	s string
}

func (d colDomain) valueOf(v *big.Int) value {
	if d.dom == domUnsigned {
		return value{u: v.Uint64()}
	}
	return value{i: v.Int64()}
}

// compare orders two values of domain d (floats by IEEE order; NaN is
// unordered and compares as equal here, callers exclude it).
func (d colDomain) compare(a, b value) int {
	switch d.dom {
	case domSigned:
		return cmp3(a.i, b.i)
	case domUnsigned:
		return cmp3(a.u, b.u)
	case domFloat:
		return cmp3(a.f, b.f)
	default:
		return strings.Compare(a.s, b.s)
	}
}

func cmp3[T int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// timeLayouts are the accepted timestamp spellings, tried in order; all
// without an explicit offset are read as UTC. Go's parser accepts a
// fractional second after the seconds field even when the layout has none.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseTime reads a timestamp literal: RFC 3339 or 'YYYY-MM-DD[ HH:MM[:SS[.fffffffff]]]' in UTC.
func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// parseDate reads a DATE literal: exactly 'YYYY-MM-DD'.
func parseDate(s string) (time.Time, bool) {
	t, err := time.Parse("2006-01-02", strings.TrimSpace(s))
	return t, err == nil
}

// parseNumber reads a numeric string literal ('42', '-2.5', '1e3') exactly.
func parseNumber(s string) (*big.Rat, bool) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "/_") {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// timeUnits returns t as an exact rational number of the column's units
// since the Unix epoch.
func timeUnits(t time.Time, unitNano *big.Int) *big.Rat {
	ns := new(big.Int).Mul(big.NewInt(t.Unix()), bigBillion)
	ns.Add(ns, big.NewInt(int64(t.Nanosecond())))
	return new(big.Rat).SetFrac(ns, unitNano)
}

// typeName is used in error messages.
func typeName(dt arrow.DataType) string { return dt.String() }

// exactValue converts a literal to an exact rational in an integer or float
// column's domain (timestamps and dates in the column's unit), or reports
// why it cannot be compared with the column.
func exactValue(c colRef, d colDomain, l literal) (*big.Rat, error) {
	mismatch := func(why string) error {
		return fmt.Errorf("%w: %s cannot be compared with column %s (%s): %s",
			ErrType, l, quoteIdent(c.name), typeName(c.typ), why)
	}
	if d.unitNano != nil {
		switch l.kind {
		case litTime:
			return timeUnits(l.t, d.unitNano), nil
		case litString:
			t, ok := parseTime(l.str)
			if !ok {
				return nil, mismatch("not a timestamp (want RFC 3339 or 'YYYY-MM-DD[ HH:MM:SS[.ffffff]]')")
			}
			return timeUnits(t, d.unitNano), nil
		}
		return nil, mismatch("a temporal column needs a timestamp or date literal")
	}
	if l.kind == litBytes {
		return nil, mismatch(bytesOnly)
	}
	switch l.kind {
	case litNum:
		return l.num, nil
	case litBool:
		if l.b {
			return big.NewRat(1, 1), nil
		}
		return new(big.Rat), nil
	case litString:
		if d.isBool {
			return nil, mismatch("a boolean column needs TRUE or FALSE")
		}
		r, ok := parseNumber(l.str)
		if !ok {
			return nil, mismatch("not a number")
		}
		return r, nil
	}
	return nil, mismatch("a numeric column needs a number")
}

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	opEQ cmpOp = iota
	opNE
	opLT
	opLE
	opGT
	opGE
)

var opText = [...]string{opEQ: "=", opNE: "!=", opLT: "<", opLE: "<=", opGT: ">", opGE: ">="}
var opKernel = [...]string{opEQ: "equal", opNE: "not_equal", opLT: "less", opLE: "less_equal", opGT: "greater", opGE: "greater_equal"}

// flip returns the operator with its operands swapped (a < b == b > a).
func (o cmpOp) flip() cmpOp {
	switch o {
	case opLT:
		return opGT
	case opLE:
		return opGE
	case opGT:
		return opLT
	case opGE:
		return opLE
	}
	return o
}

// holds reports whether "a op b" holds given c = compare(a, b).
func (o cmpOp) holds(c int) bool {
	switch o {
	case opEQ:
		return c == 0
	case opNE:
		return c != 0
	case opLT:
		return c < 0
	case opLE:
		return c <= 0
	case opGT:
		return c > 0
	}
	return c >= 0
}

// planKind says how a column-versus-literal comparison is evaluated.
type planKind uint8

const (
	planCompare planKind = iota // compare the column with val using op
	planConst                   // every non-null row gives konst, null rows give NULL
	planNull                    // every row gives NULL (comparison with NULL)
)

type plan struct {
	kind  planKind
	op    cmpOp
	val   value
	konst bool
}

// planInt turns "column op r" over an integer domain [lo, hi] into an
// equivalent comparison with an in-range integer, or a constant when the
// literal lies outside the type (int16col > 100000) or between two integers
// (intcol = 2.5).
func planInt(d colDomain, op cmpOp, r *big.Rat) plan {
	var v *big.Int
	if r.IsInt() {
		v = new(big.Int).Set(r.Num())
	} else {
		floor := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor, as Denom > 0
		switch op {
		case opEQ:
			return plan{kind: planConst, konst: false}
		case opNE:
			return plan{kind: planConst, konst: true}
		case opLT, opLE:
			op, v = opLE, floor
		default:
			op, v = opGE, floor.Add(floor, big.NewInt(1))
		}
	}
	one := big.NewInt(1)
	switch op {
	case opLT:
		op, v = opLE, v.Sub(v, one)
	case opGT:
		op, v = opGE, v.Add(v, one)
	}
	belowLo, aboveHi := v.Cmp(d.lo) < 0, v.Cmp(d.hi) > 0
	switch op {
	case opEQ, opNE:
		if belowLo || aboveHi {
			return plan{kind: planConst, konst: op == opNE}
		}
	case opLE:
		switch {
		case belowLo:
			return plan{kind: planConst, konst: false}
		case v.Cmp(d.hi) >= 0:
			return plan{kind: planConst, konst: true}
		case v.Cmp(d.lo) == 0:
			op = opEQ
		}
	case opGE:
		switch {
		case aboveHi:
			return plan{kind: planConst, konst: false}
		case v.Cmp(d.lo) <= 0:
			return plan{kind: planConst, konst: true}
		case v.Cmp(d.hi) == 0:
			op = opEQ
		}
	}
	return plan{kind: planCompare, op: op, val: d.valueOf(v)}
}

// planLiteral binds "column op literal".
func planLiteral(c colRef, d colDomain, op cmpOp, l literal) (plan, error) {
	if l.kind == litNull {
		return plan{kind: planNull}, nil
	}
	if d.dom == domString {
		if err := stringLiteral(c, d, l); err != nil {
			return plan{}, err
		}
		return plan{kind: planCompare, op: op, val: value{s: l.str}}, nil
	}
	r, err := exactValue(c, d, l)
	if err != nil {
		return plan{}, err
	}
	if d.dom == domFloat {
		f, _ := r.Float64()
		return plan{kind: planCompare, op: op, val: value{f: f}}, nil
	}
	return planInt(d, op, r), nil
}

// bytesOnly says why a hex or bit literal meets a column other than a binary one.
const bytesOnly = "a hex or bit literal (X'…', 0x…, b'…') compares only with a binary column"

// stringLiteral checks that l (not NULL) can be compared with c, a column of the
// string domain d: a string literal with a string column; a string literal (its UTF-8
// bytes) or a hex or bit literal with a binary column.
func stringLiteral(c colRef, d colDomain, l literal) error {
	switch {
	case l.kind == litString, l.kind == litBytes && d.isBinary:
		return nil
	case l.kind == litBytes:
		return fmt.Errorf("%w: %s cannot be compared with column %s (%s): %s",
			ErrType, l, quoteIdent(c.name), typeName(c.typ), bytesOnly)
	case d.isBinary:
		return fmt.Errorf("%w: %s cannot be compared with column %s (%s): a binary column needs a string, hex or bit literal",
			ErrType, l, quoteIdent(c.name), typeName(c.typ))
	}
	return fmt.Errorf("%w: %s cannot be compared with column %s (%s): a string column needs a string literal",
		ErrType, l, quoteIdent(c.name), typeName(c.typ))
}

// setValues binds the literals of an IN list: values that can never equal a
// row of the column (out of range, fractional for an integer column) are
// dropped; NULLs are reported separately.
func setValues(c colRef, d colDomain, lits []literal) (vals []value, hasNull bool, err error) {
	for _, l := range lits {
		if l.kind == litNull {
			hasNull = true
			continue
		}
		p, err := planLiteral(c, d, opEQ, l)
		if err != nil {
			return nil, false, err
		}
		if p.kind == planCompare {
			vals = append(vals, p.val)
		}
	}
	return vals, hasNull, nil
}
