package zonemap_test

import (
	"fmt"
	"log"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index/zonemap"
)

// A zone map keeps min, max and null count per zone of rows; a search keeps the zones
// that may hold a match, and the scan reads and filters only their rows.
func Example() {
	vb := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range 1000 {
		vb.Append(int64(i))
	}
	col := vb.NewArray()
	vb.Release()
	defer col.Release()

	b := zonemap.NewBuilder([]int32{0}, 100) // field id 0, zones of 100 rows
	if err := b.Add(7, 0, []arrow.Array{col}); err != nil {
		log.Fatal(err)
	}
	m := b.Map()

	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	e, err := filter.Parse("n >= 120 AND n < 250", schema)
	if err != nil {
		log.Fatal(err)
	}
	zones, stats := m.Search(e, map[int32]string{0: "n"}, nil)
	for _, z := range zones {
		fmt.Printf("fragment %d rows %d..%d\n", z.Fragment, z.Start, z.Start+z.Rows-1)
	}
	fmt.Printf("%d of %d zones skipped\n", stats.ZonesSkipped, stats.Zones)
	// Output:
	// fragment 7 rows 100..199
	// fragment 7 rows 200..299
	// 8 of 10 zones skipped
}
