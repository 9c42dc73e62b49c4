package filter

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// value evaluates v over ev's rows (an empty array without running kernels
// when there are none).
func (ev *evaluator) value(v vnode) (arrow.Array, error) {
	if ev.n == 0 {
		return array.MakeArrayOfNull(ev.mem, v.vtype(), 0), nil
	}
	return v.value(ev)
}

// castTo returns arr as type dt, releasing arr. Casts are checked (an
// out-of-range or inexact value is an error) except integers to float64,
// which rounds as SQL engines do. A NULL-typed array becomes nulls of dt.
func (ev *evaluator) castTo(arr arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), dt) {
		return arr, nil
	}
	defer arr.Release()
	if isNullType(arr.DataType()) {
		return array.MakeArrayOfNull(ev.mem, dt, arr.Len()), nil
	}
	safe := !(dt.ID() == arrow.FLOAT64 && isNumeric(arr.DataType()))
	out, err := compute.CastArray(ev.ctx, arr, compute.NewCastOptions(dt, safe))
	if err != nil {
		return nil, fmt.Errorf("cast %s to %s: %w", arr.DataType(), dt, err)
	}
	// The float64 → float32 cast does not check the range itself.
	if src, ok := arr.(*array.Float64); ok && dt.ID() == arrow.FLOAT32 {
		f32 := out.(*array.Float32)
		for i := 0; i < src.Len(); i++ {
			if src.IsValid(i) && !math.IsInf(src.Value(i), 0) && math.IsInf(float64(f32.Value(i)), 0) {
				out.Release()
				return nil, fmt.Errorf("cast %s to %s: %v is out of range", arr.DataType(), dt, src.Value(i))
			}
		}
	}
	return out, nil
}

// store casts a result to the target type; a value that does not fit is ErrType.
func (ev *evaluator) store(arr arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	out, err := ev.castTo(arr, dt)
	if err != nil {
		return nil, fmt.Errorf("%w: a value does not fit %s: %v", ErrType, dt, err)
	}
	return out, nil
}

func (n *vCol) value(ev *evaluator) (arrow.Array, error) {
	arr, err := ev.column(n.col)
	if err != nil {
		return nil, err
	}
	arr.Retain()
	return arr, nil
}

func (n *vConst) value(ev *evaluator) (arrow.Array, error) {
	if !n.sc.IsValid() {
		return array.MakeArrayOfNull(ev.mem, n.sc.DataType(), ev.n), nil
	}
	return scalar.MakeArrayFromScalar(n.sc, ev.n, ev.mem)
}

// arith runs an arithmetic kernel; failures (overflow, division by zero) wrap ErrArithmetic.
func (ev *evaluator) arith(what fmt.Stringer, name string, args ...arrow.Array) (arrow.Array, error) {
	ds := make([]compute.Datum, len(args))
	for i, a := range args {
		ds[i] = datum(a)
	}
	out, err := compute.CallFunction(ev.ctx, name, nil, ds...)
	if err != nil {
		return nil, classf(ErrArithmetic, "%s in %s", kernelFailure(err), what)
	}
	defer out.Release()
	return out.(*compute.ArrayDatum).MakeArray(), nil
}

// operands evaluates xs and casts each to dt; ErrArithmetic when a value
// does not fit (a uint64 above the int64 range).
func (ev *evaluator) operands(dt arrow.DataType, xs ...vnode) ([]arrow.Array, error) {
	out := make([]arrow.Array, 0, len(xs))
	fail := func(err error) ([]arrow.Array, error) {
		for _, a := range out {
			a.Release()
		}
		return nil, err
	}
	for _, x := range xs {
		a, err := ev.value(x)
		if err != nil {
			return fail(err)
		}
		if a, err = ev.castTo(a, dt); err != nil {
			return fail(classf(ErrArithmetic, "%v in %s", err, writeNode(x)))
		}
		out = append(out, a)
	}
	return out, nil
}

func release(arrs ...arrow.Array) {
	for _, a := range arrs {
		if a != nil {
			a.Release()
		}
	}
}

// floatKernel names the arrow compute function of each operator on float64.
var floatKernel = [...]string{opAdd: "add", opSub: "subtract", opMul: "multiply", opDiv: "divide"}

func (n *vArith) value(ev *evaluator) (arrow.Array, error) {
	args, err := ev.operands(n.typ, n.l, n.r)
	if err != nil {
		return nil, err
	}
	defer release(args...)
	if isFloat(n.typ) {
		return ev.arith(stringer{n}, floatKernel[n.op], args...)
	}
	return ev.intArith(stringer{n}, n.op, args[0], args[1])
}

func (n *vNeg) value(ev *evaluator) (arrow.Array, error) {
	args, err := ev.operands(n.typ, n.x)
	if err != nil {
		return nil, err
	}
	defer release(args...)
	if isFloat(n.typ) {
		return ev.arith(stringer{n}, "negate", args[0])
	}
	zero, err := scalar.MakeArrayFromScalar(scalar.NewInt64Scalar(0), ev.n, ev.mem)
	if err != nil {
		return nil, err
	}
	defer zero.Release()
	return ev.intArith(stringer{n}, opSub, zero, args[0])
}

// intArith computes "l op r" on int64 or uint64 arrays row by row, failing
// with ErrArithmetic on overflow or division by zero of a non-null row.
// (arrow-go v18.8.0's "checked" kernels miss signed add/subtract overflow
// and MinInt64 DIV -1, and check the values under nulls in multiply, so
// integer arithmetic is done here.)
func (ev *evaluator) intArith(what fmt.Stringer, op arithOp, l, r arrow.Array) (arrow.Array, error) {
	n := l.Len()
	valid := make([]bool, n)
	for i := range valid {
		valid[i] = l.IsValid(i) && r.IsValid(i)
	}
	fail := func(a, b any, err error) error {
		return classf(ErrArithmetic, "%v in %s (%v %s %v)", err, what, a, arithText[op], b)
	}
	switch l := l.(type) {
	case *array.Int64:
		rv := r.(*array.Int64)
		out := make([]int64, n)
		for i := range out {
			if valid[i] {
				v, err := intOp(op, l.Value(i), rv.Value(i))
				if err != nil {
					return nil, fail(l.Value(i), rv.Value(i), err)
				}
				out[i] = v
			}
		}
		b := array.NewInt64Builder(ev.mem)
		defer b.Release()
		b.AppendValues(out, valid)
		return b.NewArray(), nil
	case *array.Uint64:
		rv := r.(*array.Uint64)
		out := make([]uint64, n)
		for i := range out {
			if valid[i] {
				v, err := uintOp(op, l.Value(i), rv.Value(i))
				if err != nil {
					return nil, fail(l.Value(i), rv.Value(i), err)
				}
				out[i] = v
			}
		}
		b := array.NewUint64Builder(ev.mem)
		defer b.Release()
		b.AppendValues(out, valid)
		return b.NewArray(), nil
	}
	return nil, fmt.Errorf("%w: %s: integer arithmetic on %s", ErrType, what, l.DataType())
}

// kernelFailure words an arithmetic kernel's error as intArith does
// ("division by zero", "overflow"), else keeps the kernel's text.
func kernelFailure(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "divide by zero"):
		return errDivByZero.Error()
	case strings.Contains(msg, "overflow"):
		return "overflow"
	}
	return msg
}

var (
	errOverflow  = errors.New("integer overflow")
	errDivByZero = errors.New("division by zero")
)

// intOp is a op b on int64 with overflow and division by zero reported.
func intOp(op arithOp, a, b int64) (int64, error) {
	switch op {
	case opAdd:
		s := a + b
		if (a^s)&(b^s) < 0 {
			return 0, errOverflow
		}
		return s, nil
	case opSub:
		d := a - b
		if (a^b)&(a^d) < 0 {
			return 0, errOverflow
		}
		return d, nil
	case opMul:
		p := a * b
		if a != 0 && (p/a != b || (a == -1 && b == math.MinInt64)) {
			return 0, errOverflow
		}
		return p, nil
	}
	if b == 0 {
		return 0, errDivByZero
	}
	if a == math.MinInt64 && b == -1 {
		return 0, errOverflow
	}
	if op == opMod {
		return a % b, nil // Go's remainder has the sign of the dividend, as MySQL's
	}
	return a / b, nil // truncates toward zero
}

// uintOp is a op b on uint64 with overflow and division by zero reported.
func uintOp(op arithOp, a, b uint64) (uint64, error) {
	switch op {
	case opAdd:
		s, carry := bits.Add64(a, b, 0)
		if carry != 0 {
			return 0, errOverflow
		}
		return s, nil
	case opSub:
		d, borrow := bits.Sub64(a, b, 0)
		if borrow != 0 {
			return 0, errOverflow
		}
		return d, nil
	case opMul:
		hi, lo := bits.Mul64(a, b)
		if hi != 0 {
			return 0, errOverflow
		}
		return lo, nil
	}
	if b == 0 {
		return 0, errDivByZero
	}
	if op == opMod {
		return a % b, nil
	}
	return a / b, nil
}

func (n *vPred) value(ev *evaluator) (arrow.Array, error) { return n.p.eval(ev) }

// stringer renders a node lazily for error messages.
type stringer struct{ v vnode }

func (s stringer) String() string { return writeNode(s.v) }

// rowsEvaluator returns an evaluator over the given rows of ev (ascending
// indices) and a function releasing it.
func (ev *evaluator) rowsEvaluator(rows []int) (*evaluator, func(), error) {
	if len(rows) == ev.n {
		return ev, func() {}, nil
	}
	bld := array.NewBooleanBuilder(ev.mem)
	defer bld.Release()
	bld.AppendValues(make([]bool, ev.n), nil)
	mask := bld.NewBooleanArray()
	defer mask.Release()
	bits := mask.Data().Buffers()[1].Bytes()
	for _, r := range rows {
		bits[r/8] |= 1 << (r % 8)
	}
	rec, err := compute.FilterRecordBatch(ev.ctx, ev.rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, nil, fmt.Errorf("select rows: %w", err)
	}
	return &evaluator{ctx: ev.ctx, mem: ev.mem, rec: rec, n: int(rec.NumRows())}, rec.Release, nil
}

// valueOn evaluates v on the given rows of ev, cast to dt.
func (ev *evaluator) valueOn(v vnode, rows []int, dt arrow.DataType) (arrow.Array, error) {
	sub, done, err := ev.rowsEvaluator(rows)
	if err != nil {
		return nil, err
	}
	defer done()
	arr, err := sub.value(v)
	if err != nil {
		return nil, err
	}
	return sub.store(arr, dt)
}

// gather assembles a result of ev.n rows: row r is entry pos[r] of parts[part[r]].
func (ev *evaluator) gather(parts []arrow.Array, part, pos []int) (arrow.Array, error) {
	if one := part[0]; !slices.ContainsFunc(part, func(p int) bool { return p != one }) {
		parts[one].Retain() // every row from one part, in order
		return parts[one], nil
	}
	offsets := make([]int, len(parts))
	for i := 1; i < len(parts); i++ {
		offsets[i] = offsets[i-1] + parts[i-1].Len()
	}
	all, err := array.Concatenate(parts, ev.mem)
	if err != nil {
		return nil, fmt.Errorf("concatenate branches: %w", err)
	}
	defer all.Release()
	bld := array.NewInt64Builder(ev.mem)
	defer bld.Release()
	bld.Reserve(ev.n)
	for r := 0; r < ev.n; r++ {
		bld.UnsafeAppend(int64(offsets[part[r]] + pos[r]))
	}
	idx := bld.NewInt64Array()
	defer idx.Release()
	out, err := compute.TakeArray(ev.ctx, all, idx)
	if err != nil {
		return nil, fmt.Errorf("take branches: %w", err)
	}
	return out, nil
}

func (n *vCase) value(ev *evaluator) (arrow.Array, error) {
	branch := make([]int, ev.n)
	pending := make([]int, ev.n)
	for r := range pending {
		pending[r] = r
	}
	for i, w := range n.whens {
		if len(pending) == 0 {
			break
		}
		sub, done, err := ev.rowsEvaluator(pending)
		if err != nil {
			return nil, err
		}
		m, err := w.eval(sub)
		done()
		if err != nil {
			return nil, err
		}
		rest := pending[:0:0]
		for k, r := range pending {
			if m.IsValid(k) && m.Value(k) {
				branch[r] = i
			} else {
				rest = append(rest, r)
			}
		}
		m.Release()
		pending = rest
	}
	for _, r := range pending {
		branch[r] = len(n.whens)
	}
	rows := make([][]int, len(n.whens)+1)
	pos := make([]int, ev.n)
	for r, b := range branch {
		pos[r] = len(rows[b])
		rows[b] = append(rows[b], r)
	}
	parts := make([]arrow.Array, len(rows))
	defer func() { release(parts...) }()
	for b, rs := range rows {
		v := n.els
		if b < len(n.whens) {
			v = n.thens[b]
		}
		var err error
		if len(rs) == 0 || v == nil {
			parts[b] = array.MakeArrayOfNull(ev.mem, n.typ, len(rs))
		} else if parts[b], err = ev.valueOn(v, rs, n.typ); err != nil {
			return nil, err
		}
	}
	return ev.gather(parts, branch, pos)
}

func (n *vCoalesce) value(ev *evaluator) (arrow.Array, error) {
	part := make([]int, ev.n)
	pos := make([]int, ev.n)
	pending := make([]int, ev.n)
	for r := range pending {
		pending[r] = r
	}
	parts := make([]arrow.Array, len(n.args))
	defer func() { release(parts...) }()
	for j, a := range n.args {
		if len(pending) == 0 {
			parts[j] = array.MakeArrayOfNull(ev.mem, n.typ, 0)
			continue
		}
		arr, err := ev.valueOn(a, pending, n.typ)
		if err != nil {
			return nil, err
		}
		parts[j] = arr
		last := j == len(n.args)-1
		rest := pending[:0:0]
		for k, r := range pending {
			if arr.IsValid(k) || last {
				part[r], pos[r] = j, k
			} else {
				rest = append(rest, r)
			}
		}
		pending = rest
	}
	return ev.gather(parts, part, pos)
}

func (n *cmpExpr) eval(ev *evaluator) (*array.Boolean, error) {
	args, err := ev.operands(n.common, n.l, n.r)
	if err != nil {
		return nil, err
	}
	defer release(args...)
	return ev.call(opKernel[n.op], nil, datum(args[0]), datum(args[1]))
}

func (n *valIsNull) eval(ev *evaluator) (*array.Boolean, error) {
	arr, err := ev.value(n.v)
	if err != nil {
		return nil, err
	}
	defer arr.Release()
	return ev.nullness(arr, n.not), nil
}
