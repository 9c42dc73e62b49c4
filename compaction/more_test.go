package compaction

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// TestMaterializeDeletions: a large fragment whose deleted ratio exceeds the threshold is
// rewritten alone, without its deleted rows; its large neighbours are left as they are.
func TestMaterializeDeletions(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(3, 1000)
	db := openDB(t, storetest.Mem(t))
	tbl := appendEach(t, db, "t", schema, batches)
	if _, err := tbl.Delete(ctx, "id >= 1000 AND id < 1200 OR id = 5"); err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, tbl)
	old := tbl.Manifest().Fragments
	st, err := Compact(ctx, db, "t", Options{TargetRows: 500})
	if err != nil {
		t.Fatal(err)
	}
	if st.Groups != 1 || st.FragmentsRemoved != 1 || st.RowsRewritten != 800 || st.RowsDropped != 200 {
		t.Fatalf("stats %+v, want the middle fragment rewritten alone", st)
	}
	now, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	fs := now.Manifest().Fragments
	if len(fs) != 4 || fs[0].ID != old[0].ID || fs[0].Deletion == nil || fs[3].ID != old[2].ID {
		t.Fatalf("fragments %+v; want the first (with its one deleted row) and last kept in place", fs)
	}
	if fs[1].Deletion != nil || fs[1].PhysicalRows+fs[2].PhysicalRows != 800 || fs[1].PhysicalRows != 500 {
		t.Fatalf("rewritten fragments %+v, want 800 rows split at the 500-row target", fs[1:3])
	}
	equalRows(t, "after materializing deletions", rowsOf(t, now), want)
}

// TestIndexCoverage: an index committed over some of the fragments being rewritten while
// the rewrite writes does not stop the rewrite: it commits on top (building its version
// drops the rewritten fragments from every index's coverage), and the rows are unchanged.
func TestIndexCoverage(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(6, 50)
	db := openDB(t, storetest.Mem(t))
	appendEach(t, db, "t", schema, batches)
	ex := New(db)
	var ids []uint32
	attempts := 0
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *Plan) error {
		attempts++
		if attempts > 1 {
			return nil
		}
		head, err := ex.Head(ctx, "t")
		if err != nil {
			return err
		}
		for _, f := range head.Fragments[:3] {
			ids = append(ids, f.ID)
		}
		ix := manifest.Index{Name: "ix", UUID: "u1", Kind: "zonemap", FieldIDs: []int32{0}, Fragments: ids, Version: head.Version}
		_, _, err = manifest.Commit(ctx, db.Store(), "t", head,
			manifest.NewTransaction(head.Version, manifest.Operation{Kind: manifest.OpCreateIndex, NewIndexes: []manifest.Index{ix}}), manifest.CommitOptions{})
		return err
	}
	st, err := ex.Run(ctx, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Attempts != 1 || len(st.Rebased) != 1 {
		t.Fatalf("stats %+v; want one attempt rebased over the index", st)
	}
	m, err := ex.Head(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Indexes) != 1 || len(m.Indexes[0].Fragments) != 0 {
		t.Fatalf("indexes %+v, want ix covering none of the rewritten fragments %v", m.Indexes, ids)
	}
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if rows := rowsOf(t, tbl); len(rows) != 300 || rows[299] != "299|row-299" {
		t.Fatalf("%d rows after compaction", len(rows))
	}
}

// TestCompactWhileAppending: appends from another goroutine running while the compaction
// plans, writes and commits are all kept, in commit order after the compacted rows.
func TestCompactWhileAppending(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(60, 100)
	db := openDB(t, storetest.Mem(t))
	appendEach(t, db, "t", schema, batches[:30])
	var (
		wg        sync.WaitGroup
		appendErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		w, err := db.OpenTable(ctx, "t")
		if err != nil {
			appendErr = err
			return
		}
		for _, b := range batches[30:] {
			if _, err := w.AppendRecord(ctx, b); err != nil {
				appendErr = err
				return
			}
		}
	}()
	st, err := Compact(ctx, db, "t", Options{})
	wg.Wait()
	if err != nil || appendErr != nil {
		t.Fatalf("compaction: %v; appends: %v", err, appendErr)
	}
	if st.Version == 0 || st.RowsRewritten < 3000 {
		t.Fatalf("stats %+v", st)
	}
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(t, tbl)
	if len(rows) != 6000 {
		t.Fatalf("%d rows, want 6,000 (every append kept)", len(rows))
	}
	for i, r := range rows {
		if want := fmt.Sprintf("%d|row-%d", i, i); r != want {
			t.Fatalf("row %d = %q, want %q (table order kept)", i, r, want)
		}
	}
	t.Logf("compaction read v%d, committed v%d after %d attempt(s), rebased over %d appends", st.ReadVersion, st.Version, st.Attempts, len(st.Rebased))
}

// TestCompactWithoutCatalog: on a bare store (no etcd) the rewrite commits at HEAD and is
// not published; readers of the bare store see it.
func TestCompactWithoutCatalog(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(4, 25)
	db, err := engine.Open(ctx, storetest.Mem(t), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tbl := appendEach(t, db, "t", schema, batches)
	want := rowsOf(t, tbl)
	st, err := Compact(ctx, db, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Published || st.Version != tbl.Version()+1 || st.FragmentsAfter != 1 {
		t.Fatalf("stats %+v", st)
	}
	now, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if now.Version() != st.Version {
		t.Fatalf("HEAD %d, want %d", now.Version(), st.Version)
	}
	equalRows(t, "without a catalog", rowsOf(t, now), want)
}

// TestHoldLostMidCommitAbandonsCommit: when the run's hold lease is lost while it commits
// (recovery elsewhere may now roll it back), the commit in flight is abandoned and
// nothing lands.
func TestHoldLostMidCommitAbandonsCommit(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(6, 100)
	db := openDB(t, storetest.Mem(t))
	appendEach(t, db, "t", schema, batches)
	before, err := manifest.Head(ctx, db.Store(), "t")
	if err != nil {
		t.Fatal(err)
	}
	off := failpoint.Enable("manifest.before_version_put", failpoint.Call(func(ctx context.Context) error {
		enginetest.ExpireHolds(t, db, "t") // what etcd does when the lease goes unrenewed
		select {
		case <-ctx.Done(): // the run's commit context ends with the lease
		case <-time.After(10 * time.Second):
			t.Error("commit context still live 10 s after the hold's lease was revoked")
		}
		return nil
	}).Once())
	defer off()
	_, err = Compact(ctx, db, "t", Options{})
	if !errors.Is(err, catalog.ErrHoldLost) {
		t.Fatalf("compaction with its hold lost mid-commit: %v, want ErrHoldLost", err)
	}
	if head, _ := manifest.Head(ctx, db.Store(), "t"); head != before {
		t.Fatalf("HEAD moved from %d to %d: the abandoned commit landed", before, head)
	}
}
