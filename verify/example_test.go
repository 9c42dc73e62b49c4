package verify_test

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
	"github.com/shale-db/shale/verify"
)

// Verify reads every object the published version references and checks it; a data file
// whose bytes changed under the table is a fault naming its key. (Without etcd here: the
// catalog argument is nil, so there is no pointer to check.)
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "verify-example-")
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
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		log.Fatal(err)
	}

	rep, err := verify.All(ctx, st, nil, verify.Options{})
	if err != nil {
		log.Fatal(err) // the store could not be listed: nothing was checked
	}
	fmt.Println("ok:", rep.OK(), "data files read:", rep.Tables[0].DataFiles)

	// Damage the data file: same size, different bytes.
	if err := tbl.Refresh(ctx); err != nil {
		log.Fatal(err)
	}
	key := tbl.Manifest().Fragments[0].Files[0].Key
	data, err := st.Get(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := st.Put(ctx, key, data); err != nil {
		log.Fatal(err)
	}

	rep, err = verify.All(ctx, st, nil, verify.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ok:", rep.OK(), "faults:", len(rep.Faults), errors.Is(rep.Err(), verify.ErrFaults))
	f := rep.Faults[0]
	fmt.Println("fault names the file:", f.Key == key, "corrupt:", errors.Is(f.Err, manifest.ErrCorrupt))
	// Output:
	// ok: true data files read: 1
	// ok: false faults: 1 true
	// fault names the file: true corrupt: true
}
