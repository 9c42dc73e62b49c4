package repair_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/repair"
	"github.com/shale-db/shale/store"
)

// A writer committed a version but never published it (here: a DB opened without etcd;
// in life, a process that died between its commit and its publish). Inspect classifies
// the drift; publishing logical drift needs Force as well as Confirm.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "repair-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "file://"+dir+"/store", store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	etcd, err := coord.Connect(ctx, coord.Config{InProcess: true, StateDir: dir + "/state"})
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	db, err := engine.Open(ctx, st, engine.Options{Etcd: etcd.Etcd()})
	if err != nil {
		log.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := db.CreateTable(ctx, "events", schema); err != nil {
		log.Fatal(err)
	}

	unpublishing, err := engine.Open(ctx, st, engine.Options{}) // no catalog: commits only
	if err != nil {
		log.Fatal(err)
	}
	tbl, err := unpublishing.OpenTable(ctx, "events")
	if err != nil {
		log.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).Append(1)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		log.Fatal(err)
	}

	plan, err := repair.Inspect(ctx, st, db.Catalog(), "events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("published %d, HEAD %d: %s (%s)\n", plan.Published, plan.Head, plan.Decision, plan.Versions[0].Class)

	_, err = repair.Repair(ctx, st, db.Catalog(), "events", repair.Options{Confirm: true})
	fmt.Println("without Force:", errors.Is(err, repair.ErrLogicalDrift))
	res, err := repair.Repair(ctx, st, db.Catalog(), "events", repair.Options{Confirm: true, Force: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("repaired:", res.Repaired, "published now:", res.PublishedNow)
	// Output:
	// published 1, HEAD 2: needs-force (logical)
	// without Force: true
	// repaired: true published now: 2
}
