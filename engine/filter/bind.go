package filter

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// binder turns a parsed WHERE expression into a tree of bound nodes,
// resolving columns against the schema and coercing literals to column types.
type binder struct {
	schema *arrow.Schema
	used   map[int]bool
}

// colRef is a column of the bound schema.
type colRef struct {
	name string
	idx  int
	typ  arrow.DataType
	dom  colDomain
}

// operand is one side of a comparison: a column or a literal.
type operand struct {
	col *colRef
	lit *literal
}

func (o operand) String() string {
	if o.col != nil {
		return quoteIdent(o.col.name)
	}
	return o.lit.String()
}

// exprText renders a parsed expression for error messages.
func exprText(e ast.Node) string {
	var sb strings.Builder
	if err := e.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreKeyWordUppercase|format.RestoreNameBackQuotes|format.RestoreStringWithoutCharset, &sb)); err != nil {
		return fmt.Sprintf("%T", e)
	}
	return sb.String()
}

func unsupported(e ast.Node, what string) error {
	return fmt.Errorf("%w: %s in %s", ErrUnsupported, what, exprText(e))
}

// columns returns the indices of the columns bound so far, ascending.
func (b *binder) columns() []int {
	out := make([]int, 0, len(b.used))
	for i := range b.used {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// column resolves a column used in a comparison or condition: its type
// must be one filters compare (see domainOf).
func (b *binder) column(e *ast.ColumnNameExpr) (*colRef, error) {
	c, err := b.anyColumn(e)
	if err != nil {
		return nil, err
	}
	if c.dom, err = columnDomain(c.name, c.typ); err != nil {
		return nil, err
	}
	return c, nil
}

func columnDomain(name string, dt arrow.DataType) (colDomain, error) {
	d, ok := domainOf(dt)
	if !ok {
		return colDomain{}, fmt.Errorf("%w: column %s has type %s, which filters do not support", ErrType, quoteIdent(name), dt)
	}
	return d, nil
}

// anyColumn resolves a column name: an exact match first, else a unique
// case-insensitive match. A qualifier, if any, must be the table "t". The
// column may have any type (dom is set only for types filters compare).
func (b *binder) anyColumn(e *ast.ColumnNameExpr) (*colRef, error) {
	n := e.Name
	if n.Schema.O != "" || (n.Table.O != "" && n.Table.L != "t") {
		return nil, fmt.Errorf("%w: %s: only columns of the scanned table can be referenced (qualifier %q)",
			ErrUnknownColumn, exprText(e), n.Table.O)
	}
	idx, err := ResolveColumn(b.schema, n.Name.O)
	if err != nil {
		return nil, err
	}
	f := b.schema.Field(idx)
	b.used[idx] = true
	d, _ := domainOf(f.Type)
	return &colRef{name: f.Name, idx: idx, typ: f.Type, dom: d}, nil
}

// ResolveColumn returns the index of the field of schema named name: the
// exact match, else the only case-insensitive match. Errors wrap
// ErrUnknownColumn (no match, or several: the message lists the schema's
// fields).
func ResolveColumn(schema *arrow.Schema, name string) (int, error) {
	if exact := schema.FieldIndices(name); len(exact) == 1 {
		return exact[0], nil
	} else if len(exact) > 1 {
		return -1, classf(ErrUnknownColumn, "ambiguous column %s: the schema has %d columns of that name", quoteIdent(name), len(exact))
	}
	var matches []int
	for i, f := range schema.Fields() {
		if strings.EqualFold(f.Name, name) {
			matches = append(matches, i)
		}
	}
	switch len(matches) {
	case 0:
		return -1, fmt.Errorf("%w %s (columns: %s)", ErrUnknownColumn, quoteIdent(name), fieldList(schema))
	case 1:
		return matches[0], nil
	}
	return -1, classf(ErrUnknownColumn, "ambiguous column %s: it matches several columns case-insensitively (%s); write the exact name",
		quoteIdent(name), fieldList(schema))
}

func fieldList(s *arrow.Schema) string {
	names := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		names = append(names, quoteIdent(f.Name))
	}
	if len(names) == 0 {
		return "no fields"
	}
	return strings.Join(names, ", ")
}

// literalOf converts a parsed constant to a literal. ok is false when e is not a constant.
func literalOf(e ast.ExprNode) (literal, bool, error) {
	switch e := e.(type) {
	case *ast.ParenthesesExpr:
		return literalOf(e.Expr)
	case *test_driver.ValueExpr:
		switch e.Kind() {
		case test_driver.KindNull:
			return literal{kind: litNull}, true, nil
		case test_driver.KindInt64:
			if e.GetType().GetFlag()&mysql.IsBooleanFlag != 0 {
				return literal{kind: litBool, b: e.GetInt64() != 0}, true, nil
			}
			return literal{kind: litNum, num: new(big.Rat).SetInt64(e.GetInt64())}, true, nil
		case test_driver.KindUint64:
			return literal{kind: litNum, num: new(big.Rat).SetUint64(e.GetUint64())}, true, nil
		case test_driver.KindFloat32, test_driver.KindFloat64:
			f := e.GetFloat64()
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return literal{}, true, unsupported(e, "non-finite float literal")
			}
			return literal{kind: litNum, num: new(big.Rat).SetFloat64(f), numFloat: true}, true, nil
		case test_driver.KindMysqlDecimal:
			r, ok := new(big.Rat).SetString(e.GetMysqlDecimal().String())
			if !ok {
				return literal{}, true, fmt.Errorf("%w: bad decimal literal %s", ErrSyntax, exprText(e))
			}
			return literal{kind: litNum, num: r}, true, nil
		case test_driver.KindString:
			return literal{kind: litString, str: e.GetString()}, true, nil
		case test_driver.KindBinaryLiteral: // X'0A0B', 0x0A0B, b'1010', 0b1010
			return literal{kind: litBytes, str: string(e.GetBinaryLiteral())}, true, nil
		}
		return literal{}, true, unsupported(e, "this kind of literal")
	case *ast.UnaryOperationExpr:
		if e.Op != opcode.Minus && e.Op != opcode.Plus {
			return literal{}, false, nil
		}
		l, ok, err := literalOf(e.V)
		if !ok || err != nil {
			return l, ok, err
		}
		if l.kind != litNum {
			return literal{}, true, unsupported(e, "sign applied to a non-numeric literal")
		}
		if e.Op == opcode.Minus {
			l.num = new(big.Rat).Neg(l.num)
		}
		return l, true, nil
	case *ast.FuncCallExpr:
		switch e.FnName.L {
		case ast.DateLiteral, ast.TimestampLiteral:
			if len(e.Args) != 1 {
				return literal{}, true, unsupported(e, "malformed temporal literal")
			}
			arg, ok, err := literalOf(e.Args[0])
			if err != nil || !ok || arg.kind != litString {
				return literal{}, true, unsupported(e, "temporal literal without a string")
			}
			if e.FnName.L == ast.DateLiteral {
				t, ok := parseDate(arg.str)
				if !ok {
					return literal{}, true, fmt.Errorf("%w: DATE %s is not a date (want 'YYYY-MM-DD')", ErrSyntax, quoteString(arg.str))
				}
				return literal{kind: litTime, t: t, dateOnly: true}, true, nil
			}
			t, ok := parseTime(arg.str)
			if !ok {
				return literal{}, true, fmt.Errorf("%w: TIMESTAMP %s is not a timestamp (want RFC 3339 or 'YYYY-MM-DD[ HH:MM:SS[.ffffff]]')",
					ErrSyntax, quoteString(arg.str))
			}
			return literal{kind: litTime, t: t}, true, nil
		case ast.TimeLiteral:
			return literal{}, true, unsupported(e, "TIME literal")
		}
	}
	return literal{}, false, nil
}

// operand binds one side of a comparison.
func (b *binder) operand(e ast.ExprNode) (operand, error) {
	if p, ok := e.(*ast.ParenthesesExpr); ok {
		return b.operand(p.Expr)
	}
	if c, ok := e.(*ast.ColumnNameExpr); ok {
		col, err := b.column(c)
		if err != nil {
			return operand{}, err
		}
		return operand{col: col}, nil
	}
	l, ok, err := literalOf(e)
	if err != nil {
		return operand{}, err
	}
	if !ok {
		return operand{}, unsupported(e, "operand other than a column or literal")
	}
	return operand{lit: &l}, nil
}

var compareOps = map[opcode.Op]cmpOp{
	opcode.EQ: opEQ, opcode.NE: opNE, opcode.LT: opLT, opcode.LE: opLE, opcode.GT: opGT, opcode.GE: opGE,
}

// predicate binds a boolean-valued expression.
func (b *binder) predicate(e ast.ExprNode) (node, error) {
	switch e := e.(type) {
	case *ast.ParenthesesExpr:
		return b.predicate(e.Expr)
	case *ast.BinaryOperationExpr:
		switch e.Op {
		case opcode.LogicAnd, opcode.LogicOr:
			l, err := b.predicate(e.L)
			if err != nil {
				return nil, err
			}
			r, err := b.predicate(e.R)
			if err != nil {
				return nil, err
			}
			return newLogic(e.Op == opcode.LogicAnd, l, r), nil
		}
		if op, ok := compareOps[e.Op]; ok {
			if !simpleOperand(e.L) || !simpleOperand(e.R) {
				return b.compareValues(e.L, op, e.R)
			}
			l, err := b.operand(e.L)
			if err != nil {
				return nil, err
			}
			r, err := b.operand(e.R)
			if err != nil {
				return nil, err
			}
			return b.compare(l, op, r)
		}
		return nil, unsupported(e, "operator "+e.Op.String())
	case *ast.UnaryOperationExpr:
		if e.Op == opcode.Not || e.Op == opcode.Not2 {
			x, err := b.predicate(e.V)
			if err != nil {
				return nil, err
			}
			return &notNode{x: x}, nil
		}
	case *ast.PatternInExpr:
		return b.in(e)
	case *ast.BetweenExpr:
		return b.between(e)
	case *ast.IsNullExpr:
		if c, ok := unparen(e.Expr).(*ast.ColumnNameExpr); ok {
			col, err := b.column(c)
			if err != nil {
				return nil, err
			}
			return &isNull{col: col, not: e.Not}, nil
		}
		x, err := b.predicate(e.Expr)
		if err != nil {
			// Not a condition: a value expression (a + b IS NULL)?
			if v, verr := b.value(e.Expr, nil); verr == nil {
				return &valIsNull{v: v, not: e.Not}, nil
			}
			return nil, err
		}
		return &isNull{x: x, not: e.Not}, nil
	case *ast.IsTruthExpr:
		x, err := b.predicate(e.Expr)
		if err != nil {
			return nil, err
		}
		return &isTruth{x: x, truth: e.True != 0, not: e.Not}, nil
	case *ast.PatternLikeOrIlikeExpr:
		return b.like(e)
	case *ast.ColumnNameExpr:
		col, err := b.column(e)
		if err != nil {
			return nil, err
		}
		if col.typ.ID() != arrow.BOOL {
			return nil, fmt.Errorf("%w: column %s (%s) is not boolean and cannot be a condition by itself; compare it with a value",
				ErrType, quoteIdent(col.name), col.typ)
		}
		return &boolCol{col: *col}, nil
	}
	l, ok, err := literalOf(e)
	if err != nil {
		return nil, err
	}
	if ok {
		switch l.kind {
		case litNull:
			return &constNode{v: tvNull, text: l.String()}, nil
		case litBool:
			return &constNode{v: tvOf(l.b), text: l.String()}, nil
		case litNum:
			return &constNode{v: tvOf(l.num.Sign() != 0), text: l.String()}, nil
		}
		return nil, fmt.Errorf("%w: %s is not a condition", ErrType, l)
	}
	return nil, unsupported(e, fmt.Sprintf("expression (%s)", strings.TrimPrefix(fmt.Sprintf("%T", e), "*ast.")))
}

func unparen(e ast.ExprNode) ast.ExprNode {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// compareValues binds "l op r" where a side is an expression (a + 1 > b).
func (b *binder) compareValues(le ast.ExprNode, op cmpOp, re ast.ExprNode) (node, error) {
	l, err := b.value(le, nil)
	if err != nil {
		return nil, err
	}
	r, err := b.value(re, nil)
	if err != nil {
		return nil, err
	}
	return newCmpExpr(l, op, r)
}

// compare binds "l op r".
func (b *binder) compare(l operand, op cmpOp, r operand) (node, error) {
	switch {
	case l.col != nil && r.col != nil:
		return newCmpCols(*l.col, op, *r.col)
	case l.lit != nil && r.lit != nil:
		v, err := compareLiterals(*l.lit, op, *r.lit)
		if err != nil {
			return nil, err
		}
		return &constNode{v: v, text: l.lit.String() + " " + opText[op] + " " + r.lit.String()}, nil
	case l.lit != nil:
		l, r, op = r, l, op.flip()
	}
	p, err := planLiteral(*l.col, l.col.dom, op, *r.lit)
	if err != nil {
		return nil, err
	}
	return &cmpLit{col: *l.col, op: op, lit: *r.lit, p: p}, nil
}

// compareLiterals folds a comparison of two constants (WHERE 1 = 1).
func compareLiterals(l literal, op cmpOp, r literal) (tv, error) {
	if l.kind == litNull || r.kind == litNull {
		return tvNull, nil
	}
	mismatch := fmt.Errorf("%w: cannot compare %s with %s", ErrType, l, r)
	num := func(x literal) (*big.Rat, bool) {
		switch x.kind {
		case litNum:
			return x.num, true
		case litBool:
			if x.b {
				return big.NewRat(1, 1), true
			}
			return new(big.Rat), true
		case litString:
			return parseNumber(x.str)
		}
		return nil, false
	}
	tm := func(x literal) (time.Time, bool) {
		if x.kind == litString {
			return parseTime(x.str)
		}
		return x.t, x.kind == litTime
	}
	switch {
	case (l.kind == litString || l.kind == litBytes) && (r.kind == litString || r.kind == litBytes):
		return tvOf(op.holds(strings.Compare(l.str, r.str))), nil // bytewise
	case l.kind == litBytes || r.kind == litBytes:
		return tvNull, mismatch
	case l.kind == litTime || r.kind == litTime:
		a, ok1 := tm(l)
		c, ok2 := tm(r)
		if !ok1 || !ok2 {
			return tvNull, mismatch
		}
		return tvOf(op.holds(a.Compare(c))), nil
	}
	a, ok1 := num(l)
	c, ok2 := num(r)
	if !ok1 || !ok2 {
		return tvNull, mismatch
	}
	return tvOf(op.holds(a.Cmp(c))), nil
}

// in binds "x [NOT] IN (literal, …)".
func (b *binder) in(e *ast.PatternInExpr) (node, error) {
	if e.Sel != nil {
		return nil, unsupported(e, "IN with a subquery")
	}
	c, ok := unparen(e.Expr).(*ast.ColumnNameExpr)
	if !ok {
		return nil, unsupported(e, "IN whose left side is not a column")
	}
	col, err := b.column(c)
	if err != nil {
		return nil, err
	}
	lits := make([]literal, 0, len(e.List))
	for _, item := range e.List {
		l, ok, err := literalOf(item)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, unsupported(e, "IN list item that is not a literal")
		}
		lits = append(lits, l)
	}
	n := &inList{col: *col, lits: lits, not: e.Not}
	if col.dom.dom == domString {
		for _, l := range lits {
			if l.kind == litNull {
				n.hasNull = true
				continue
			}
			if err := stringLiteral(*col, col.dom, l); err != nil {
				return nil, err
			}
			n.vals = append(n.vals, value{s: l.str})
		}
		return n, nil
	}
	n.vals, n.hasNull, err = setValues(*col, col.dom, lits)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// between binds "x [NOT] BETWEEN lo AND hi" as (x >= lo AND x <= hi), negated for NOT.
func (b *binder) between(e *ast.BetweenExpr) (node, error) {
	x, err := b.operand(e.Expr)
	if err != nil {
		return nil, err
	}
	lo, err := b.operand(e.Left)
	if err != nil {
		return nil, err
	}
	hi, err := b.operand(e.Right)
	if err != nil {
		return nil, err
	}
	ge, err := b.compare(x, opGE, lo)
	if err != nil {
		return nil, err
	}
	le, err := b.compare(x, opLE, hi)
	if err != nil {
		return nil, err
	}
	var inner node = newLogic(true, ge, le)
	if e.Not {
		inner = &notNode{x: inner}
	}
	return &between{x: x, lo: lo, hi: hi, not: e.Not, inner: inner}, nil
}

// like binds "x [NOT] LIKE 'pattern'" on a string column.
func (b *binder) like(e *ast.PatternLikeOrIlikeExpr) (node, error) {
	if !e.IsLike {
		return nil, unsupported(e, "ILIKE")
	}
	c, ok := unparen(e.Expr).(*ast.ColumnNameExpr)
	if !ok {
		return nil, unsupported(e, "LIKE whose left side is not a column")
	}
	col, err := b.column(c)
	if err != nil {
		return nil, err
	}
	if col.dom.isBinary {
		// Whether _ is a byte or a character, and what % spans in bytes that are not
		// UTF-8, has no answer both MySQL and a scan of raw bytes would give.
		return nil, fmt.Errorf("%w: LIKE needs a string column, %s is %s (binary columns take =, <, <=, >, >=, BETWEEN, IN and IS NULL)",
			ErrType, quoteIdent(col.name), col.typ)
	}
	if col.dom.dom != domString {
		return nil, fmt.Errorf("%w: LIKE needs a string column, %s is %s", ErrType, quoteIdent(col.name), col.typ)
	}
	pat, ok, err := literalOf(e.Pattern)
	if err != nil {
		return nil, err
	}
	if !ok || pat.kind != litString {
		return nil, fmt.Errorf("%w: LIKE pattern must be a string literal in %s", ErrType, exprText(e))
	}
	return newLike(*col, pat.str, e.Escape, e.Not)
}
