package zonemap

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func sliceArray(a arrow.Array, i, j int) arrow.Array { return array.NewSlice(a, int64(i), int64(j)) }
