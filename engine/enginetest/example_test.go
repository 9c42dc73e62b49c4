package enginetest_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/store"
)

// A test package built on the engine starts one embedded etcd for all its tests from
// TestMain, and each test opens a DB on its own store with that etcd as catalog:
//
//	func TestMain(m *testing.M) { enginetest.Main(m) }
//
// (Not run: Main and OpenDB need a test binary's *testing.M and *testing.T.)
func Example() {
	testCreate := func(t *testing.T) {
		ctx := context.Background()
		st, err := store.Open(ctx, "mem://"+t.Name(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		db := enginetest.OpenDB(t, st, engine.Options{}) // the etcd client closes with the test
		schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
		tbl, err := db.CreateTable(ctx, "t", schema)
		if err != nil {
			t.Fatal(err)
		}
		if rows := enginetest.Rows(t, tbl); len(rows) != 0 {
			t.Fatalf("new table has rows %v", rows)
		}
	}
	_ = testCreate
}
