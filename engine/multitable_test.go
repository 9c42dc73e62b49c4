package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

func twoTables(t *testing.T) *DB {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, "")
	for _, n := range []string{"a", "b"} {
		if _, err := db.CreateTable(ctx, n, kvSchema); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// groupAppend appends ids [from, to) to both tables in one multi-table transaction.
func groupAppend(ctx context.Context, db *DB, from, to int64) error {
	snap, err := db.Snapshot(ctx, "a", "b")
	if err != nil {
		return err
	}
	var writes []*Write
	for _, n := range []string{"a", "b"} {
		rec := kvBatch(from, to)
		rdr := recordReader(rec)
		w, err := snap.Tables[n].PrepareAppend(ctx, rdr)
		rdr.Release()
		rec.Release()
		if err != nil {
			return err
		}
		writes = append(writes, w)
	}
	_, err = db.Commit(ctx, writes...)
	return err
}

func TestMultiTableCommitIsAtomicForSnapshots(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var snaps atomic.Int64
	errs := make(chan error, 16)
	// Readers: every snapshot sees the same ids in both tables.
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				snap, err := db.Snapshot(ctx, "a", "b")
				if err != nil {
					errs <- err
					return
				}
				a, b := ids(t, snap.Tables["a"], ""), ids(t, snap.Tables["b"], "")
				slices.Sort(a)
				slices.Sort(b)
				if !slices.Equal(a, b) {
					errs <- fmt.Errorf("snapshot at revision %d saw half a transaction: a has %d rows, b has %d", snap.Revision, len(a), len(b))
					return
				}
				snaps.Add(1)
			}
		}()
	}
	// Writers: two goroutines of multi-table appends, racing each other.
	var wwg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := 0; i < 10; i++ {
				from := int64(w*1000 + i*10)
				if err := groupAppend(ctx, db, from, from+10); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wwg.Wait()
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	snap, err := db.Snapshot(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if got := len(ids(t, snap.Tables[n], "")); got != 200 {
			t.Fatalf("%s has %d rows, want 200", n, got)
		}
	}
	if snaps.Load() == 0 {
		t.Fatal("no snapshot was checked")
	}
}

// TestMultiTableConflictRejectsWhole: a multi-table transaction whose delete on b conflicts
// is rejected as a whole: its prepared append on a never becomes visible, not even through
// later versions of a.
func TestMultiTableConflictRejectsWhole(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	for _, n := range []string{"a", "b"} {
		tbl, _ := db.OpenTable(ctx, n)
		appendRange(t, tbl, 0, 10)
	}
	snap, err := db.Snapshot(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	// Someone deletes row 3 of b after our snapshot.
	b, _ := db.OpenTable(ctx, "b")
	if _, err := b.Delete(ctx, "id = 3"); err != nil {
		t.Fatal(err)
	}
	rec := kvBatch(100, 110)
	rdr := recordReader(rec)
	wa, err := snap.Tables["a"].PrepareAppend(ctx, rdr)
	rdr.Release()
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	wb, err := snap.Tables["b"].PrepareDelete(ctx, "id = 3")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Commit(ctx, wa, wb)
	if !errors.Is(err, manifest.ErrConflict) || OutcomeOf(err) != Rejected {
		t.Fatalf("commit: %v (outcome %v), want a rejected conflict", err, OutcomeOf(err))
	}
	// a's prepared version is in the store but counts as empty.
	a, _ := db.OpenTable(ctx, "a")
	if got := ids(t, a, "id >= 100"); len(got) != 0 {
		t.Fatalf("rejected rows visible: %v", got)
	}
	appendRange(t, a, 200, 201)
	if got := ids(t, a, "id >= 100"); fmt.Sprint(got) != "[200]" {
		t.Fatalf("after a later append: %v", got)
	}
	head, _ := manifest.Head(ctx, db.Store(), "a")
	if head != a.Version() || a.Version() != 4 {
		t.Fatalf("a: HEAD %d, handle v%d (the aborted version 3 is skipped, not reused)", head, a.Version())
	}
	vs, err := a.Versions(ctx)
	if err != nil || !vs[2].Aborted || vs[2].Published || vs[2].Group == "" || vs[3].Aborted || !vs[3].Published {
		t.Fatalf("versions: %+v %v", vs, err)
	}
}

// TestAbandonedGroupIsAbortedByWaiters: a writer that prepared a version and died leaves a
// pending group; another writer of the table waits for it, then aborts it after
// GroupTimeout and commits past it, and the dead writer's late commit is refused.
func TestAbandonedGroupIsAbortedByWaiters(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	db.opts.GroupTimeout = 200 * time.Millisecond
	a, _ := db.OpenTable(ctx, "a")
	id := manifest.NewTransactionID()
	release, err := db.cat.BeginGroup(ctx, id, groupTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	rec := kvBatch(0, 5)
	rdr := recordReader(rec)
	w, err := a.PrepareAppend(ctx, rdr)
	rdr.Release()
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	txn := w.txn
	txn.Op.Group = &manifest.GroupRef{ID: id, Tables: []string{"a", "b"}}
	prepared, _, err := manifest.Commit(ctx, db.store, "a", a.m, txn, manifest.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer meets the pending version, waits, aborts it and commits past it.
	other, _ := db.OpenTable(ctx, "a")
	start := time.Now()
	res := appendRange(t, other, 50, 51)
	if waited := time.Since(start); waited < db.opts.GroupTimeout {
		t.Fatalf("committed after %v without waiting for the pending group", waited)
	}
	if res.Version != prepared.Version+1 {
		t.Fatalf("committed v%d, want v%d", res.Version, prepared.Version+1)
	}
	if got := ids(t, other, ""); fmt.Sprint(got) != "[50]" {
		t.Fatalf("rows %v: the abandoned group's rows must not count", got)
	}
	st, err := db.cat.GroupState(ctx, id)
	if err != nil || st != catalog.GroupAborted {
		t.Fatalf("group state %v %v", st, err)
	}
	err = db.cat.CommitGroup(ctx, id, []catalog.Update{{Table: "a", Mode: catalog.FastForward,
		Pointer: catalog.Pointer{Version: prepared.Version, ManifestKey: prepared.Key(), Checksum: prepared.Checksum()}}})
	if !errors.Is(err, catalog.ErrGroupAborted) {
		t.Fatalf("late commit of the aborted group: %v", err)
	}
}

func recordReader(rec arrow.RecordBatch) array.RecordReader {
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		panic(err)
	}
	return rdr
}

// TestMultiTableCASOnReadVersion: a group's delete publishes by compare-and-swap on the
// version it read. A logical change published since (a delete of other rows, which the
// store-level commit would happily rebase over) rejects the group; a maintenance-class
// version published since does not.
func TestMultiTableCASOnReadVersion(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	for _, n := range []string{"a", "b"} {
		tbl, _ := db.OpenTable(ctx, n)
		appendRange(t, tbl, 0, 10)
	}
	// Logical change after the snapshot: rejected.
	snap, _ := db.Snapshot(ctx, "a", "b")
	b, _ := db.OpenTable(ctx, "b")
	if _, err := b.Delete(ctx, "id = 5"); err != nil {
		t.Fatal(err)
	}
	wa, _ := snap.Tables["a"].PrepareDelete(ctx, "id = 1")
	wb, _ := snap.Tables["b"].PrepareDelete(ctx, "id = 3")
	if _, err := db.Commit(ctx, wa, wb); !errors.Is(err, manifest.ErrRetryable) || OutcomeOf(err) != Rejected {
		t.Fatalf("after a logical change: %v", err)
	}
	if n, _ := mustOpen(t, db, "a").Count(ctx, ""); n != 10 {
		t.Fatalf("a has %d rows: the rejected group's delete took effect", n)
	}
	// Maintenance-class change after the snapshot: the group commits.
	snap, _ = db.Snapshot(ctx, "a", "b")
	b = mustOpen(t, db, "b")
	ix := manifest.NewTransaction(b.Version(), manifest.Operation{Kind: manifest.OpCreateIndex,
		NewIndexes: []manifest.Index{{Name: "id_idx", Kind: "btree", FieldIDs: []int32{0}}}})
	if _, err := b.commit(ctx, ix); err != nil {
		t.Fatal(err)
	}
	wa, _ = snap.Tables["a"].PrepareDelete(ctx, "id = 1")
	wb, _ = snap.Tables["b"].PrepareDelete(ctx, "id = 3")
	if _, err := db.Commit(ctx, wa, wb); err != nil {
		t.Fatalf("after a maintenance change: %v", err)
	}
	if got := ids(t, mustOpen(t, db, "b"), "id < 6"); fmt.Sprint(got) != "[0 1 2 4]" {
		t.Fatalf("b rows %v", got)
	}
}

func mustOpen(t *testing.T, db *DB, name string) *Table {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// TestTimeTravelToAbortedGroupVersion: a prepared version of an aborted multi-table group
// stays in the store but counts as empty, so OpenTableAt and Checkout read it as the
// version below it (under its own number, read-only), never the rejected transaction's
// rows; Pin holds the version whose files it reads; Versions lists it as aborted with that
// version's rows; once the version it reads as expired, it reads as expired.
func TestTimeTravelToAbortedGroupVersion(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	for _, n := range []string{"a", "b"} {
		appendRange(t, mustOpen(t, db, n), 0, 10) // v2
	}
	snap, err := db.Snapshot(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustOpen(t, db, "b").Delete(ctx, "id = 5"); err != nil { // b v3
		t.Fatal(err)
	}
	// Both deletes get a prepared version (a v3; b v4, rebased over the delete of 5), then
	// the group is rejected: b's read version is no longer published.
	wa, err := snap.Tables["a"].PrepareDelete(ctx, "id = 1")
	if err != nil {
		t.Fatal(err)
	}
	wb, err := snap.Tables["b"].PrepareDelete(ctx, "id = 3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(ctx, wa, wb); !errors.Is(err, manifest.ErrRetryable) || OutcomeOf(err) != Rejected {
		t.Fatalf("commit: %v, want a rejected retryable conflict", err)
	}
	for _, c := range []struct {
		table         string
		v, reads      uint64
		want, stored  string
		storedVersion uint64
	}{
		{"a", 3, 2, "[0 1 2 3 4 5 6 7 8 9]", "[0 2 3 4 5 6 7 8 9]", 3},
		{"b", 4, 3, "[0 1 2 3 4 6 7 8 9]", "[0 1 2 4 6 7 8 9]", 4},
	} {
		// What is stored is the rejected transaction's content.
		m, err := manifest.Load(ctx, db.Store(), c.table, c.storedVersion)
		if err != nil || m.Txn.Op.Group == nil {
			t.Fatalf("%s v%d: %v (want a group member)", c.table, c.v, err)
		}
		at, err := db.OpenTableAt(ctx, c.table, c.v)
		if err != nil {
			t.Fatal(err)
		}
		co, err := mustOpen(t, db, c.table).Checkout(ctx, c.v)
		if err != nil {
			t.Fatal(err)
		}
		for name, h := range map[string]*Table{"OpenTableAt": at, "Checkout": co} {
			if got := fmt.Sprint(ids(t, h, "")); got != c.want {
				t.Errorf("%s(%s, %d): rows %s, want %s (version %d's); the rejected rows are %s", name, c.table, c.v, got, c.want, c.reads, c.stored)
			}
			if h.Version() != c.v || h.ContentVersion() != c.reads || !h.readOnly {
				t.Errorf("%s(%s, %d): version %d, content version %d, read-only %v", name, c.table, c.v, h.Version(), h.ContentVersion(), h.readOnly)
			}
			if _, err := h.AppendRecord(ctx, kvBatch(0, 1)); err == nil {
				t.Errorf("%s(%s, %d): a write through a time-travel handle succeeded", name, c.table, c.v)
			}
		}
	}

	// A pin on b's aborted version holds the version whose files it reads (v3: its
	// deletion vector is not b v4's).
	at, _ := db.OpenTableAt(ctx, "b", 4)
	pin, err := at.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holds, err := db.cat.Holds(ctx, "b")
	if err != nil || len(holds) != 1 || holds[0].Version != 3 || pin.Version() != 3 {
		t.Fatalf("pin of b v4: pinned v%d, holds %+v %v (want v3)", pin.Version(), holds, err)
	}
	if err := pin.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Later versions build past it; Versions reports it aborted, with v3's rows.
	b := mustOpen(t, db, "b")
	appendRange(t, b, 20, 21) // b v5
	if got := fmt.Sprint(ids(t, mustOpenAt(t, db, "b", 5), "")); got != "[0 1 2 3 4 6 7 8 9 20]" {
		t.Fatalf("b v5: %s", got)
	}
	vs, err := b.Versions(ctx)
	if err != nil || len(vs) != 5 {
		t.Fatalf("versions %+v %v", vs, err)
	}
	if v := vs[3]; !v.Aborted || v.Published || v.ContentVersion != 3 || v.Rows != 9 || vs[4].ContentVersion != 5 || vs[4].Aborted {
		t.Fatalf("versions: %+v", vs)
	}

	// Once the version it reads as is expired, the aborted version reads as expired, and
	// Versions says it reads as nothing.
	m3, err := manifest.Load(ctx, db.Store(), "b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.Expire(ctx, db.Store(), m3); err != nil {
		t.Fatal(err)
	}
	if _, err := db.OpenTableAt(ctx, "b", 4); !errors.Is(err, manifest.ErrVersionExpired) {
		t.Fatalf("b v4 over an expired v3: %v", err)
	}
	if vs, err := b.Versions(ctx); err != nil || len(vs) != 4 || vs[2].Version != 4 || vs[2].ContentVersion != 0 || !vs[2].Aborted {
		t.Fatalf("versions after v3 expired: %+v %v", vs, err)
	}
}

func mustOpenAt(t *testing.T, db *DB, name string, v uint64) *Table {
	t.Helper()
	tbl, err := db.OpenTableAt(context.Background(), name, v)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}
