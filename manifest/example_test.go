package manifest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// Read a table's versions straight from its store: what each version's transaction did,
// its fragments, and the data files and column statistics a scan prunes by. The engine
// here runs without etcd, so HEAD is the latest version.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "manifest-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "file://"+dir, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	db, err := engine.Open(ctx, st, engine.Options{Write: engine.WriteOptions{Compression: engine.CompressionLZ4}})
	if err != nil {
		log.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	tbl, err := db.CreateTable(ctx, "numbers", schema)
	if err != nil {
		log.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{3, 1, 4, 1, 5}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		log.Fatal(err)
	}

	versions, err := manifest.Versions(ctx, st, "numbers")
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range versions {
		m, err := manifest.Load(ctx, st, "numbers", v)
		if err != nil {
			log.Fatal(err) // errors.Is(err, manifest.ErrVersionExpired), manifest.ErrCorrupt, …
		}
		fmt.Printf("version %d: %s, %d fragments, %d live rows\n", m.Version, m.Txn.Op.Kind, len(m.Fragments), m.LiveRows())
	}

	head, err := manifest.LoadHead(ctx, st, "numbers")
	if err != nil {
		log.Fatal(err)
	}
	var df manifest.DataFile = head.Fragments[0].Files[0]
	s := df.Stats[0]
	fmt.Printf("data file: %d rows, %s, n in [%d, %d], %d nulls\n", df.Rows, df.Compression, s.Min.Int, s.Max.Int, s.NullCount)

	_, err = manifest.Load(ctx, st, "numbers", 9)
	fmt.Println("version 9:", errors.Is(err, manifest.ErrVersionNotFound))
	// Output:
	// version 1: create, 0 fragments, 0 live rows
	// version 2: append, 1 fragments, 5 live rows
	// data file: 5 rows, lz4, n in [1, 5], 0 nulls
	// version 9: true
}

// Check is the conflict rule between two transactions: ours, planned on an older version,
// against theirs, committed since. An append commutes with a delete; a delete of rows an
// overwrite replaced cannot commit.
func ExampleCheck() {
	del := manifest.NewTransaction(4, manifest.Operation{Kind: manifest.OpDelete, Removed: []uint32{2}})
	app := manifest.NewTransaction(4, manifest.Operation{Kind: manifest.OpAppend})
	over := manifest.NewTransaction(4, manifest.Operation{Kind: manifest.OpOverwrite})

	r, _, _ := manifest.Check(&app, &del)
	fmt.Println("append after a delete:", r)
	r, _, reason := manifest.Check(&del, &over)
	fmt.Println("delete after an overwrite:", r, "-", reason != "")
	// Output:
	// append after a delete: compatible
	// delete after an overwrite: incompatible - true
}
