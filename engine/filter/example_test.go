package filter_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
)

// Parse a WHERE expression against a schema, evaluate it on a record batch (a selection
// mask: NULL rows are not selected), and ask whether a batch whose statistics are known
// can hold a match at all. Engine scans do exactly this with ScanOptions.Filter.
func Example() {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "origin", Type: arrow.BinaryTypes.String},
		{Name: "delay", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	expr, err := filter.Parse("origin = 'SFO' AND delay > 60", schema)
	if err != nil {
		log.Fatal(err)
	}

	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"SFO", "SFO", "ORD", "SFO"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{90, 5, 120, 0}, []bool{true, true, true, false})
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	mask, err := expr.Evaluate(context.Background(), rec)
	if err != nil {
		log.Fatal(err)
	}
	defer mask.Release()
	fmt.Println("selected:", mask)

	// Statistics pruning: delays of this batch lie in [0, 45], so no row can match.
	stats := func(column string) (filter.ColumnStats, bool) {
		if column == "delay" {
			return filter.ColumnStats{HasMinMax: true, Min: int64(0), Max: int64(45)}, true
		}
		return filter.ColumnStats{}, false
	}
	fmt.Println("may match:", expr.MayMatch(1000, stats))

	_, err = filter.Parse("delay > 'soon'", schema)
	fmt.Println("type error:", errors.Is(err, filter.ErrType))
	_, err = filter.Parse("dest = 'SEA'", schema)
	fmt.Println("unknown column:", errors.Is(err, filter.ErrUnknownColumn))
	// Output:
	// selected: [true false false false]
	// may match: false
	// type error: true
	// unknown column: true
}
