package engine_test

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
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// Open a DB on a store and an etcd, create a table, append a record batch, branch on the
// write's outcome, scan with a filter, delete, and read an older version back.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "engine-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "file://"+dir+"/store", store.Options{}) // or s3://…, gs://…
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	etcd, err := coord.Connect(ctx, coord.Config{InProcess: true, StateDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()

	db, err := engine.Open(ctx, st, engine.Options{Etcd: etcd.Etcd()})
	if err != nil {
		log.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "city", Type: arrow.BinaryTypes.String},
		{Name: "temp", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	tbl, err := db.CreateTable(ctx, "weather", schema)
	if err != nil {
		log.Fatal(err) // errors.Is(err, engine.ErrTableExists) if it exists
	}

	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"Oslo", "Lima", "Pune"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{4, 19, 31}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()

	res, err := tbl.AppendRecord(ctx, rec, engine.WithIdempotencyKey("readings-1"))
	switch engine.OutcomeOf(err) {
	case engine.Committed:
		fmt.Printf("appended %d rows as version %d\n", res.Rows, res.Version)
	case engine.Unknown: // may have landed: the same transaction commits at most once
		var ue *engine.UnknownError
		if errors.As(err, &ue) {
			res, err = tbl.Retry(ctx, ue.Txn)
		}
		if err != nil {
			log.Fatal(err)
		}
	case engine.Rejected: // nothing took effect
		log.Fatal(err)
	}

	sc, err := tbl.Scan(ctx, engine.ScanOptions{Columns: []string{"city"}, Filter: "temp > 10"})
	if err != nil {
		log.Fatal(err)
	}
	for sc.Next() {
		fmt.Println("warm:", sc.RecordBatch().Column(0))
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	sc.Release()

	res, err = tbl.Delete(ctx, "city = 'Oslo'")
	if err != nil {
		log.Fatal(err)
	}
	n, err := tbl.Count(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("deleted %d row as version %d; %d rows left\n", res.Rows, res.Version, n)

	old, err := tbl.Checkout(ctx, 2) // time travel: a read-only handle
	if err != nil {
		log.Fatal(err)
	}
	n, err = old.Count(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("version 2 still has %d rows\n", n)

	_, err = db.OpenTable(ctx, "nosuch")
	fmt.Println("missing table:", errors.Is(err, manifest.ErrTableNotFound))
	// Output:
	// appended 3 rows as version 2
	// warm: ["Lima" "Pune"]
	// deleted 1 row as version 3; 2 rows left
	// version 2 still has 3 rows
	// missing table: true
}

// Write two tables as one transaction: readers of a Snapshot see both writes or neither.
func ExampleDB_Commit() {
	ctx := context.Background()
	db, done := exampleDB(ctx)
	defer done()

	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, name := range []string{"orders", "invoices"} {
		if _, err := db.CreateTable(ctx, name, schema); err != nil {
			log.Fatal(err)
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{7}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()

	snap, err := db.Snapshot(ctx, "orders", "invoices")
	if err != nil {
		log.Fatal(err)
	}
	var writes []*engine.Write
	for _, name := range []string{"orders", "invoices"} {
		rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		if err != nil {
			log.Fatal(err)
		}
		w, err := snap.Tables[name].PrepareAppend(ctx, rdr)
		if err != nil {
			log.Fatal(err)
		}
		writes = append(writes, w)
	}
	results, err := db.Commit(ctx, writes...)
	if err != nil {
		// Rejected (the group aborted: neither table changed), or an *engine.UnknownError.
		log.Fatal(engine.OutcomeOf(err), err)
	}
	for i, r := range results {
		fmt.Printf("%s: version %d\n", []string{"orders", "invoices"}[i], r.Version)
	}
	// Output:
	// orders: version 2
	// invoices: version 2
}

// OutcomeOf sorts a write's error into Committed, Rejected and Unknown. Only Unknown may
// have landed; only Unknown is retried (Table.Retry with the same transaction).
func ExampleOutcomeOf() {
	conflict := &manifest.ConflictError{Table: "t", Resolution: manifest.Retryable}
	unknown := &engine.UnknownError{Table: "t", Txn: manifest.NewTransaction(4, manifest.Operation{Kind: manifest.OpAppend})}
	for _, err := range []error{
		nil,
		fmt.Errorf("append: %w", conflict),
		fmt.Errorf("append: %w", manifest.ErrTxnAborted), // fenced by gc or recovery
		fmt.Errorf("append: %w", unknown),
	} {
		fmt.Println(engine.OutcomeOf(err))
	}
	// Output:
	// committed
	// rejected
	// rejected
	// unknown
}

// exampleDB opens a DB on a fresh local store with an etcd in this process, and returns a
// function that closes them.
func exampleDB(ctx context.Context) (*engine.DB, func()) {
	dir, err := os.MkdirTemp("", "engine-example-")
	if err != nil {
		log.Fatal(err)
	}
	st, err := store.Open(ctx, "file://"+dir+"/store", store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	etcd, err := coord.Connect(ctx, coord.Config{InProcess: true, StateDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	db, err := engine.Open(ctx, st, engine.Options{Etcd: etcd.Etcd()})
	if err != nil {
		log.Fatal(err)
	}
	return db, func() {
		etcd.Close()
		st.Close()
		os.RemoveAll(dir)
	}
}
