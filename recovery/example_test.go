package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// A compaction that stores a recovery sidecar first (Enable) fails after writing its data
// files, before its commit, as if its process had died there. Recover finds the sidecar,
// sees that none of the operation's transactions landed, fences them with an abort
// version and deletes their files. A DB opened with Hook as BeforeFirstWrite rolls
// forward, before its first write to a table, any such operation that did land.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "recovery-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "file://"+dir, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	db, err := engine.Open(ctx, st, engine.Options{BeforeFirstWrite: recovery.Hook(recovery.Options{})})
	if err != nil {
		log.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	tbl, err := db.CreateTable(ctx, "events", schema)
	if err != nil {
		log.Fatal(err)
	}
	for i := range int64(3) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.Int64Builder).Append(i)
		rec := b.NewRecordBatch()
		b.Release()
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			log.Fatal(err)
		}
	}

	crash := errors.New("process died")
	ex := recovery.Enable(compaction.New(db))
	ex.Hooks.BeforeCommit = func(context.Context, *compaction.Plan) error { return crash }
	_, err = ex.Run(ctx, "events", compaction.Options{})
	fmt.Println("compaction failed:", errors.Is(err, crash))
	pending, err := recovery.Pending(ctx, st, "events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sidecars left:", len(pending))

	// MinAge < 0 resolves young sidecars too: only when no compaction can be running.
	rep, err := recovery.Recover(ctx, st, nil, "events", recovery.Options{MinAge: -1})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range rep.Outcomes {
		fmt.Printf("%s: %s, fenced by version %d, files deleted: %v\n", o.Table, o.Action, o.Fence, len(o.DeletedFiles) > 0)
	}
	// Output:
	// compaction failed: true
	// sidecars left: 1
	// events: rolled-back, fenced by version 5, files deleted: true
}
