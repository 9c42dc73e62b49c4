package filter

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// ValueExpr is a SQL value expression (the right-hand side of UPDATE … SET
// column = expression) bound to a schema and, optionally, to the type of
// the column it is stored into. It is immutable and safe for concurrent use.
//
// The language: literals as in WHERE expressions (NULL, TRUE, FALSE,
// numbers, strings, TIMESTAMP '…', DATE '…'); columns of any type; the
// arithmetic operators + - * / DIV % and unary minus on numeric operands;
// CASE [x] WHEN … THEN … [ELSE …] END; COALESCE(a, …) and IFNULL(a, b);
// any WHERE condition, which gives a boolean (a > 5, s LIKE 'x%').
//
// Types: integer operands of + - * DIV % are computed as int64 (uint64 when
// both are unsigned), anything with a float as float64; / always divides as
// float64 (as MySQL does; DIV is integer division, truncating toward zero).
// Arithmetic is checked: overflow and division by zero are errors
// (ErrArithmetic), not wrapped values. A literal standing for the whole
// value, or for a branch of CASE/COALESCE, is converted exactly to the
// target type (an int8 column refuses 300 and 2.5 when parsed). The result
// is cast to the target type with a checked cast: a value that does not fit
// (300 into int8, 2.5 into an integer column, a timestamp finer than the
// column's unit) is an error wrapping ErrType, raised by Evaluate.
//
// CASE and COALESCE evaluate each branch only on the rows that take it, so
// CASE WHEN b <> 0 THEN a DIV b ELSE 0 END never divides by zero.
type ValueExpr struct {
	root   vnode
	schema *arrow.Schema
	target arrow.DataType // nil: the expression's own type
	cols   []int
}

// ParseValue parses expr and binds it to schema. With a non-nil target,
// Evaluate returns arrays of that type, and expressions that can never be
// stored in it (a string into an integer column) are refused here.
//
// Errors wrap ErrSyntax, ErrUnknownColumn, ErrType (a literal or
// expression that does not fit target, arithmetic on non-numbers) or
// ErrUnsupported (functions other than COALESCE and IFNULL, subqueries, …).
func ParseValue(expr string, schema *arrow.Schema, target arrow.DataType) (*ValueExpr, error) {
	if schema == nil {
		schema = arrow.NewSchema(nil, nil)
	}
	b := &binder{schema: schema, used: map[int]bool{}}
	var root vnode
	err := parseSQL(expr, "value", func(e ast.ExprNode) (err error) {
		root, err = b.value(e, target)
		return err
	})
	if err != nil {
		return nil, err
	}
	if target != nil && !assignable(root.vtype(), target) {
		return nil, fmt.Errorf("%w: %s is %s, which cannot be stored as %s", ErrType, writeNode(root), root.vtype(), target)
	}
	return &ValueExpr{root: root, schema: schema, target: target, cols: b.columns()}, nil
}

// String returns the expression in normalized form (see Expr.String);
// ParseValue of it gives an equivalent expression.
func (v *ValueExpr) String() string { return writeNode(v.root) }

// Columns returns the names of the columns the expression reads, in schema
// order, each once.
func (v *ValueExpr) Columns() []string {
	out := make([]string, len(v.cols))
	for i, idx := range v.cols {
		out[i] = v.schema.Field(idx).Name
	}
	return out
}

// Type is the type of the arrays Evaluate returns: the target, or the
// expression's own type without one (arrow.Null for a bare NULL).
func (v *ValueExpr) Type() arrow.DataType {
	if v.target != nil {
		return v.target
	}
	return v.root.vtype()
}

// AlwaysNull reports whether the expression is NULL on every row (NULL, or
// arithmetic with a NULL operand), which a caller storing into a
// non-nullable column can refuse before reading any row.
func (v *ValueExpr) AlwaysNull() bool {
	return alwaysNull(v.root)
}

// Evaluate computes the expression for every row of rec: an array of Type()
// with rec.NumRows() entries, which the caller releases. It allocates from
// the allocator in ctx (compute.WithAllocator), else the default one.
//
// rec must have the referenced columns with their bound types (else
// ErrUnknownColumn or ErrType). Errors: ErrArithmetic for overflow or
// division by zero (naming the failing part: "division by zero in a DIV b
// (1 DIV 0)"), ErrType for a result that does not fit the target. The caller
// names the whole expression (the engine: SET col = …: …).
func (v *ValueExpr) Evaluate(ctx context.Context, rec arrow.RecordBatch) (arrow.Array, error) {
	if rec == nil {
		return nil, fmt.Errorf("filter: Evaluate of %s: nil record batch", v)
	}
	ev := &evaluator{ctx: ctx, mem: compute.GetAllocator(ctx), rec: rec, n: int(rec.NumRows())}
	if ev.n == 0 {
		for _, idx := range v.cols {
			f := v.schema.Field(idx)
			if _, err := ev.column(colRef{name: f.Name, idx: idx, typ: f.Type}); err != nil {
				return nil, err
			}
		}
		return array.MakeArrayOfNull(ev.mem, v.Type(), 0), nil
	}
	arr, err := ev.value(v.root)
	if err != nil {
		return nil, err
	}
	if v.target == nil {
		return arr, nil
	}
	out, err := ev.store(arr, v.target)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// vnode is a bound value expression. value returns an array of vtype()
// with one entry per row of ev (ev.n > 0), owned by the caller.
type vnode interface {
	vtype() arrow.DataType
	write(sb *strings.Builder)
	value(ev *evaluator) (arrow.Array, error)
}

func writeNode(n interface{ write(*strings.Builder) }) string {
	var sb strings.Builder
	n.write(&sb)
	return sb.String()
}

// writeOperand writes an operand of an operator, parenthesized unless it
// is a column or a constant.
func writeOperand(sb *strings.Builder, v vnode) {
	switch v.(type) {
	case *vCol, *vConst, *vCase, *vCoalesce:
		v.write(sb)
	default:
		sb.WriteByte('(')
		v.write(sb)
		sb.WriteByte(')')
	}
}

// vCol is a column.
type vCol struct{ col colRef }

func (n *vCol) vtype() arrow.DataType     { return n.col.typ }
func (n *vCol) write(sb *strings.Builder) { sb.WriteString(quoteIdent(n.col.name)) }

// vConst is a constant; an invalid scalar is NULL.
type vConst struct {
	sc   scalar.Scalar
	text string
}

func (n *vConst) vtype() arrow.DataType     { return n.sc.DataType() }
func (n *vConst) write(sb *strings.Builder) { sb.WriteString(n.text) }

// nullConst is NULL of type dt, written as text (the folded expression).
func nullConst(dt arrow.DataType, text string) *vConst {
	return &vConst{sc: scalar.MakeNullScalar(dt), text: text}
}

// alwaysNull reports whether v is a NULL constant (of any type).
func alwaysNull(v vnode) bool {
	c, ok := v.(*vConst)
	return ok && !c.sc.IsValid()
}

// arithOp is a binary arithmetic operator.
type arithOp uint8

const (
	opAdd arithOp = iota
	opSub
	opMul
	opDiv    // float division
	opIntDiv // DIV: integer division truncating toward zero
	opMod    // %: remainder with the sign of the dividend
)

var arithOps = map[opcode.Op]arithOp{
	opcode.Plus: opAdd, opcode.Minus: opSub, opcode.Mul: opMul, opcode.Div: opDiv,
	opcode.IntDiv: opIntDiv, opcode.Mod: opMod,
}
var arithText = [...]string{opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opIntDiv: "DIV", opMod: "%"}

// vArith is "l op r" computed in typ (both operands are cast to it first).
type vArith struct {
	op   arithOp
	l, r vnode
	typ  arrow.DataType
}

func (n *vArith) vtype() arrow.DataType { return n.typ }
func (n *vArith) write(sb *strings.Builder) {
	writeOperand(sb, n.l)
	sb.WriteString(" " + arithText[n.op] + " ")
	writeOperand(sb, n.r)
}

// vNeg is unary minus computed in typ.
type vNeg struct {
	x   vnode
	typ arrow.DataType
}

func (n *vNeg) vtype() arrow.DataType { return n.typ }
func (n *vNeg) write(sb *strings.Builder) {
	sb.WriteString("-")
	writeOperand(sb, n.x)
}

// vPred is a condition used as a boolean value (three-valued: NULL stays NULL).
type vPred struct{ p node }

func (n *vPred) vtype() arrow.DataType     { return arrow.FixedWidthTypes.Boolean }
func (n *vPred) write(sb *strings.Builder) { n.p.write(sb) }

// vCase is a searched CASE: the first WHEN that is TRUE picks its THEN;
// no match picks ELSE (NULL when els is nil). Branch values are cast to typ.
type vCase struct {
	whens []node
	thens []vnode
	els   vnode
	typ   arrow.DataType
}

func (n *vCase) vtype() arrow.DataType { return n.typ }
func (n *vCase) write(sb *strings.Builder) {
	sb.WriteString("CASE")
	for i, w := range n.whens {
		sb.WriteString(" WHEN ")
		w.write(sb)
		sb.WriteString(" THEN ")
		n.thens[i].write(sb)
	}
	if n.els != nil {
		sb.WriteString(" ELSE ")
		n.els.write(sb)
	}
	sb.WriteString(" END")
}

// vCoalesce is the first non-NULL argument, cast to typ.
type vCoalesce struct {
	args []vnode
	typ  arrow.DataType
}

func (n *vCoalesce) vtype() arrow.DataType { return n.typ }
func (n *vCoalesce) write(sb *strings.Builder) {
	sb.WriteString("COALESCE(")
	for i, a := range n.args {
		if i > 0 {
			sb.WriteString(", ")
		}
		a.write(sb)
	}
	sb.WriteByte(')')
}

// value binds a value expression. hint is the type a literal standing for
// the value is converted to exactly (the target column's type, passed down
// through CASE and COALESCE branches); nil gives literals their own type.
func (b *binder) value(e ast.ExprNode, hint arrow.DataType) (vnode, error) {
	switch e := e.(type) {
	case *ast.ParenthesesExpr:
		return b.value(e.Expr, hint)
	case *ast.ColumnNameExpr:
		c, err := b.anyColumn(e)
		if err != nil {
			return nil, err
		}
		return &vCol{col: *c}, nil
	case *ast.BinaryOperationExpr:
		if op, ok := arithOps[e.Op]; ok {
			l, err := b.value(e.L, nil)
			if err != nil {
				return nil, err
			}
			r, err := b.value(e.R, nil)
			if err != nil {
				return nil, err
			}
			return newArith(op, l, r)
		}
	case *ast.CaseExpr:
		return b.caseValue(e, hint)
	case *ast.FuncCallExpr:
		switch e.FnName.L {
		case ast.Coalesce, ast.Ifnull:
			return b.coalesce(e, hint)
		case ast.DateLiteral, ast.TimestampLiteral, ast.TimeLiteral:
		default:
			return nil, unsupported(e, "function "+strings.ToUpper(e.FnName.O))
		}
	}
	l, ok, err := literalOf(e)
	if err != nil {
		return nil, err
	}
	if ok {
		return constValue(l, hint)
	}
	if u, ok := e.(*ast.UnaryOperationExpr); ok && (u.Op == opcode.Minus || u.Op == opcode.Plus) {
		x, err := b.value(u.V, nil)
		if err != nil {
			return nil, err
		}
		return newNeg(x, u.Op == opcode.Plus)
	}
	p, err := b.predicate(e)
	if err != nil {
		return nil, err
	}
	return &vPred{p: p}, nil
}

// constValue binds a literal: converted exactly to hint, or with its own type.
func constValue(l literal, hint arrow.DataType) (vnode, error) {
	dt := hint
	if dt == nil {
		var err error
		if dt, err = literalType(l); err != nil {
			return nil, err
		}
	}
	sc, err := literalScalar(l, dt)
	if err != nil {
		return nil, err
	}
	return &vConst{sc: sc, text: l.String()}, nil
}

// literalType is the type a literal has on its own: int64 for integers
// (uint64 above the int64 range), float64 for other numbers, utf8 for
// strings, date32 for DATE, timestamp[us] for TIMESTAMP (ns when finer),
// null for NULL.
func literalType(l literal) (arrow.DataType, error) {
	switch l.kind {
	case litNull:
		return arrow.Null, nil
	case litBool:
		return arrow.FixedWidthTypes.Boolean, nil
	case litString:
		return arrow.BinaryTypes.String, nil
	case litBytes:
		return arrow.BinaryTypes.Binary, nil
	case litTime:
		if l.dateOnly {
			return arrow.FixedWidthTypes.Date32, nil
		}
		if l.t.Nanosecond()%1000 != 0 {
			return &arrow.TimestampType{Unit: arrow.Nanosecond}, nil
		}
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	}
	if l.numFloat || !l.num.IsInt() {
		return arrow.PrimitiveTypes.Float64, nil
	}
	if l.num.Sign() > 0 && !l.num.Num().IsInt64() {
		return arrow.PrimitiveTypes.Uint64, nil
	}
	return arrow.PrimitiveTypes.Int64, nil
}

// literalScalar converts l exactly to a scalar of type dt. Errors wrap
// ErrType and say why (out of range, not an integer, finer than the unit, …).
func literalScalar(l literal, dt arrow.DataType) (scalar.Scalar, error) {
	if l.kind == litNull {
		return scalar.MakeNullScalar(dt), nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: %s cannot be stored as %s: %s", ErrType, l, dt, why)
	}
	d, ok := domainOf(dt)
	if !ok {
		return nil, bad("value expressions make no literals of this type")
	}
	number := func() (*big.Rat, error) {
		switch l.kind {
		case litNum:
			return l.num, nil
		case litString:
			if r, ok := parseNumber(l.str); ok {
				return r, nil
			}
			return nil, bad("not a number")
		}
		return nil, bad("a number is needed")
	}
	var v value
	switch {
	case d.dom == domString:
		if l.kind != litString && !(l.kind == litBytes && d.isBinary) {
			if d.isBinary {
				return nil, bad("a string, hex or bit literal is needed")
			}
			return nil, bad("a string literal is needed")
		}
		v.s = l.str
	case d.isBool:
		switch {
		case l.kind == litBool:
			if l.b {
				v.i = 1
			}
		case l.kind == litNum && l.num.IsInt() && (l.num.Sign() == 0 || l.num.Cmp(big.NewRat(1, 1)) == 0):
			v.i = l.num.Num().Int64()
		default:
			return nil, bad("TRUE or FALSE is needed")
		}
	case d.unitNano != nil:
		t, ok := l.t, l.kind == litTime
		if l.kind == litString {
			t, ok = parseTime(l.str)
		}
		if !ok {
			return nil, bad("a TIMESTAMP, DATE or timestamp string is needed")
		}
		r := timeUnits(t, d.unitNano)
		if !r.IsInt() {
			return nil, bad("finer than the type's unit")
		}
		if r.Num().Cmp(d.lo) < 0 || r.Num().Cmp(d.hi) > 0 {
			return nil, bad("out of range")
		}
		v.i = r.Num().Int64()
	case d.dom == domFloat:
		r, err := number()
		if err != nil {
			return nil, err
		}
		v.f, _ = r.Float64()
		if math.IsInf(v.f, 0) || (dt.ID() == arrow.FLOAT32 && math.Abs(v.f) > math.MaxFloat32) {
			return nil, bad("out of range")
		}
	default:
		r, err := number()
		if err != nil {
			return nil, err
		}
		if !r.IsInt() {
			return nil, bad("not an integer")
		}
		if r.Num().Cmp(d.lo) < 0 || r.Num().Cmp(d.hi) > 0 {
			return nil, bad("out of range")
		}
		v = d.valueOf(r.Num())
	}
	return scalarOf(dt, v)
}

func isSigned(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		return true
	}
	return false
}

func isUnsigned(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isFloat(dt arrow.DataType) bool    { return dt.ID() == arrow.FLOAT32 || dt.ID() == arrow.FLOAT64 }
func isInteger(dt arrow.DataType) bool  { return isSigned(dt) || isUnsigned(dt) }
func isNumeric(dt arrow.DataType) bool  { return isInteger(dt) || isFloat(dt) }
func isNullType(dt arrow.DataType) bool { return dt.ID() == arrow.NULL }
func isString(dt arrow.DataType) bool {
	return dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING
}
func isDate(dt arrow.DataType) bool { return dt.ID() == arrow.DATE32 || dt.ID() == arrow.DATE64 }
func isBinary(dt arrow.DataType) bool {
	return dt.ID() == arrow.BINARY || dt.ID() == arrow.LARGE_BINARY
}

// arithType is the type integer and float operands are computed in.
func arithType(a, b arrow.DataType) arrow.DataType {
	switch {
	case isFloat(a) || isFloat(b):
		return arrow.PrimitiveTypes.Float64
	case (isUnsigned(a) || isNullType(a)) && (isUnsigned(b) || isNullType(b)):
		return arrow.PrimitiveTypes.Uint64
	}
	return arrow.PrimitiveTypes.Int64
}

func newArith(op arithOp, l, r vnode) (vnode, error) {
	for _, x := range []vnode{l, r} {
		if t := x.vtype(); !isNumeric(t) && !isNullType(t) {
			return nil, fmt.Errorf("%w: %s needs numbers, %s is %s", ErrType, arithText[op], writeNode(x), t)
		}
	}
	typ := arithType(l.vtype(), r.vtype())
	switch op {
	case opDiv:
		typ = arrow.PrimitiveTypes.Float64
	case opIntDiv, opMod:
		if isFloat(typ) {
			return nil, fmt.Errorf("%w: %s needs integers, not %s and %s", ErrType, arithText[op], l.vtype(), r.vtype())
		}
	}
	n := &vArith{op: op, l: l, r: r, typ: typ}
	if alwaysNull(l) || alwaysNull(r) {
		return nullConst(typ, writeNode(n)), nil // NULL op x is NULL
	}
	return n, nil
}

func newNeg(x vnode, plus bool) (vnode, error) {
	t := x.vtype()
	if !isNumeric(t) && !isNullType(t) {
		return nil, fmt.Errorf("%w: unary minus needs a number, %s is %s", ErrType, writeNode(x), t)
	}
	if plus {
		return x, nil
	}
	typ := arrow.DataType(arrow.PrimitiveTypes.Int64)
	if isFloat(t) {
		typ = arrow.PrimitiveTypes.Float64
	}
	n := &vNeg{x: x, typ: typ}
	if alwaysNull(x) {
		return nullConst(typ, writeNode(n)), nil
	}
	return n, nil
}

func (b *binder) caseValue(e *ast.CaseExpr, hint arrow.DataType) (vnode, error) {
	n := &vCase{}
	for _, w := range e.WhenClauses {
		cond := w.Expr
		if e.Value != nil { // CASE x WHEN v: x = v
			cond = &ast.BinaryOperationExpr{Op: opcode.EQ, L: e.Value, R: w.Expr}
		}
		p, err := b.predicate(cond)
		if err != nil {
			return nil, err
		}
		v, err := b.value(w.Result, hint)
		if err != nil {
			return nil, err
		}
		n.whens, n.thens = append(n.whens, p), append(n.thens, v)
	}
	branches := n.thens
	if e.ElseClause != nil {
		v, err := b.value(e.ElseClause, hint)
		if err != nil {
			return nil, err
		}
		n.els = v
		branches = append(branches[:len(branches):len(branches)], v)
	}
	var err error
	n.typ, err = resultType(hint, branches, "CASE")
	return n, err
}

func (b *binder) coalesce(e *ast.FuncCallExpr, hint arrow.DataType) (vnode, error) {
	name := strings.ToUpper(e.FnName.O)
	if len(e.Args) == 0 || (e.FnName.L == ast.Ifnull && len(e.Args) != 2) {
		return nil, fmt.Errorf("%w: %s with %d arguments in %s", ErrSyntax, name, len(e.Args), exprText(e))
	}
	n := &vCoalesce{}
	for _, a := range e.Args {
		v, err := b.value(a, hint)
		if err != nil {
			return nil, err
		}
		n.args = append(n.args, v)
	}
	var err error
	n.typ, err = resultType(hint, n.args, name)
	return n, err
}

// resultType is the type of a CASE or COALESCE: hint when given (every
// branch must be storable in it), else the common type of the branches.
func resultType(hint arrow.DataType, branches []vnode, what string) (arrow.DataType, error) {
	if hint != nil {
		for _, v := range branches {
			if !assignable(v.vtype(), hint) {
				return nil, fmt.Errorf("%w: %s branch %s is %s, which cannot be stored as %s", ErrType, what, writeNode(v), v.vtype(), hint)
			}
		}
		return hint, nil
	}
	var typ arrow.DataType = arrow.Null
	for _, v := range branches {
		t := v.vtype()
		switch {
		case isNullType(t):
		case isNullType(typ), arrow.TypeEqual(typ, t):
			typ = t
		case isNumeric(typ) && isNumeric(t):
			typ = arithType(typ, t)
		case isString(typ) && isString(t):
			typ = arrow.BinaryTypes.LargeString
		case (isBinary(typ) || isString(typ)) && (isBinary(t) || isString(t)): // one binary at least
			typ = arrow.BinaryTypes.LargeBinary
		default:
			return nil, fmt.Errorf("%w: %s mixes %s and %s (%s)", ErrType, what, typ, t, writeNode(v))
		}
	}
	return typ, nil
}

// assignable reports whether values of type from may be stored as type to
// (checked per value when cast): NULL into anything; numbers into numbers;
// strings into strings; binaries into binaries; timestamps into timestamps; dates into dates;
// otherwise only the same type.
func assignable(from, to arrow.DataType) bool {
	switch {
	case isNullType(from), arrow.TypeEqual(from, to):
		return true
	case isNumeric(from):
		return isNumeric(to)
	case isString(from):
		return isString(to)
	case isBinary(from):
		return isBinary(to)
	case from.ID() == arrow.TIMESTAMP:
		return to.ID() == arrow.TIMESTAMP
	case isDate(from):
		return isDate(to)
	}
	return false
}

// cmpExpr compares two value expressions (WHERE a + b > 10), both cast to
// common first. Statistics say nothing about it.
type cmpExpr struct {
	l, r   vnode
	op     cmpOp
	common arrow.DataType
}

func (n *cmpExpr) write(sb *strings.Builder) {
	side := func(v vnode) {
		if _, ok := v.(*vPred); ok {
			writeOperand(sb, v)
		} else {
			v.write(sb)
		}
	}
	side(n.l)
	sb.WriteString(" " + opText[n.op] + " ")
	side(n.r)
}

func (n *cmpExpr) outcomes(*statsCtx) tri { return tri{t: true, f: true, n: true} }

func newCmpExpr(l vnode, op cmpOp, r vnode) (node, error) {
	lt, rt := l.vtype(), r.vtype()
	n := &cmpExpr{l: l, r: r, op: op}
	switch {
	case isNullType(lt) || isNullType(rt):
		return &constNode{v: tvNull, text: writeNode(n)}, nil
	case isNumeric(lt) && isNumeric(rt):
		n.common = arithType(lt, rt)
	case isString(lt) && isString(rt):
		n.common = arrow.BinaryTypes.LargeString
	case (isBinary(lt) || isString(lt)) && (isBinary(rt) || isString(rt)): // one binary at least: bytes
		n.common = arrow.BinaryTypes.LargeBinary
	case lt.ID() == arrow.TIMESTAMP && rt.ID() == arrow.TIMESTAMP:
		unit := max(lt.(*arrow.TimestampType).Unit, rt.(*arrow.TimestampType).Unit)
		n.common = &arrow.TimestampType{Unit: unit, TimeZone: lt.(*arrow.TimestampType).TimeZone}
	case isDate(lt) && isDate(rt):
		n.common = arrow.FixedWidthTypes.Date64
	case lt.ID() == arrow.BOOL && rt.ID() == arrow.BOOL && (op == opEQ || op == opNE):
		n.common = lt
	default:
		return nil, fmt.Errorf("%w: cannot compare %s (%s) with %s (%s)", ErrType, writeNode(l), lt, writeNode(r), rt)
	}
	return n, nil
}

// valIsNull is "expression IS [NOT] NULL" for a value expression; never NULL.
type valIsNull struct {
	v   vnode
	not bool
}

func (n *valIsNull) write(sb *strings.Builder) {
	writeOperand(sb, n.v)
	if n.not {
		sb.WriteString(" IS NOT NULL")
	} else {
		sb.WriteString(" IS NULL")
	}
}

func (n *valIsNull) outcomes(*statsCtx) tri { return tri{t: true, f: true} }

// simpleOperand reports whether e is a column or a literal (the forms
// comparisons bind exactly and statistics can prune).
func simpleOperand(e ast.ExprNode) bool {
	e = unparen(e)
	if _, ok := e.(*ast.ColumnNameExpr); ok {
		return true
	}
	_, ok, _ := literalOf(e)
	return ok
}
