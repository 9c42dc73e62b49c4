package wal_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// A writer claims shard "0" of table "events", appends a batch (Append returns once the
// entry holding it is durable), flushes it as generation 1, and another writer then claims
// the shard: the first is fenced, and every row it acknowledged is the second's to keep.
// Programs normally reach a shard through engine.Table.WAL, which fills Options from the
// table and makes scans read the WAL.
func Example() {
	ctx := context.Background()
	s, err := store.Open(ctx, "mem://wal-example", store.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	opts := wal.Options{Schema: schema, FieldIDs: []int32{1}}

	w1, err := wal.Open(ctx, s, "events", "0", opts)
	if err != nil {
		panic(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2, 3}, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 3)
	ack, err := w1.Append(ctx, rec)
	if err != nil {
		panic(err)
	}
	fmt.Println("durable at", ack.Position)
	if err := w1.Flush(ctx); err != nil {
		panic(err)
	}

	w2, err := wal.Open(ctx, s, "events", "0", opts)
	if err != nil {
		panic(err)
	}
	defer w2.Close(ctx)
	_, err = w1.Append(ctx, rec)
	fmt.Println("first writer:", err)
	m, err := wal.LoadShard(ctx, s, "events", "0")
	if err != nil {
		panic(err)
	}
	fmt.Printf("epoch %d, generations sealed %d\n", m.Epoch, m.Sealed())
	// Output:
	// durable at 1/1
	// first writer: table "events" WAL shard 0: writer epoch 1 fenced by epoch 2
	// epoch 2, generations sealed 1
}
