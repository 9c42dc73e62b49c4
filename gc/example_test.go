package gc_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/store"
)

// Three appends and a compaction leave five versions and three data files that only old
// versions reference. Keeping the last version, garbage collection expires the others
// (each leaves a small tombstone that keeps its transaction) and deletes the unreferenced
// files; the table reads the same.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gc-example-")
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
	if _, err := compaction.Compact(ctx, db, "events", compaction.Options{}); err != nil {
		log.Fatal(err)
	}

	// GracePeriod < 0: no grace, so files of writes in flight could go too (they would fail
	// with manifest.ErrTxnAborted, never lose data); only with no writer running.
	rep, err := gc.Run(ctx, st, db.Catalog(), "events", gc.Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil {
		log.Fatal(err)
	}
	t := rep.Tables[0]
	data := 0
	for _, f := range t.Deleted {
		if f.Class == gc.Garbage {
			data++
		}
	}
	fmt.Println("retained:", t.Retained, "expired:", t.Expired)
	fmt.Println("unreferenced files deleted:", data)

	if err := tbl.Refresh(ctx); err != nil {
		log.Fatal(err)
	}
	n, err := tbl.Count(ctx, "n >= 0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows:", n)
	// Output:
	// retained: [5] expired: [1 2 3 4]
	// unreferenced files deleted: 3
	// rows: 3
}
