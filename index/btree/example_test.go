package btree_test

import (
	"context"
	"fmt"
	"log"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index/btree"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// Build a BTree over 10,000 values of fragment 1 in pages of 1,000, then search it: only
// the page whose bounds can hold the range is read. (engine.Table.CreateIndex builds and
// commits these; scans search them.)
func Example() {
	ctx := context.Background()
	st, err := store.Open(ctx, "mem://btree-example", store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	field := arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64}
	vb := array.NewInt64Builder(memory.DefaultAllocator)
	addrs := make([]uint64, 10_000)
	for i := range addrs {
		vb.Append(int64(i))
		addrs[i] = manifest.RowAddress(1, uint32(i))
	}
	values := vb.NewArray()
	vb.Release()
	defer values.Release()

	built, err := btree.Build(ctx, st, "t/_indices/example", field, []btree.Chunk{{Values: values, Addrs: addrs}},
		btree.BuildOptions{PageRows: 1000})
	if err != nil {
		log.Fatal(err)
	}
	r, err := btree.NewReader(st, built.Lookup, memory.DefaultAllocator)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	cond, err := filter.Parse("n BETWEEN 1500 AND 1504", arrow.NewSchema([]arrow.Field{field}, nil))
	if err != nil {
		log.Fatal(err)
	}
	hits, stats, err := r.Search(ctx, "n", cond)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d matches; pages read %d of %d\n", hits.GetCardinality(), stats.PagesRead, stats.Pages)
	fmt.Println("first row offset:", uint32(hits.Minimum()))
	// Output:
	// 5 matches; pages read 1 of 10
	// first row offset: 1500
}
