package btree

import (
	"bytes"
	"cmp"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// comparator returns a three-way comparison of two positions of arr in the index order:
// nulls first, then values ascending (floats: NaN after every number). Errors: a type
// the index does not support.
func comparator(arr arrow.Array) (func(i, j int) int, error) {
	var byValue func(i, j int) int
	switch a := arr.(type) {
	case *array.Int8:
		byValue = ordered(a.Int8Values())
	case *array.Int16:
		byValue = ordered(a.Int16Values())
	case *array.Int32:
		byValue = ordered(a.Int32Values())
	case *array.Int64:
		byValue = ordered(a.Int64Values())
	case *array.Uint8:
		byValue = ordered(a.Uint8Values())
	case *array.Uint16:
		byValue = ordered(a.Uint16Values())
	case *array.Uint32:
		byValue = ordered(a.Uint32Values())
	case *array.Uint64:
		byValue = ordered(a.Uint64Values())
	case *array.Float32:
		v := a.Float32Values()
		byValue = func(i, j int) int { return floatCmp(float64(v[i]), float64(v[j])) }
	case *array.Float64:
		v := a.Float64Values()
		byValue = func(i, j int) int { return floatCmp(v[i], v[j]) }
	case *array.Date32:
		byValue = ordered(a.Date32Values())
	case *array.Date64:
		byValue = ordered(a.Date64Values())
	case *array.Timestamp:
		byValue = ordered(a.TimestampValues())
	case *array.String:
		byValue = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.LargeString:
		byValue = func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.Binary:
		byValue = func(i, j int) int { return bytes.Compare(a.Value(i), a.Value(j)) }
	case *array.LargeBinary:
		byValue = func(i, j int) int { return bytes.Compare(a.Value(i), a.Value(j)) }
	case *array.Boolean:
		byValue = func(i, j int) int { return boolCmp(a.Value(i), a.Value(j)) }
	default:
		return nil, fmt.Errorf("btree: cannot order values of type %s", arr.DataType())
	}
	if arr.NullN() == 0 {
		return byValue, nil
	}
	return func(i, j int) int {
		ni, nj := arr.IsNull(i), arr.IsNull(j)
		switch {
		case ni && nj:
			return 0
		case ni:
			return -1
		case nj:
			return 1
		}
		return byValue(i, j)
	}, nil
}

func ordered[T cmp.Ordered](v []T) func(i, j int) int {
	return func(i, j int) int { return cmp.Compare(v[i], v[j]) }
}

func floatCmp(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
