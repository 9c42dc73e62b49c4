package index_test

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/index"
)

// Which columns an index can cover. engine.Table.CreateIndex checks this before it reads
// anything; the index structures themselves are in index/btree and index/zonemap.
func ExampleSupported() {
	fmt.Println(index.Supported(index.KindBTree, arrow.BinaryTypes.String))
	err := index.Supported(index.KindZoneMap, arrow.ListOf(arrow.PrimitiveTypes.Int64))
	fmt.Println(errors.Is(err, index.ErrUnsupportedType))
	// Output:
	// <nil>
	// true
}
