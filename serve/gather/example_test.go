package gather_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/serve/gather"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/store"
)

// A table written by many small appends, gathered into the planner's picture, which the
// planner scores as compaction work.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gather-example-")
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
	for i := range 20 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		rec := b.NewRecordBatch()
		b.Release()
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			log.Fatal(err)
		}
	}

	states, stats, err := gather.Tables(ctx, db, gather.Options{})
	if err != nil {
		log.Fatal(err)
	}
	s := states[0]
	fmt.Printf("%s: %d fragments, %d small; %d table gathered\n", s.Table, s.Fragments, s.SmallFragments, stats.Tables)
	if u, ok := plan.Score(s, plan.DefaultPolicy(), plan.KindCompact, time.Now()); ok {
		fmt.Printf("compact: score %.2f, class %d (%s)\n", u.Score, u.Class, u.Reason)
	}
	// Output:
	// events: 20 fragments, 20 small; 1 table gathered
	// compact: score 1.25, class 4 (score_at_or_above_1)
}
