package filter

import (
	"cmp"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Comparisons of a column with a literal without arrow's compute kernels, for the common
// column types: a string equality over a 65k-row batch went through the generic binary
// kernel (a closure and bytes.Equal per row, about 20 ns a row); these loops compare
// offsets and bytes directly and write the bits a byte at a time. The result is what the
// kernel returns: the comparison where the column is valid, NULL where it is null.

// fastCmpLit compares arr (a column of the type the expression was bound to, uncast) with
// v by op; ok is false when the type has no fast path (the caller uses the kernel).
func (ev *evaluator) fastCmpLit(arr arrow.Array, op cmpOp, v value) (res *array.Boolean, ok bool) {
	buf := ev.bitmap()
	bits := buf.Bytes()
	switch a := arr.(type) {
	case *array.Int64:
		cmpInts(a.Int64Values(), v.i, op, bits)
	case *array.Int32:
		if int64(int32(v.i)) != v.i {
			buf.Release()
			return nil, false
		}
		cmpInts(a.Int32Values(), int32(v.i), op, bits)
	case *array.Timestamp:
		cmpInts(a.TimestampValues(), arrow.Timestamp(v.i), op, bits)
	case *array.Date32:
		if int64(int32(v.i)) != v.i {
			buf.Release()
			return nil, false
		}
		cmpInts(a.Date32Values(), arrow.Date32(v.i), op, bits)
	case *array.Uint64:
		cmpInts(a.Uint64Values(), v.u, op, bits)
	case *array.Float64:
		if op != opEQ && op != opNE { // ordering with NaN: leave it to the kernel
			buf.Release()
			return nil, false
		}
		cmpInts(a.Float64Values(), v.f, op, bits)
	case *array.String:
		if op != opEQ && op != opNE {
			buf.Release()
			return nil, false
		}
		eqBytes(a.ValueOffsets(), bufBytes(a.Data().Buffers()[2]), v.s, op == opNE, bits)
	case *array.LargeString:
		if op != opEQ && op != opNE {
			buf.Release()
			return nil, false
		}
		eqBytes(a.ValueOffsets(), bufBytes(a.Data().Buffers()[2]), v.s, op == opNE, bits)
	default:
		buf.Release()
		return nil, false
	}
	valid, nulls := ev.validity(arr)
	return ev.makeBool(buf, valid, nulls), true
}

// cmpInts sets bit i of bits where vals[i] op lit (bits is zeroed, len ≥ ceil(n/8)).
// Float64 values only take = and != (NaN = NaN is false, as in the kernel). One plain
// loop per operator: a selective comparison's branch is predicted, and nothing is called
// per row.
func cmpInts[T cmp.Ordered](vals []T, lit T, op cmpOp, bits []byte) {
	switch op {
	case opEQ:
		for i, x := range vals {
			if x == lit {
				bits[i>>3] |= 1 << (i & 7)
			}
		}
	case opNE:
		for i, x := range vals {
			if x != lit {
				bits[i>>3] |= 1 << (i & 7)
			}
		}
	case opLT:
		for i, x := range vals {
			if x < lit {
				bits[i>>3] |= 1 << (i & 7)
			}
		}
	case opLE:
		for i, x := range vals {
			if x <= lit {
				bits[i>>3] |= 1 << (i & 7)
			}
		}
	case opGT:
		for i, x := range vals {
			if x > lit {
				bits[i>>3] |= 1 << (i & 7)
			}
		}
	case opGE:
		for i, x := range vals {
			if x >= lit {
				bits[i>>3] |= 1 << (i & 7)
			}
		}
	}
}

// eqBytes sets bit i of bits where value i (offsets[i]..offsets[i+1] of vals) equals lit
// (differs from it, with ne).
func eqBytes[O int32 | int64](offsets []O, vals []byte, lit string, ne bool, bits []byte) {
	want := O(len(lit))
	for i := range len(offsets) - 1 {
		lo, hi := offsets[i], offsets[i+1]
		if (hi-lo == want && string(vals[lo:hi]) == lit) != ne {
			bits[i>>3] |= 1 << (i & 7)
		}
	}
}

func bufBytes(b *memory.Buffer) []byte {
	if b == nil {
		return nil
	}
	return b.Bytes()
}
