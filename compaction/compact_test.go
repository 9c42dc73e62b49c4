package compaction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// TestCompactFlights: 300 appends of 2,000 real flight records (600,000 rows, 300
// fragments), a delete that leaves some fragments past the deleted-ratio threshold, then
// one compaction. The table ends with few fragments, a full scan in table order returns
// exactly the rows it returned before, and the version before the compaction still reads
// the same rows from the old fragments.
func TestCompactFlights(t *testing.T) {
	ctx := context.Background()
	schema, batches := flightBatches(t, 300, 2000)
	db := openDB(t, storetest.Local(t))
	tbl := appendEach(t, db, "flights", schema, batches)
	del, err := tbl.Delete(ctx, "delay > 120")
	if err != nil {
		t.Fatal(err)
	}
	if del.Rows == 0 {
		t.Fatal("the delete matched nothing")
	}
	before := tbl.Version()
	want := rowsOf(t, tbl)
	if len(want) != 600_000-int(del.Rows) {
		t.Fatalf("%d rows before compaction, want %d", len(want), 600_000-del.Rows)
	}

	ex := New(db)
	var hooked *Plan
	ex.Hooks.BeforeFirstWrite = func(_ context.Context, p *Plan) error { hooked = p; return nil }
	st, err := ex.Run(ctx, "flights", Options{TargetRows: 131_072, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v", st)
	if st.Version != before+1 || st.ReadVersion != before || st.Attempts != 1 || !st.Published {
		t.Fatalf("stats %+v, want version %d from %d in one attempt, published", st, before+1, before)
	}
	if st.FragmentsBefore != 300 || st.FragmentsRemoved != 300 || st.FragmentsAfter > 6 || st.FragmentsAfter != st.FragmentsAdded {
		t.Fatalf("fragments %d → %d (removed %d, added %d), want 300 → at most 6", st.FragmentsBefore, st.FragmentsAfter, st.FragmentsRemoved, st.FragmentsAdded)
	}
	if st.RowsRewritten != int64(len(want)) || st.RowsDropped != del.Rows {
		t.Fatalf("rewrote %d rows and dropped %d, want %d and %d", st.RowsRewritten, st.RowsDropped, len(want), del.Rows)
	}
	if hooked == nil || hooked.Txn.ID != st.TxnID {
		t.Fatalf("BeforeFirstWrite saw %v, committed transaction %s", hooked, st.TxnID)
	}

	now, err := db.OpenTable(ctx, "flights")
	if err != nil {
		t.Fatal(err)
	}
	if now.Version() != st.Version {
		t.Fatalf("published version %d, want %d", now.Version(), st.Version)
	}
	m := now.Manifest()
	if m.Txn.ID != st.TxnID || m.Txn.Op.Kind != manifest.OpRewrite {
		t.Fatalf("version %d holds %s, want rewrite %s", m.Version, m.Txn.String(), st.TxnID)
	}
	for _, f := range m.Fragments {
		if f.Deletion != nil {
			t.Fatalf("fragment %d still has a deletion vector after compaction", f.ID)
		}
		if f.PhysicalRows > 131_072 {
			t.Fatalf("fragment %d has %d rows, past the target", f.ID, f.PhysicalRows)
		}
	}
	equalRows(t, "after compaction", rowsOf(t, now), want)
	old, err := db.OpenTableAt(ctx, "flights", before)
	if err != nil {
		t.Fatal(err)
	}
	if len(old.Manifest().Fragments) != 300 {
		t.Fatalf("old version has %d fragments", len(old.Manifest().Fragments))
	}
	equalRows(t, "the version before compaction", rowsOf(t, old), want)

	// A second run finds nothing to do.
	st2, err := ex.Run(ctx, "flights", Options{TargetRows: 131_072})
	if err != nil || st2.Version != 0 || st2.Groups != 0 {
		t.Fatalf("second compaction: %+v, %v; want nothing committed", st2, err)
	}
}

// TestConcurrentAppendRebased: an append committed while the compaction writes its files
// is kept: the rewrite rebases over it in the same attempt.
func TestConcurrentAppendRebased(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(21, 100)
	db := openDB(t, storetest.Mem(t))
	appendEach(t, db, "t", schema, batches[:20])
	ex := New(db)
	appended := uint64(0)
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *Plan) error {
		w, err := db.OpenTable(ctx, "t")
		if err != nil {
			return err
		}
		res, err := w.AppendRecord(ctx, batches[20])
		appended = res.Version
		return err
	}
	st, err := ex.Run(ctx, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Attempts != 1 || !slices.Equal(st.Rebased, []uint64{appended}) || st.Version != appended+1 {
		t.Fatalf("stats %+v, want one attempt rebased over the append at version %d", st, appended)
	}
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	m := tbl.Manifest()
	if len(m.Fragments) != 2 || m.Fragments[0].PhysicalRows != 2000 || m.Fragments[1].PhysicalRows != 100 {
		t.Fatalf("fragments %+v, want the compacted 2,000 rows then the appended 100", m.Fragments)
	}
	rows := rowsOf(t, tbl)
	if len(rows) != 2100 || rows[0] != "0|row-0" || rows[2099] != "2099|row-2099" {
		t.Fatalf("%d rows, first %q last %q", len(rows), rows[0], rows[len(rows)-1])
	}
}

// TestConcurrentDeleteReplans: a delete of rows in a fragment being compacted, committed
// before the compaction, is a retryable conflict; the compaction replans at HEAD and the
// deleted rows stay deleted.
func TestConcurrentDeleteReplans(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(10, 100)
	db := openDB(t, storetest.Mem(t))
	appendEach(t, db, "t", schema, batches)
	ex := New(db)
	var plans []*Plan
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *Plan) error {
		plans = append(plans, p)
		if len(plans) > 1 {
			return nil
		}
		w, err := db.OpenTable(ctx, "t")
		if err != nil {
			return err
		}
		_, err = w.Delete(ctx, "id = 150 OR id = 777")
		return err
	}
	st, err := ex.Run(ctx, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Attempts != 2 || len(plans) != 2 || plans[0].Txn.ID == plans[1].Txn.ID || plans[1].ReadVersion != plans[0].ReadVersion+1 {
		t.Fatalf("stats %+v; want a replan at the delete's version with a new transaction", st)
	}
	if st.RowsRewritten != 998 || st.RowsDropped != 2 {
		t.Fatalf("rewrote %d rows, dropped %d; want 998 and 2", st.RowsRewritten, st.RowsDropped)
	}
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(t, tbl)
	if len(rows) != 998 || slices.Contains(rows, "150|row-150") || slices.Contains(rows, "777|row-777") {
		t.Fatalf("%d rows after compaction; the deleted rows must stay deleted", len(rows))
	}
	if n := len(tbl.Manifest().Fragments); n != 1 {
		t.Fatalf("%d fragments, want 1", n)
	}
}

// TestConflictBudget: a delete landing before every attempt's commit exhausts the budget;
// nothing is committed by the compaction.
func TestConflictBudget(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(5, 100)
	db := openDB(t, storetest.Mem(t))
	appendEach(t, db, "t", schema, batches)
	ex := New(db)
	next := 0
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *Plan) error {
		w, err := db.OpenTable(ctx, "t")
		if err != nil {
			return err
		}
		_, err = w.Delete(ctx, "id = "+[]string{"1", "101", "201"}[next])
		next++
		return err
	}
	st, err := ex.Run(ctx, "t", Options{MaxAttempts: 3})
	if !errors.Is(err, ErrAttemptsExhausted) || !errors.Is(err, manifest.ErrRetryable) {
		t.Fatalf("err %v, want ErrAttemptsExhausted wrapping a retryable conflict", err)
	}
	if st.Attempts != 3 || st.Version != 0 {
		t.Fatalf("stats %+v", st)
	}
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if k := tbl.Manifest().Txn.Op.Kind; k != manifest.OpDelete || len(tbl.Manifest().Fragments) != 5 {
		t.Fatalf("HEAD is a %s with %d fragments, want the last delete over 5 fragments", k, len(tbl.Manifest().Fragments))
	}
}

// TestBeforeFirstWriteAborts: a failing BeforeFirstWrite hook (a sidecar that cannot be
// written) stops the compaction before any data file exists.
func TestBeforeFirstWriteAborts(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(4, 10)
	s := storetest.Mem(t)
	db := openDB(t, s)
	appendEach(t, db, "t", schema, batches)
	files, err := s.List(ctx, manifest.DataDir("t")+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("sidecar refused")
	ex := New(db)
	ex.Hooks.BeforeFirstWrite = func(context.Context, *Plan) error { return boom }
	if _, err := ex.Run(ctx, "t", Options{}); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the hook's error", err)
	}
	after, err := s.List(ctx, manifest.DataDir("t")+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(files) {
		t.Fatalf("%d data files after the aborted compaction, %d before", len(after), len(files))
	}
}

// TestCompactAfterSchemaChange: after a column is dropped and another added, compaction
// writes fragments of the current schema: the dropped column's data is left behind and the
// added column holds nulls.
func TestCompactAfterSchemaChange(t *testing.T) {
	ctx := context.Background()
	schema, batches := intBatches(3, 10)
	db := openDB(t, storetest.Mem(t))
	tbl := appendEach(t, db, "t", schema, batches)
	if _, err := tbl.DropColumns(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.AddColumns(ctx, arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}); err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, tbl)
	st, err := Compact(ctx, db, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	now, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if st.FragmentsAfter != 1 || !slices.Equal(now.Manifest().Fragments[0].Files[0].FieldIDs, []int32{0, 2}) {
		t.Fatalf("stats %+v, fragments %+v; want one fragment holding fields 0 and 2", st, now.Manifest().Fragments)
	}
	if want[0] != "0|(null)" {
		t.Fatalf("first row %q, want the added column null", want[0])
	}
	equalRows(t, "after dropping a column and compacting", rowsOf(t, now), want)
}

// TestCompactionRacingDropIsRejected (issue 8 item 10): a compaction whose hold was lost
// while its table was dropped and created again cannot commit its rewrite into the new
// table: its commit meets the drop marker (or, when its version number was freed by the
// drop, its publish meets the new incarnation's pointer) and fails with
// engine.ErrTableDropped. The new table keeps its own rows and pointer.
func TestCompactionRacingDropIsRejected(t *testing.T) {
	for _, hole := range []bool{false, true} {
		t.Run(fmt.Sprintf("hole=%v", hole), func(t *testing.T) {
			ctx := context.Background()
			schema, batches := intBatches(22, 100)
			db := openDB(t, storetest.Mem(t))
			appendEach(t, db, "t", schema, batches[:20])
			ex := New(db)
			var again *engine.Table
			ex.Hooks.BeforeCommit = func(ctx context.Context, p *Plan) error {
				if hole { // one more version: the compaction's number is then below the marker
					w, err := db.OpenTable(ctx, "t")
					if err != nil {
						return err
					}
					if _, err := w.AppendRecord(ctx, batches[20]); err != nil {
						return err
					}
				}
				enginetest.ExpireHolds(t, db, "t")
				if _, err := db.DropTable(ctx, "t"); err != nil {
					return err
				}
				var err error
				if again, err = db.CreateTable(ctx, "t", schema); err != nil {
					return err
				}
				_, err = again.AppendRecord(ctx, batches[21])
				return err
			}
			st, err := ex.Run(ctx, "t", Options{})
			if !errors.Is(err, engine.ErrTableDropped) {
				t.Fatalf("compaction racing a drop: %+v %v, want ErrTableDropped", st, err)
			}
			tbl, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if tbl.Version() != again.Version() || len(rowsOf(t, tbl)) != 100 {
				t.Fatalf("re-created table at v%d with %d rows, want v%d with the 100 appended to it", tbl.Version(), len(rowsOf(t, tbl)), again.Version())
			}
		})
	}
}
