package compaction_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

// Five small appends leave five fragments; one compaction rewrites them into one, as a
// maintenance version that keeps every row and their order. (Without etcd here, so
// nothing is published; with a catalog the new version is published by fast-forward.)
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "compaction-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "file://"+dir, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	db, err := engine.Open(ctx, st, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	tbl, err := db.CreateTable(ctx, "events", schema)
	if err != nil {
		log.Fatal(err)
	}
	for i := range int64(5) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{2 * i, 2*i + 1}, nil)
		rec := b.NewRecordBatch()
		b.Release()
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			log.Fatal(err)
		}
	}

	stats, err := compaction.Compact(ctx, db, "events", compaction.Options{})
	if err != nil {
		log.Fatal(err) // errors.Is(err, compaction.ErrAttemptsExhausted) under heavy contention
	}
	fmt.Printf("version %d: %d fragments -> %d, %d rows rewritten\n",
		stats.Version, stats.FragmentsBefore, stats.FragmentsAfter, stats.RowsRewritten)

	if err := tbl.Refresh(ctx); err != nil {
		log.Fatal(err)
	}
	n, err := tbl.Count(ctx, "n >= 0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows:", n)
	// Output:
	// version 7: 5 fragments -> 1, 10 rows rewritten
	// rows: 10
}
