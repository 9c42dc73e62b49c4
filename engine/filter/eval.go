package filter

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// evaluator holds the state of one Evaluate call. Arrays it returns are
// owned by the caller (released once used); record columns are borrowed.
type evaluator struct {
	ctx context.Context
	mem memory.Allocator
	rec arrow.RecordBatch
	n   int
}

// Evaluate computes the selection mask of rec: a boolean array with
// rec.NumRows() entries and no nulls, true where the predicate is TRUE
// (rows where it is FALSE or NULL are not selected). It allocates from the
// allocator in ctx (compute.WithAllocator), else the default one; the
// caller releases the result.
//
// rec must have the columns the expression references, by name and with
// the types they had in the schema given to Parse; otherwise the error
// wraps ErrUnknownColumn or ErrType. Kernel failures are returned wrapped;
// ErrArithmetic names the failing part ("division by zero in a / b"), and the
// caller names the whole expression (as the engine does: WHERE "…": …).
func (e *Expr) Evaluate(ctx context.Context, rec arrow.RecordBatch) (*array.Boolean, error) {
	if rec == nil {
		return nil, fmt.Errorf("filter: Evaluate of %s: nil record batch", e)
	}
	ev := &evaluator{ctx: ctx, mem: compute.GetAllocator(ctx), rec: rec, n: int(rec.NumRows())}
	if ev.n == 0 { // no kernels: zero-length arrays may lack buffers
		for _, idx := range e.cols {
			f := e.schema.Field(idx)
			if _, err := ev.column(colRef{name: f.Name, idx: idx, typ: f.Type}); err != nil {
				return nil, err
			}
		}
		return ev.constant(tvFalse), nil
	}
	res, err := e.root.eval(ev)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	return ev.fold(res), nil
}

// column finds the record's array for c, by position when the record has
// the bound schema's layout, else by name; the type must match.
func (ev *evaluator) column(c colRef) (arrow.Array, error) {
	s := ev.rec.Schema()
	idx := -1
	if c.idx < s.NumFields() && s.Field(c.idx).Name == c.name {
		idx = c.idx
	} else if m := s.FieldIndices(c.name); len(m) == 1 {
		idx = m[0]
	}
	if idx < 0 {
		return nil, fmt.Errorf("%w: record batch has no single column %s", ErrUnknownColumn, quoteIdent(c.name))
	}
	if !arrow.TypeEqual(s.Field(idx).Type, c.typ) {
		return nil, fmt.Errorf("%w: record batch column %s is %s, the expression was bound to %s",
			ErrType, quoteIdent(c.name), s.Field(idx).Type, c.typ)
	}
	return ev.rec.Column(idx), nil
}

// call runs a compute function that returns a boolean array.
func (ev *evaluator) call(name string, opts compute.FunctionOptions, args ...compute.Datum) (*array.Boolean, error) {
	out, err := compute.CallFunction(ev.ctx, name, opts, args...)
	if err != nil {
		return nil, fmt.Errorf("%s kernel: %w", name, err)
	}
	defer out.Release()
	ad, ok := out.(*compute.ArrayDatum)
	if !ok {
		return nil, fmt.Errorf("%s kernel: returned %s, want an array", name, out.Kind())
	}
	res, ok := ad.MakeArray().(*array.Boolean)
	if !ok {
		return nil, fmt.Errorf("%s kernel: returned %s, want bool", name, ad.Type())
	}
	return res, nil
}

func datum(v any) compute.Datum { return compute.NewDatumWithoutOwning(v) }

// not is SQL NOT (TRUE and FALSE swap, NULL stays NULL); it releases x.
// It is done on the bitmaps because arrow-go v18.8.0's "not" kernel drops
// the input's offset when copying the validity bitmap of a sliced array.
func (ev *evaluator) not(x *array.Boolean) *array.Boolean {
	defer x.Release()
	off := x.Data().Offset()
	values := ev.bitmap()
	bitutil.InvertBitmap(x.Data().Buffers()[1].Bytes(), off, ev.n, values.Bytes(), 0)
	valid, nulls := ev.validity(x)
	return ev.makeBool(values, valid, nulls)
}

// cast returns arr as type dt (arr itself, retained, when it already is).
func (ev *evaluator) cast(arr arrow.Array, dt arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), dt) {
		arr.Retain()
		return arr, nil
	}
	// Widening to float64 may round large integers, as SQL engines do; other
	// casts (timestamp units) must be exact, so they are checked.
	out, err := compute.CastArray(ev.ctx, arr, compute.NewCastOptions(dt, dt.ID() != arrow.FLOAT64))
	if err != nil {
		return nil, fmt.Errorf("cast %s to %s: %w", arr.DataType(), dt, err)
	}
	return out, nil
}

// evalType is the type a column is compared in: float32 widens to float64
// so literals compare exactly as doubles; other types compare as stored.
func evalType(dt arrow.DataType) arrow.DataType {
	if dt.ID() == arrow.FLOAT32 {
		return arrow.PrimitiveTypes.Float64
	}
	return dt
}

// scalarOf makes a scalar of type dt holding v.
func scalarOf(dt arrow.DataType, v value) (scalar.Scalar, error) {
	switch dt.ID() {
	case arrow.INT8:
		return scalar.NewInt8Scalar(int8(v.i)), nil
	case arrow.INT16:
		return scalar.NewInt16Scalar(int16(v.i)), nil
	case arrow.INT32:
		return scalar.NewInt32Scalar(int32(v.i)), nil
	case arrow.INT64:
		return scalar.NewInt64Scalar(v.i), nil
	case arrow.UINT8:
		return scalar.NewUint8Scalar(uint8(v.u)), nil
	case arrow.UINT16:
		return scalar.NewUint16Scalar(uint16(v.u)), nil
	case arrow.UINT32:
		return scalar.NewUint32Scalar(uint32(v.u)), nil
	case arrow.UINT64:
		return scalar.NewUint64Scalar(v.u), nil
	case arrow.FLOAT32:
		return scalar.NewFloat32Scalar(float32(v.f)), nil
	case arrow.FLOAT64:
		return scalar.NewFloat64Scalar(v.f), nil
	case arrow.BOOL:
		return scalar.NewBooleanScalar(v.i != 0), nil
	case arrow.STRING:
		return scalar.NewStringScalar(v.s), nil
	case arrow.LARGE_STRING:
		return scalar.NewLargeStringScalar(v.s), nil
	case arrow.BINARY:
		return scalar.NewBinaryScalar(memory.NewBufferBytes([]byte(v.s)), dt), nil
	case arrow.LARGE_BINARY:
		return scalar.NewLargeBinaryScalar(memory.NewBufferBytes([]byte(v.s))), nil
	case arrow.TIMESTAMP:
		return scalar.NewTimestampScalar(arrow.Timestamp(v.i), dt), nil
	case arrow.DATE32:
		return scalar.NewDate32Scalar(arrow.Date32(v.i)), nil
	case arrow.DATE64:
		return scalar.NewDate64Scalar(arrow.Date64(v.i)), nil
	}
	return nil, fmt.Errorf("%w: no scalar for %s", ErrType, dt)
}

// valueSet builds an array of type dt holding vals (and a null if withNull).
func (ev *evaluator) valueSet(dt arrow.DataType, vals []value, withNull bool) (arrow.Array, error) {
	bld := array.NewBuilder(ev.mem, dt)
	defer bld.Release()
	for _, v := range vals {
		switch b := bld.(type) {
		case *array.Int8Builder:
			b.Append(int8(v.i))
		case *array.Int16Builder:
			b.Append(int16(v.i))
		case *array.Int32Builder:
			b.Append(int32(v.i))
		case *array.Int64Builder:
			b.Append(v.i)
		case *array.Uint8Builder:
			b.Append(uint8(v.u))
		case *array.Uint16Builder:
			b.Append(uint16(v.u))
		case *array.Uint32Builder:
			b.Append(uint32(v.u))
		case *array.Uint64Builder:
			b.Append(v.u)
		case *array.Float64Builder:
			b.Append(v.f)
		case *array.BooleanBuilder:
			b.Append(v.i != 0)
		case *array.StringBuilder:
			b.Append(v.s)
		case *array.LargeStringBuilder:
			b.Append(v.s)
		case *array.BinaryBuilder: // binary and large_binary
			b.Append([]byte(v.s))
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(v.i))
		case *array.Date32Builder:
			b.Append(arrow.Date32(v.i))
		case *array.Date64Builder:
			b.Append(arrow.Date64(v.i))
		default:
			return nil, fmt.Errorf("%w: no IN set for %s", ErrType, dt)
		}
	}
	if withNull {
		bld.AppendNull()
	}
	return bld.NewArray(), nil
}

// bitmap allocates a zeroed bitmap of n bits.
func (ev *evaluator) bitmap() *memory.Buffer {
	buf := memory.NewResizableBuffer(ev.mem)
	buf.Resize(int(bitutil.BytesForBits(int64(ev.n))))
	clear(buf.Bytes())
	return buf
}

// validity copies arr's validity bitmap to offset 0; nil when arr has no nulls.
func (ev *evaluator) validity(arr arrow.Array) (*memory.Buffer, int) {
	if arr.NullN() == 0 {
		return nil, 0
	}
	buf := ev.bitmap()
	bitutil.CopyBitmap(arr.NullBitmapBytes(), arr.Data().Offset(), ev.n, buf.Bytes(), 0)
	return buf, arr.NullN()
}

// makeBool assembles a boolean array from values and validity (may be nil),
// taking over the caller's references to both buffers.
func (ev *evaluator) makeBool(values, valid *memory.Buffer, nulls int) *array.Boolean {
	data := array.NewData(arrow.FixedWidthTypes.Boolean, ev.n, []*memory.Buffer{valid, values}, nil, nulls, 0)
	values.Release()
	if valid != nil {
		valid.Release()
	}
	defer data.Release()
	return array.NewBooleanData(data)
}

// fill returns a bitmap with every bit set to v.
func (ev *evaluator) fill(v bool) *memory.Buffer {
	buf := ev.bitmap()
	if v {
		bitutil.SetBitsTo(buf.Bytes(), 0, int64(ev.n), true)
	}
	return buf
}

// constant is v on every row (NULL for tvNull).
func (ev *evaluator) constant(v tv) *array.Boolean {
	if v == tvNull {
		return ev.makeBool(ev.fill(false), ev.fill(false), ev.n)
	}
	return ev.makeBool(ev.fill(v == tvTrue), nil, 0)
}

// constIfValid is v where arr is not null and NULL where it is.
func (ev *evaluator) constIfValid(arr arrow.Array, v bool) *array.Boolean {
	valid, nulls := ev.validity(arr)
	return ev.makeBool(ev.fill(v), valid, nulls)
}

// fold turns a three-valued result into a selection mask: NULL becomes false.
func (ev *evaluator) fold(b *array.Boolean) *array.Boolean {
	if b.NullN() == 0 {
		b.Retain()
		return b
	}
	out := ev.bitmap()
	off := int64(b.Data().Offset())
	bitutil.BitmapAnd(b.Data().Buffers()[1].Bytes(), b.NullBitmapBytes(), off, off, out.Bytes(), 0, int64(ev.n))
	return ev.makeBool(out, nil, 0)
}

func (n *cmpLit) eval(ev *evaluator) (*array.Boolean, error) {
	arr, err := ev.column(n.col)
	if err != nil {
		return nil, err
	}
	switch n.p.kind {
	case planNull:
		return ev.constant(tvNull), nil
	case planConst:
		return ev.constIfValid(arr, n.p.konst), nil
	}
	dt := evalType(n.col.typ)
	if arrow.TypeEqual(dt, arr.DataType()) {
		if res, ok := ev.fastCmpLit(arr, n.p.op, n.p.val); ok {
			return res, nil
		}
	}
	sc, err := scalarOf(dt, n.p.val)
	if err != nil {
		return nil, err
	}
	arr, err = ev.cast(arr, dt)
	if err != nil {
		return nil, err
	}
	defer arr.Release()
	return ev.call(opKernel[n.p.op], nil, datum(arr), datum(sc))
}

func (n *cmpCols) eval(ev *evaluator) (*array.Boolean, error) {
	l, err := ev.column(n.l)
	if err != nil {
		return nil, err
	}
	r, err := ev.column(n.r)
	if err != nil {
		return nil, err
	}
	if l, err = ev.cast(l, n.common); err != nil {
		return nil, err
	}
	defer l.Release()
	if r, err = ev.cast(r, n.common); err != nil {
		return nil, err
	}
	defer r.Release()
	return ev.call(opKernel[n.op], nil, datum(l), datum(r))
}

func (n *constNode) eval(ev *evaluator) (*array.Boolean, error) { return ev.constant(n.v), nil }

func (n *logic) eval(ev *evaluator) (*array.Boolean, error) {
	kernel := "or_kleene"
	if n.and {
		kernel = "and_kleene"
	}
	acc, err := n.xs[0].eval(ev)
	if err != nil {
		return nil, err
	}
	for _, x := range n.xs[1:] {
		next, err := x.eval(ev)
		if err != nil {
			acc.Release()
			return nil, err
		}
		res, err := ev.call(kernel, nil, datum(acc), datum(next))
		acc.Release()
		next.Release()
		if err != nil {
			return nil, err
		}
		acc = res
	}
	return acc, nil
}

func (n *notNode) eval(ev *evaluator) (*array.Boolean, error) {
	x, err := n.x.eval(ev)
	if err != nil {
		return nil, err
	}
	return ev.not(x), nil
}

func (n *inList) eval(ev *evaluator) (*array.Boolean, error) {
	arr, err := ev.column(n.col)
	if err != nil {
		return nil, err
	}
	dt := evalType(n.col.typ)
	if arr, err = ev.cast(arr, dt); err != nil {
		return nil, err
	}
	defer arr.Release()
	var res *array.Boolean
	if n.col.dom.dom == domFloat || n.col.dom.isBool {
		// is_in hashes float bits, so -0.0 would not find 0.0, and in
		// arrow-go v18.8.0 it finds nothing in a bool column: use equal.
		res, err = ev.eqIn(arr, dt, n.vals, n.hasNull)
	} else {
		var set arrow.Array
		if set, err = ev.valueSet(dt, n.vals, n.hasNull); err != nil {
			return nil, err
		}
		defer set.Release()
		// Inconclusive gives SQL semantics: NULL for a null row, and NULL
		// for a row not found when the list holds a NULL.
		res, err = ev.call("is_in", &compute.SetOptions{ValueSet: datum(set), NullBehavior: compute.NullMatchingInconclusive}, datum(arr))
	}
	if err != nil || !n.not {
		return res, err
	}
	return ev.not(res), nil
}

// eqIn is "arr IN (vals[, NULL])" as an OR of equalities.
func (ev *evaluator) eqIn(arr arrow.Array, dt arrow.DataType, vals []value, hasNull bool) (*array.Boolean, error) {
	acc := ev.constIfValid(arr, false)
	for _, v := range vals {
		sc, err := scalarOf(dt, v)
		if err != nil {
			acc.Release()
			return nil, err
		}
		eq, err := ev.call("equal", nil, datum(arr), datum(sc))
		if err != nil {
			acc.Release()
			return nil, err
		}
		res, err := ev.call("or_kleene", nil, datum(acc), datum(eq))
		acc.Release()
		eq.Release()
		if err != nil {
			return nil, err
		}
		acc = res
	}
	if !hasNull {
		return acc, nil
	}
	defer acc.Release()
	return ev.call("or_kleene", nil, datum(acc), datum(scalar.MakeNullScalar(arrow.FixedWidthTypes.Boolean)))
}

func (n *between) eval(ev *evaluator) (*array.Boolean, error) { return n.inner.eval(ev) }

func (n *isNull) eval(ev *evaluator) (*array.Boolean, error) {
	if n.col != nil {
		arr, err := ev.column(*n.col)
		if err != nil {
			return nil, err
		}
		return ev.nullness(arr, n.not), nil
	}
	x, err := n.x.eval(ev)
	if err != nil {
		return nil, err
	}
	defer x.Release()
	return ev.nullness(x, n.not), nil
}

// nullness is "arr IS NULL" (or IS NOT NULL when notNull), never NULL.
// It reads the validity bitmap directly because arrow-go v18.8.0's
// "is_not_null" kernel ignores the offset of a sliced array.
func (ev *evaluator) nullness(arr arrow.Array, notNull bool) *array.Boolean {
	if arr.NullN() == 0 {
		return ev.makeBool(ev.fill(notNull), nil, 0)
	}
	values := ev.bitmap()
	if notNull {
		bitutil.CopyBitmap(arr.NullBitmapBytes(), arr.Data().Offset(), ev.n, values.Bytes(), 0)
	} else {
		bitutil.InvertBitmap(arr.NullBitmapBytes(), arr.Data().Offset(), ev.n, values.Bytes(), 0)
	}
	return ev.makeBool(values, nil, 0)
}

func (n *isTruth) eval(ev *evaluator) (*array.Boolean, error) {
	x, err := n.x.eval(ev)
	if err != nil {
		return nil, err
	}
	if !n.truth {
		x = ev.not(x)
	}
	res := ev.fold(x)
	x.Release()
	if n.not {
		return ev.not(res), nil
	}
	return res, nil
}

func (n *boolCol) eval(ev *evaluator) (*array.Boolean, error) {
	arr, err := ev.column(n.col)
	if err != nil {
		return nil, err
	}
	b, ok := arr.(*array.Boolean)
	if !ok {
		return nil, fmt.Errorf("%w: column %s is %s, not bool", ErrType, quoteIdent(n.col.name), arr.DataType())
	}
	b.Retain()
	return b, nil
}

func (n *like) eval(ev *evaluator) (*array.Boolean, error) {
	arr, err := ev.column(n.col)
	if err != nil {
		return nil, err
	}
	var get func(int) string
	switch a := arr.(type) {
	case *array.String:
		get = a.Value
	case *array.LargeString:
		get = a.Value
	default:
		return nil, fmt.Errorf("%w: LIKE on %s", ErrType, arr.DataType())
	}
	// Null rows are matched too (their slot is empty or stale); the copied
	// validity bitmap masks them.
	values := ev.bitmap()
	w := bitutil.NewBitmapWriter(values.Bytes(), 0, ev.n)
	for i := 0; i < ev.n; i++ {
		if n.match(get(i)) != n.not {
			w.Set()
		}
		w.Next()
	}
	w.Finish()
	valid, nulls := ev.validity(arr)
	return ev.makeBool(values, valid, nulls), nil
}
