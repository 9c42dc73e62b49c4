package recovery

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// childEnv set makes the re-executed test binary run one compaction (child) and exit.
const childEnv = "SHALE_RECOVERY_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	enginetest.Main(m)
}

// child compacts TABLE in the store enginetest.ChildEnv names, with sidecars on (SHALE_FAILPOINTS,
// read by internal/failpoint at start-up, decides where it dies), or with
// CHILD_MODE=recover runs Recover on TABLE instead, or with CHILD_MODE=write appends one
// row (id 999999) to TABLE through recovery.Hook.
func child() error {
	ctx := context.Background()
	db, closeDB, err := enginetest.OpenChildDB(ctx, engine.Options{BeforeFirstWrite: Hook(Options{})})
	if err != nil {
		return err
	}
	defer closeDB()
	s := db.Store()
	if os.Getenv("CHILD_MODE") == "write" {
		// One appended row through the roll-forward hook.
		tbl, err := db.OpenTable(ctx, os.Getenv("TABLE"))
		if err != nil {
			return err
		}
		rec := oneRow(999999)
		defer rec.Release()
		_, err = tbl.AppendRecord(ctx, rec)
		return err
	}
	if os.Getenv("CHILD_MODE") == "recover" {
		// Recover (SHALE_FAILPOINTS decides where it dies).
		_, err := Recover(ctx, s, db.Catalog(), os.Getenv("TABLE"), Options{MinAge: -1})
		return err
	}
	st, err := Enable(compaction.New(db)).Run(ctx, os.Getenv("TABLE"), compaction.Options{TargetRows: 1000})
	if err != nil {
		return err
	}
	if st.Version == 0 {
		return fmt.Errorf("nothing compacted")
	}
	return nil
}

// openDB opens a DB on s with the shared etcd as its catalog.
func openDB(t testing.TB, s store.Store) *engine.DB {
	return enginetest.OpenDB(t, s, engine.Options{})
}

// makeTable creates name with n appends of rows rows each (id int64, s string): n small
// fragments.
func makeTable(t testing.TB, db *engine.DB, name string, n, rows int) {
	t.Helper()
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	tbl, err := db.CreateTable(ctx, name, schema)
	if err != nil {
		t.Fatal(err)
	}
	id := int64(0)
	for range n {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for range rows {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row-%d", id))
			id++
		}
		rec := b.NewRecordBatch()
		b.Release()
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rowsOf scans table name at its published version, one string per row.
func rowsOf(t testing.TB, db *engine.DB, name string) []string {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return enginetest.Rows(t, tbl)
}

// expireHolds revokes the leases of table's catalog holds, as their expiry one TTL after
// a killed holder's last keep-alive would (TestDeadHolderSkippedUntilLeaseExpires waits
// for the real expiry once; the other tests do not spend 15 s each).
func expireHolds(t testing.TB, db *engine.DB, table string) { enginetest.ExpireHolds(t, db, table) }

// crashedCompaction builds table t (6 fragments of 50 rows) in a fresh local store,
// kills a compacting child at seam, expires the dead child's hold, and returns the DB
// and the one sidecar it left.
func crashedCompaction(t *testing.T, seam string) (store.Store, *engine.DB, Sidecar) {
	t.Helper()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 6, 50)
	if !runChild(t, s, "t", seam) {
		t.Fatalf("compaction was not killed at %s", seam)
	}
	expireHolds(t, db, "t")
	return s, db, pendingOne(t, s, "t").Sidecar
}
