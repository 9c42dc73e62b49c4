package filter

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// tv is an SQL truth value.
type tv uint8

const (
	tvFalse tv = iota
	tvTrue
	tvNull
)

func tvOf(b bool) tv {
	if b {
		return tvTrue
	}
	return tvFalse
}

// node is a bound predicate. eval returns a three-valued boolean array
// (NULL = unknown) with one entry per row; outcomes over-approximates the
// set of truth values rows can take given column statistics.
type node interface {
	write(sb *strings.Builder)
	eval(ev *evaluator) (*array.Boolean, error)
	outcomes(sc *statsCtx) tri
}

// cmpLit is "column op literal" (a literal written first is flipped to the right).
type cmpLit struct {
	col colRef
	op  cmpOp
	lit literal
	p   plan
}

func (n *cmpLit) write(sb *strings.Builder) {
	sb.WriteString(quoteIdent(n.col.name) + " " + opText[n.op] + " " + n.lit.String())
}

// cmpCols is "column op column", both cast to common before comparing.
type cmpCols struct {
	l, r   colRef
	op     cmpOp
	common arrow.DataType
}

func (n *cmpCols) write(sb *strings.Builder) {
	sb.WriteString(quoteIdent(n.l.name) + " " + opText[n.op] + " " + quoteIdent(n.r.name))
}

// newCmpCols binds a comparison of two columns, choosing the type both are
// cast to: int64/uint64 for integers of one signedness, float64 when either
// is floating, the finer unit for two timestamps, large_string for strings,
// large_binary for binaries (and a binary with a string: the string's UTF-8 bytes).
func newCmpCols(l colRef, op cmpOp, r colRef) (node, error) {
	lt, rt := l.typ, r.typ
	mismatch := func(why string) error {
		return fmt.Errorf("%w: cannot compare column %s (%s) with column %s (%s)%s",
			ErrType, quoteIdent(l.name), lt, quoteIdent(r.name), rt, why)
	}
	n := &cmpCols{l: l, r: r, op: op}
	ld, rd := l.dom, r.dom
	switch {
	case arrow.TypeEqual(lt, rt):
		n.common = lt
		if lt.ID() == arrow.FLOAT32 {
			n.common = arrow.PrimitiveTypes.Float64
		}
	case ld.unitNano != nil || rd.unitNano != nil:
		lts, ok1 := lt.(*arrow.TimestampType)
		rts, ok2 := rt.(*arrow.TimestampType)
		if !ok1 || !ok2 {
			return nil, mismatch("")
		}
		unit := max(lts.Unit, rts.Unit)
		n.common = &arrow.TimestampType{Unit: unit, TimeZone: lts.TimeZone}
	case ld.isBool || rd.isBool:
		return nil, mismatch("")
	case (ld.isBinary || rd.isBinary) && ld.dom == domString && rd.dom == domString:
		n.common = arrow.BinaryTypes.LargeBinary // a string column as its UTF-8 bytes
	case ld.dom == domString && rd.dom == domString:
		n.common = arrow.BinaryTypes.LargeString
	case ld.dom == domFloat || rd.dom == domFloat:
		if ld.dom == domString || rd.dom == domString {
			return nil, mismatch("")
		}
		n.common = arrow.PrimitiveTypes.Float64
	case ld.dom == domSigned && rd.dom == domSigned:
		n.common = arrow.PrimitiveTypes.Int64
	case ld.dom == domUnsigned && rd.dom == domUnsigned:
		n.common = arrow.PrimitiveTypes.Uint64
	case (ld.dom == domSigned && rd.dom == domUnsigned) || (ld.dom == domUnsigned && rd.dom == domSigned):
		if lt.ID() == arrow.UINT64 || rt.ID() == arrow.UINT64 {
			return nil, mismatch(": mixing uint64 with signed integers is not supported")
		}
		n.common = arrow.PrimitiveTypes.Int64
	default:
		return nil, mismatch("")
	}
	if ld.isBool && op != opEQ && op != opNE {
		return nil, mismatch(": booleans only compare with = and !=")
	}
	return n, nil
}

// constNode is a constant condition (TRUE, NULL, 1 = 1).
type constNode struct {
	v    tv
	text string
}

func (n *constNode) write(sb *strings.Builder) { sb.WriteString(n.text) }

// logic is an n-ary AND or OR with SQL three-valued semantics.
type logic struct {
	and bool
	xs  []node
}

func newLogic(and bool, l, r node) node {
	n := &logic{and: and}
	for _, x := range []node{l, r} {
		if lx, ok := x.(*logic); ok && lx.and == and {
			n.xs = append(n.xs, lx.xs...)
		} else {
			n.xs = append(n.xs, x)
		}
	}
	return n
}

func (n *logic) write(sb *strings.Builder) {
	sep := " OR "
	if n.and {
		sep = " AND "
	}
	for i, x := range n.xs {
		if i > 0 {
			sb.WriteString(sep)
		}
		if _, ok := x.(*logic); ok {
			sb.WriteByte('(')
			x.write(sb)
			sb.WriteByte(')')
		} else {
			x.write(sb)
		}
	}
}

// notNode is NOT x: TRUE and FALSE swap, NULL stays NULL.
type notNode struct{ x node }

func (n *notNode) write(sb *strings.Builder) {
	sb.WriteString("NOT (")
	n.x.write(sb)
	sb.WriteByte(')')
}

// inList is "column [NOT] IN (…)". vals holds the literals that can equal a
// row (in the column's domain); hasNull records a NULL in the list.
type inList struct {
	col     colRef
	lits    []literal
	not     bool
	vals    []value
	hasNull bool
}

func (n *inList) write(sb *strings.Builder) {
	sb.WriteString(quoteIdent(n.col.name))
	if n.not {
		sb.WriteString(" NOT")
	}
	sb.WriteString(" IN (")
	for i, l := range n.lits {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(l.String())
	}
	sb.WriteByte(')')
}

// between is "x [NOT] BETWEEN lo AND hi", evaluated as inner.
type between struct {
	x, lo, hi operand
	not       bool
	inner     node
}

func (n *between) write(sb *strings.Builder) {
	sb.WriteString(n.x.String())
	if n.not {
		sb.WriteString(" NOT")
	}
	sb.WriteString(" BETWEEN " + n.lo.String() + " AND " + n.hi.String())
}

// isNull is "column IS [NOT] NULL" (col set) or "(predicate) IS [NOT] NULL" (x set).
type isNull struct {
	col *colRef
	x   node
	not bool
}

func (n *isNull) write(sb *strings.Builder) {
	if n.col != nil {
		sb.WriteString(quoteIdent(n.col.name))
	} else {
		writeParen(sb, n.x)
	}
	if n.not {
		sb.WriteString(" IS NOT NULL")
	} else {
		sb.WriteString(" IS NULL")
	}
}

// isTruth is "x IS [NOT] TRUE|FALSE"; it is never NULL.
type isTruth struct {
	x     node
	truth bool
	not   bool
}

func (n *isTruth) write(sb *strings.Builder) {
	writeParen(sb, n.x)
	sb.WriteString(" IS ")
	if n.not {
		sb.WriteString("NOT ")
	}
	if n.truth {
		sb.WriteString("TRUE")
	} else {
		sb.WriteString("FALSE")
	}
}

func writeParen(sb *strings.Builder, x node) {
	if b, ok := x.(*boolCol); ok {
		b.write(sb)
		return
	}
	sb.WriteByte('(')
	x.write(sb)
	sb.WriteByte(')')
}

// boolCol is a boolean column used as a condition.
type boolCol struct{ col colRef }

func (n *boolCol) write(sb *strings.Builder) { sb.WriteString(quoteIdent(n.col.name)) }

// like is "column [NOT] LIKE 'pattern'": % matches any run of characters,
// _ one character, the escape character makes the next one literal.
// Matching is case-sensitive on bytes (binary collation).
type like struct {
	col     colRef
	pattern string
	escape  byte
	not     bool
	// prefix is the literal text before the first wildcard; exact means the
	// pattern has no wildcard, prefixOnly that it is prefix followed by %s only.
	prefix            string
	exact, prefixOnly bool
	re                *regexp.Regexp
}

func newLike(col colRef, pattern string, escape byte, not bool) (node, error) {
	n := &like{col: col, pattern: pattern, escape: escape, not: not}
	var re, lit strings.Builder
	re.WriteString(`(?s)^`)
	seenWild, trailingOnlyPct := false, true
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case c == escape && i+1 < len(pattern):
			r, size := utf8.DecodeRuneInString(pattern[i+1:])
			re.WriteString(regexp.QuoteMeta(string(r)))
			if !seenWild {
				lit.WriteString(pattern[i+1 : i+1+size])
			} else {
				trailingOnlyPct = false
			}
			i += 1 + size
			continue
		case c == '%':
			re.WriteString(`.*`)
			seenWild = true
		case c == '_':
			re.WriteString(`.`)
			seenWild = true
			trailingOnlyPct = false
		default:
			_, size := utf8.DecodeRuneInString(pattern[i:])
			re.WriteString(regexp.QuoteMeta(pattern[i : i+size]))
			if !seenWild {
				lit.WriteString(pattern[i : i+size])
			} else {
				trailingOnlyPct = false
			}
			i += size
			continue
		}
		i++
	}
	re.WriteString(`$`)
	n.prefix = lit.String()
	n.exact = !seenWild
	n.prefixOnly = seenWild && trailingOnlyPct
	var err error
	if n.re, err = regexp.Compile(re.String()); err != nil {
		return nil, fmt.Errorf("%w: LIKE pattern %s: %v", ErrSyntax, quoteString(pattern), err)
	}
	return n, nil
}

func (n *like) match(s string) bool {
	switch {
	case n.exact:
		return s == n.prefix
	case n.prefixOnly:
		return strings.HasPrefix(s, n.prefix)
	}
	return n.re.MatchString(s)
}

func (n *like) write(sb *strings.Builder) {
	sb.WriteString(quoteIdent(n.col.name))
	if n.not {
		sb.WriteString(" NOT")
	}
	sb.WriteString(" LIKE " + quoteString(n.pattern))
	if n.escape != '\\' {
		sb.WriteString(" ESCAPE " + quoteString(string([]byte{n.escape})))
	}
}
