package filter

import (
	"math"
	"strings"
)

// ColumnStats summarizes one column of a fragment, zone or batch.
//
// NullCount is the number of null rows. When HasMinMax is set, Min and Max
// bound every non-null value (they need not be tight): int64 for signed
// integers, timestamps (in the column's unit), date32 (days) and date64
// (milliseconds); uint64 for unsigned integers; float64 for floats (NaN
// bounds are ignored); string for strings; bool for booleans. Other Go
// integer and float types are accepted where they convert exactly. Bounds of
// the wrong type are ignored, which only makes pruning weaker.
type ColumnStats struct {
	NullCount int64 // null rows (exact)
	HasMinMax bool  // Min and Max are set
	Min, Max  any   // bounds of the non-null values, typed as above
}

// StatsFunc returns the statistics of a column by its schema name; ok=false
// means nothing is known, so any value (and NULL) is assumed possible.
type StatsFunc func(column string) (stats ColumnStats, ok bool)

// MayMatch reports whether a fragment, zone or batch of rows rows, whose
// columns have the statistics stats returns, may hold a row for which the
// predicate is TRUE. It returns false only when no row can match, so a
// caller may skip the rows; true means "scan them". rows < 0 means unknown;
// rows == 0 gives false. A nil stats is the same as one that knows nothing.
//
// The check is an abstract evaluation: each sub-expression yields the set
// of truth values (TRUE, FALSE, NULL) rows may produce, combined with SQL
// three-valued logic, so NOT, IS NULL and IS [NOT] TRUE/FALSE are exact
// about NULLs. Floating-point NaN is assumed possible in any float column.
func (e *Expr) MayMatch(rows int64, stats StatsFunc) bool {
	if rows == 0 {
		return false
	}
	sc := &statsCtx{rows: rows, stats: stats}
	return e.root.outcomes(sc).t
}

// tri is the set of truth values some row may produce.
type tri struct{ t, f, n bool }

func (a tri) not() tri { return tri{t: a.f, f: a.t, n: a.n} }

func (a tri) and(b tri) tri {
	return tri{
		t: a.t && b.t,
		f: a.f || b.f,
		n: (a.n && (b.t || b.n)) || (b.n && (a.t || a.n)),
	}
}

func (a tri) or(b tri) tri {
	return tri{
		t: a.t || b.t,
		f: a.f && b.f,
		n: (a.n && (b.f || b.n)) || (b.n && (a.f || a.n)),
	}
}

type statsCtx struct {
	rows  int64
	stats StatsFunc
}

// facts is what statistics say about a column: whether non-null values
// and nulls may occur, and bounds of the non-null values.
type facts struct {
	values, nulls bool
	hasRange      bool
	min, max      value
}

func (sc *statsCtx) facts(c colRef) facts {
	if sc.stats == nil {
		return facts{values: true, nulls: true}
	}
	st, ok := sc.stats(c.name)
	if !ok {
		return facts{values: true, nulls: true}
	}
	f := facts{nulls: st.NullCount > 0, values: sc.rows < 0 || st.NullCount < sc.rows}
	if st.NullCount < 0 { // nonsense counts say nothing
		f.nulls, f.values = true, true
	}
	if f.values && st.HasMinMax {
		lo, ok1 := statValue(c.dom, st.Min)
		hi, ok2 := statValue(c.dom, st.Max)
		if ok1 && ok2 && c.dom.compare(lo, hi) <= 0 {
			f.hasRange, f.min, f.max = true, lo, hi
		}
	}
	return f
}

// statValue converts a statistics bound to a value of domain d.
func statValue(d colDomain, v any) (value, bool) {
	switch d.dom {
	case domSigned:
		switch x := v.(type) {
		case int64:
			return value{i: x}, true
		case int:
			return value{i: int64(x)}, true
		case int32:
			return value{i: int64(x)}, true
		case int16:
			return value{i: int64(x)}, true
		case int8:
			return value{i: int64(x)}, true
		case uint64:
			return value{i: int64(x)}, x <= math.MaxInt64
		case uint32:
			return value{i: int64(x)}, true
		case uint16:
			return value{i: int64(x)}, true
		case uint8:
			return value{i: int64(x)}, true
		case bool:
			if !d.isBool {
				return value{}, false
			}
			if x {
				return value{i: 1}, true
			}
			return value{i: 0}, true
		}
	case domUnsigned:
		switch x := v.(type) {
		case uint64:
			return value{u: x}, true
		case uint32:
			return value{u: uint64(x)}, true
		case uint16:
			return value{u: uint64(x)}, true
		case uint8:
			return value{u: uint64(x)}, true
		case uint:
			return value{u: uint64(x)}, true
		case int64:
			return value{u: uint64(x)}, x >= 0
		case int:
			return value{u: uint64(x)}, x >= 0
		}
	case domFloat:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			return value{}, false
		}
		return value{f: f}, !math.IsNaN(f)
	case domString:
		switch x := v.(type) {
		case string:
			return value{s: x}, true
		case []byte:
			return value{s: string(x)}, true
		}
	}
	return value{}, false
}

// rangeMay reports whether some x in [lo, hi] satisfies "x op v".
func rangeMay(d colDomain, op cmpOp, lo, hi, v value) bool {
	cl, ch := d.compare(lo, v), d.compare(hi, v)
	switch op {
	case opEQ:
		return cl <= 0 && ch >= 0
	case opNE:
		return !(cl == 0 && ch == 0)
	case opLT:
		return cl < 0
	case opLE:
		return cl <= 0
	case opGT:
		return ch > 0
	}
	return ch >= 0
}

// negate returns the operator that holds exactly when o does not (for non-NaN values).
func (o cmpOp) negate() cmpOp {
	switch o {
	case opEQ:
		return opNE
	case opNE:
		return opEQ
	case opLT:
		return opGE
	case opLE:
		return opGT
	case opGT:
		return opLE
	}
	return opLT
}

func (n *cmpLit) outcomes(sc *statsCtx) tri {
	f := sc.facts(n.col)
	switch n.p.kind {
	case planNull:
		return tri{n: true}
	case planConst:
		return tri{t: f.values && n.p.konst, f: f.values && !n.p.konst, n: f.nulls}
	}
	if !f.values {
		return tri{n: f.nulls}
	}
	out := tri{t: true, f: true, n: f.nulls}
	if f.hasRange {
		out.t = rangeMay(n.col.dom, n.p.op, f.min, f.max, n.p.val)
		out.f = rangeMay(n.col.dom, n.p.op.negate(), f.min, f.max, n.p.val)
	}
	if n.col.dom.dom == domFloat { // a NaN row compares FALSE, except for !=
		out.f = true
		if n.p.op == opNE {
			out.t = true
		}
	}
	return out
}

// comparableStats reports whether the statistics of two columns are in one
// value space (same domain and unit), so their bounds can be compared.
func comparableStats(a, b colDomain) bool {
	if a.dom != b.dom || a.dom == domFloat || a.isBool != b.isBool {
		return false
	}
	if (a.unitNano == nil) != (b.unitNano == nil) {
		return false
	}
	return a.unitNano == nil || a.unitNano.Cmp(b.unitNano) == 0
}

// intervalMay reports whether some x in [a.min, a.max] and y in [b.min, b.max] satisfy "x op y".
func intervalMay(d colDomain, op cmpOp, a, b facts) bool {
	switch op {
	case opEQ:
		return d.compare(a.min, b.max) <= 0 && d.compare(b.min, a.max) <= 0
	case opNE:
		return !(d.compare(a.min, a.max) == 0 && d.compare(b.min, b.max) == 0 && d.compare(a.min, b.min) == 0)
	case opLT:
		return d.compare(a.min, b.max) < 0
	case opLE:
		return d.compare(a.min, b.max) <= 0
	case opGT:
		return d.compare(a.max, b.min) > 0
	}
	return d.compare(a.max, b.min) >= 0
}

func (n *cmpCols) outcomes(sc *statsCtx) tri {
	a, b := sc.facts(n.l), sc.facts(n.r)
	out := tri{n: a.nulls || b.nulls}
	if !a.values || !b.values {
		return out
	}
	out.t, out.f = true, true
	if a.hasRange && b.hasRange && comparableStats(n.l.dom, n.r.dom) {
		out.t = intervalMay(n.l.dom, n.op, a, b)
		out.f = intervalMay(n.l.dom, n.op.negate(), a, b)
	}
	return out
}

func (n *constNode) outcomes(*statsCtx) tri {
	return tri{t: n.v == tvTrue, f: n.v == tvFalse, n: n.v == tvNull}
}

func (n *logic) outcomes(sc *statsCtx) tri {
	acc := n.xs[0].outcomes(sc)
	for _, x := range n.xs[1:] {
		if n.and {
			acc = acc.and(x.outcomes(sc))
		} else {
			acc = acc.or(x.outcomes(sc))
		}
	}
	return acc
}

func (n *notNode) outcomes(sc *statsCtx) tri { return n.x.outcomes(sc).not() }

func (n *between) outcomes(sc *statsCtx) tri { return n.inner.outcomes(sc) }

func (n *inList) outcomes(sc *statsCtx) tri {
	f := sc.facts(n.col)
	if !f.values {
		return tri{n: f.nulls}
	}
	d := n.col.dom
	found := false // some row may equal a listed value
	for _, v := range n.vals {
		if !f.hasRange || rangeMay(d, opEQ, f.min, f.max, v) {
			found = true
			break
		}
	}
	missed := true // some row may equal no listed value
	if f.hasRange && d.dom != domFloat && d.compare(f.min, f.max) == 0 {
		missed = true
		for _, v := range n.vals {
			if d.compare(f.min, v) == 0 {
				missed = false
			}
		}
	}
	out := tri{t: found, f: missed, n: f.nulls}
	if n.hasNull { // a row matching nothing gives NULL, not FALSE
		out = tri{t: found, n: f.nulls || missed}
	}
	if n.not {
		return out.not()
	}
	return out
}

func (n *isNull) outcomes(sc *statsCtx) tri {
	var out tri
	if n.col != nil {
		f := sc.facts(*n.col)
		out = tri{t: f.nulls, f: f.values}
	} else {
		x := n.x.outcomes(sc)
		out = tri{t: x.n, f: x.t || x.f}
	}
	if n.not {
		return out.not()
	}
	return out
}

func (n *isTruth) outcomes(sc *statsCtx) tri {
	x := n.x.outcomes(sc)
	if !n.truth {
		x = x.not()
	}
	out := tri{t: x.t, f: x.f || x.n}
	if n.not {
		return out.not()
	}
	return out
}

func (n *boolCol) outcomes(sc *statsCtx) tri {
	f := sc.facts(n.col)
	if !f.values {
		return tri{n: f.nulls}
	}
	out := tri{t: true, f: true, n: f.nulls}
	if f.hasRange {
		out.t = f.max.i != 0
		out.f = f.min.i == 0
	}
	return out
}

func (n *like) outcomes(sc *statsCtx) tri {
	f := sc.facts(n.col)
	if !f.values {
		return tri{n: f.nulls}
	}
	out := tri{t: true, f: true, n: f.nulls}
	if f.hasRange && n.prefix != "" {
		lo, hi := f.min.s, f.max.s
		if n.exact {
			out.t = lo <= n.prefix && n.prefix <= hi
			out.f = !(lo == n.prefix && hi == n.prefix)
		} else {
			// Strings with the prefix form the interval starting at prefix;
			// [lo, hi] meets it iff hi >= prefix and lo is below it or inside it.
			out.t = hi >= n.prefix && (lo < n.prefix || strings.HasPrefix(lo, n.prefix))
		}
	}
	if n.not {
		return out.not()
	}
	return out
}
