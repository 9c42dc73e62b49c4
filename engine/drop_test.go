package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// plannedAppend writes the data files of an append of ids [from, to) planned on tbl's
// version, without committing it: Table.Retry(txn) commits it later, as a writer that
// was slow between planning and its commit point would.
func plannedAppend(t *testing.T, tbl *Table, from, to int64) manifest.Transaction {
	t.Helper()
	rec := kvBatch(from, to)
	defer rec.Release()
	w, err := tbl.PrepareAppend(context.Background(), recordReader(rec))
	if err != nil {
		t.Fatal(err)
	}
	w.Release()
	return w.txn
}

// droppedTable creates table name with ids 0..9 (v1, v2) and returns the handle.
func droppedTable(t *testing.T, db *DB, name string) *Table {
	t.Helper()
	tbl, err := db.CreateTable(context.Background(), name, kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	return tbl
}

// checkNoneOf fails if any version of the live table name, or its published version,
// holds an id in [from, to), or if a version of it was committed by txn.
func checkNoneOf(t *testing.T, db *DB, name string, txn manifest.Transaction, from, to int64) {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.OpenTable(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tbl.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Transaction == txn.ID {
			t.Fatalf("version %d of the re-created table is the old writer's transaction", v.Version)
		}
		old, err := tbl.Checkout(ctx, v.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, old, fmt.Sprintf("id >= %d AND id < %d", from, to)); len(got) > 0 {
			t.Fatalf("version %d of the re-created table holds the old writer's rows %v", v.Version, got)
		}
	}
}

// TestDropFencesWriterPlannedBefore (issue 8 item 10, cases a and b): an append planned
// before a drop and committed after it fails with ErrTableDropped (Rejected), whether the
// table was created again meanwhile or not; the re-created table has none of its rows at
// any version and its HEAD and pointer did not move. Before drop markers, the append
// found its version number free (the drop deleted it, and a re-created table restarted
// at version 1) and moved the new table's pointer to it.
func TestDropFencesWriterPlannedBefore(t *testing.T) {
	for _, recreate := range []bool{true, false} {
		t.Run(fmt.Sprintf("recreate=%v", recreate), func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t, "")
			tbl := droppedTable(t, db, "d")
			txn := plannedAppend(t, tbl, 100, 110)
			if _, err := db.DropTable(ctx, "d"); err != nil {
				t.Fatal(err)
			}
			var again *Table
			if recreate {
				var err error
				if again, err = db.CreateTable(ctx, "d", kvSchema); err != nil {
					t.Fatal(err)
				}
				appendRange(t, again, 50, 55)
			}
			res, err := tbl.Retry(ctx, txn)
			if !errors.Is(err, ErrTableDropped) || OutcomeOf(err) != Rejected {
				t.Fatalf("append planned before the drop: %+v %v, want ErrTableDropped (rejected)", res, err)
			}
			if !recreate {
				if _, err := db.OpenTable(ctx, "d"); !errors.Is(err, manifest.ErrTableNotFound) {
					t.Fatalf("open after the drop: %v", err)
				}
				if _, _, err := db.Catalog().Get(ctx, "d"); !errors.Is(err, catalog.ErrNoPointer) {
					t.Fatalf("the write brought a pointer back: %v", err)
				}
				return
			}
			checkNoneOf(t, db, "d", txn, 100, 110)
			head, err := manifest.Head(ctx, db.Store(), "d")
			if err != nil || head != again.Version() {
				t.Fatalf("HEAD %d (%v), the re-created table is at %d", head, err, again.Version())
			}
			if p, _, err := db.Catalog().Get(ctx, "d"); err != nil || p.Version != again.Version() || p.Incarnation != again.Manifest().Incarnation {
				t.Fatalf("pointer %+v %v, want version %d of the new incarnation", p, err, again.Version())
			}
		})
	}
}

// TestWriterLandingBelowDropMarkerIsRejected (issue 8 item 10, case c): a writer whose
// version number the drop's deletes freed puts its version below the drop marker. It
// must get ErrTableDropped at publish (the pointer belongs to the new incarnation, or is
// gone), never Committed, and the version is not one of the re-created table's.
func TestWriterLandingBelowDropMarkerIsRejected(t *testing.T) {
	for _, recreate := range []bool{true, false} {
		t.Run(fmt.Sprintf("recreate=%v", recreate), func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t, "")
			tbl := droppedTable(t, db, "h") // v2
			txn := plannedAppend(t, tbl, 100, 110)
			other := mustOpen(t, db, "h")
			appendRange(t, other, 10, 20) // v3: the number our writer will retry at
			if _, err := db.DropTable(ctx, "h"); err != nil {
				t.Fatal(err)
			}
			if recreate {
				if _, err := db.CreateTable(ctx, "h", kvSchema); err != nil {
					t.Fatal(err)
				}
			}
			res, err := tbl.Retry(ctx, txn)
			if !errors.Is(err, ErrTableDropped) || OutcomeOf(err) != Rejected {
				t.Fatalf("append into a freed version number: %+v %v, want ErrTableDropped (rejected)", res, err)
			}
			// It did land below the marker (what this test is about).
			if m, err := manifest.Load(ctx, db.Store(), "h", 3); err != nil || m.Txn.ID != txn.ID {
				t.Fatalf("version 3: %v %v, want the writer's version in the hole", m, err)
			}
			if !recreate {
				if _, _, err := db.Catalog().Get(ctx, "h"); !errors.Is(err, catalog.ErrNoPointer) {
					t.Fatalf("the write brought a pointer back: %v", err)
				}
				if ts, _ := db.Tables(ctx); slices.Contains(ts, "h") {
					t.Fatal("the dropped table is listed again")
				}
				return
			}
			checkNoneOf(t, db, "h", txn, 100, 110)
			if _, err := db.OpenTableAt(ctx, "h", 3); !errors.Is(err, manifest.ErrVersionNotFound) {
				t.Fatalf("the version below the marker through OpenTableAt: %v", err)
			}
		})
	}
}

// TestDropIsIdempotentAndFinishesAHalfDrop: a drop that died after committing its
// marker (pointer and objects left) leaves a dropped table: not listed, not opened, and
// Status reports the pointer left behind. Dropping again finishes it; once nothing is
// left it reports the table not found. Deletes, updates and schema changes through a
// handle of the dropped table fail with ErrTableDropped.
func TestDropIsIdempotentAndFinishesAHalfDrop(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl := droppedTable(t, db, "half")
	appendRange(t, tbl, 10, 20) // v3
	txn := manifest.NewTransaction(3, manifest.Operation{Kind: manifest.OpDrop})
	marker, _, err := manifest.Commit(ctx, db.Store(), "half", tbl.Manifest(), txn, manifest.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ts, _ := db.Tables(ctx); slices.Contains(ts, "half") {
		t.Fatal("a table whose HEAD is a drop marker is listed")
	}
	if _, err := db.Status(ctx); !errors.Is(err, ErrTableDropped) {
		t.Fatalf("status with the pointer of a dropped table left: %v", err)
	}
	if _, err := tbl.Delete(ctx, "id < 5"); !errors.Is(err, ErrTableDropped) {
		t.Fatalf("delete through a handle of the dropped table: %v", err)
	}
	if _, err := tbl.Update(ctx, map[string]string{"name": "'x'"}, "id < 5"); !errors.Is(err, ErrTableDropped) {
		t.Fatalf("update through a handle of the dropped table: %v", err)
	}
	n, err := db.DropTable(ctx, "half")
	if err != nil || n == 0 {
		t.Fatalf("finishing the drop: %d %v", n, err)
	}
	if _, _, err := db.Catalog().Get(ctx, "half"); !errors.Is(err, catalog.ErrNoPointer) {
		t.Fatalf("pointer after finishing: %v", err)
	}
	objs, err := db.Store().List(ctx, "half/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Key != marker.Key() && o.Key != marker.TxnKey {
			t.Fatalf("left after finishing the drop: %s", o.Key)
		}
	}
	if _, err := db.Status(ctx); err != nil {
		t.Fatalf("status after finishing: %v", err)
	}
	if _, err := db.DropTable(ctx, "half"); !errors.Is(err, manifest.ErrTableNotFound) || !errors.Is(err, ErrTableDropped) {
		t.Fatalf("dropping a dropped table with nothing left: %v", err)
	}
	if _, err := db.OpenTable(ctx, "half"); !errors.Is(err, manifest.ErrTableNotFound) {
		t.Fatalf("open: %v", err)
	}
	again, err := db.CreateTable(ctx, "half", kvSchema)
	if err != nil || again.Version() != marker.Version+1 {
		t.Fatalf("create again: %v", err)
	}
}

// TestCreateReplacesPointerOfDroppedIncarnation: a drop that died before removing the
// pointer leaves it; creating the table again publishes over it, and the old drop
// finishing late (removing "its" pointer) leaves the new incarnation's pointer alone.
func TestCreateReplacesPointerOfDroppedIncarnation(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl := droppedTable(t, db, "stale")
	txn := manifest.NewTransaction(2, manifest.Operation{Kind: manifest.OpDrop})
	marker, _, err := manifest.Commit(ctx, db.Store(), "stale", tbl.Manifest(), txn, manifest.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := db.CreateTable(ctx, "stale", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, again, 7, 9)
	if ok, err := db.Catalog().DeleteDropped(ctx, "stale", PointerOf(marker, marker.Checksum())); err != nil || ok {
		t.Fatalf("the old drop's pointer removal took the new table's pointer: %v %v", ok, err)
	}
	got := mustOpen(t, db, "stale")
	if fmt.Sprint(ids(t, got, "")) != "[7 8]" || got.Version() != again.Version() {
		t.Fatalf("re-created table at v%d: %v", got.Version(), ids(t, got, ""))
	}
	if vs, err := got.Versions(ctx); err != nil || len(vs) != 2 || vs[0].Version != marker.Version+1 {
		t.Fatalf("versions of the re-created table: %+v %v", vs, err)
	}
}

// TestGroupCommitToDroppedTableIsRejected: a multi-table write prepared before one of its
// tables was dropped and created again is rejected with ErrTableDropped, and neither
// table gets its rows.
func TestGroupCommitToDroppedTableIsRejected(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	a, b := mustOpen(t, db, "a"), mustOpen(t, db, "b")
	ra, rb := kvBatch(100, 103), kvBatch(100, 103)
	defer ra.Release()
	defer rb.Release()
	wa, err := a.PrepareAppend(ctx, recordReader(ra))
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.PrepareAppend(ctx, recordReader(rb))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTable(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateTable(ctx, "b", kvSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(ctx, wa, wb); !errors.Is(err, ErrTableDropped) || OutcomeOf(err) != Rejected {
		t.Fatalf("group over a dropped table: %v, want ErrTableDropped (rejected)", err)
	}
	for _, n := range []string{"a", "b"} {
		if got := ids(t, mustOpen(t, db, n), "id >= 100"); len(got) > 0 {
			t.Fatalf("table %s holds the rejected group's rows %v", n, got)
		}
	}
}
