package filter

import "slices"

// Implied returns an expression over column alone that every row for which e is TRUE
// also makes TRUE: a necessary condition on that column (for an index to find candidate
// rows by). ok is false when e says nothing usable about the column (every value may
// match). The result is exact on the parts of e that only read column, and drops the
// rest: conjuncts on other columns become TRUE, a disjunction constrains the column only
// if every branch does, and NOT is pushed down (De Morgan), so "NOT (a > 5 AND b = 1)"
// implies nothing about a. The returned expression is bound to e's schema and evaluates
// on a record batch holding only column (Evaluate finds columns by name).
//
// Rows where the result is TRUE are candidates: the caller must still evaluate e on them.
func (e *Expr) Implied(column string) (*Expr, bool) {
	idx := e.schema.FieldIndices(column)
	if len(idx) != 1 {
		return nil, false
	}
	n := project(e.root, idx[0], false)
	if n == nil {
		return nil, false
	}
	return &Expr{root: n, schema: e.schema, cols: []int{idx[0]}}, true
}

// project returns the necessary condition on column col of n (of NOT n when neg), or
// nil for none.
func project(n node, col int, neg bool) node {
	switch x := n.(type) {
	case *logic:
		and := x.and != neg // AND, or NOT over OR (De Morgan)
		var parts []node
		for _, c := range x.xs {
			p := project(c, col, neg)
			if p == nil {
				if !and {
					return nil // one branch of an OR says nothing: neither does the OR
				}
				continue
			}
			parts = append(parts, p)
		}
		switch len(parts) {
		case 0:
			return nil
		case 1:
			return parts[0]
		}
		return &logic{and: and, xs: parts}
	case *notNode:
		return project(x.x, col, !neg)
	}
	cols, ok := nodeColumns(n)
	if !ok || len(cols) == 0 || slices.ContainsFunc(cols, func(c int) bool { return c != col }) {
		return nil
	}
	if neg {
		return &notNode{x: n}
	}
	return n
}

// nodeColumns lists the columns an atom reads; ok is false for node kinds it does not
// know (treated as reading other columns).
func nodeColumns(n node) ([]int, bool) {
	switch x := n.(type) {
	case *cmpLit:
		return []int{x.col.idx}, true
	case *cmpCols:
		return []int{x.l.idx, x.r.idx}, true
	case *inList:
		return []int{x.col.idx}, true
	case *between:
		var out []int
		for _, o := range []operand{x.x, x.lo, x.hi} {
			if o.col != nil {
				out = append(out, o.col.idx)
			}
		}
		return out, true
	case *isNull:
		if x.col != nil {
			return []int{x.col.idx}, true
		}
		return nodeColumns(x.x)
	case *isTruth:
		if c, ok := nodeColumns(x.x); ok {
			return c, true
		}
		return nil, false
	case *boolCol:
		return []int{x.col.idx}, true
	case *like:
		return []int{x.col.idx}, true
	case *constNode:
		return nil, true
	}
	return nil, false
}
