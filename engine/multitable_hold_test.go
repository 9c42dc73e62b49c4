package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// prepareAppend prepares appending ids [from, to) to tbl.
func prepareAppend(t *testing.T, tbl *Table, from, to int64) *Write {
	t.Helper()
	rec := kvBatch(from, to)
	rdr := recordReader(rec)
	defer rec.Release()
	defer rdr.Release()
	w, err := tbl.PrepareAppend(context.Background(), rdr)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writeHolds returns the write holds on table.
func writeHolds(ctx context.Context, db *DB, table string) ([]catalog.Hold, error) {
	hs, err := db.Catalog().Holds(ctx, table)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(hs, func(h catalog.Hold) bool { return h.Kind != HoldKindWrite }), nil
}

// waitWriteHold waits (10 s deadline) for exactly one write hold on table and returns it.
func waitWriteHold(t *testing.T, db *DB, table string) catalog.Hold {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hs, err := writeHolds(ctx, db, table)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 1 {
			return hs[0]
		}
		if len(hs) > 1 || time.Now().After(deadline) {
			t.Fatalf("table %q: write holds %+v, want exactly one", table, hs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestPreparedWriteHoldsUntilCommit: with WriteHoldAfter past, each prepared member of a
// multi-table transaction holds its table at its read version, started no later than its
// prepare began, through the whole DB.Commit (seen while the commit writes its versions),
// and the holds are gone once Commit returns.
func TestPreparedWriteHoldsUntilCommit(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	appendRange(t, mustOpen(t, db, "b"), 0, 10)
	db.opts.WriteHoldAfter = time.Millisecond
	snap, err := db.Snapshot(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	wa := prepareAppend(t, snap.Tables["a"], 100, 110)
	wb, err := snap.Tables["b"].PrepareDelete(ctx, "id < 3")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	held := map[string]string{}
	for _, n := range []string{"a", "b"} {
		h := waitWriteHold(t, db, n)
		if h.Version != snap.Tables[n].Version() {
			t.Errorf("table %q: hold at version %d, want the read version %d", n, h.Version, snap.Tables[n].Version())
		}
		if h.Started.Before(before.Add(-time.Millisecond)) || h.Started.After(after) {
			t.Errorf("table %q: hold started %v, want within the prepares [%v, %v]", n, h.Started, before, after)
		}
		held[n] = h.ID
	}

	var (
		mu   sync.Mutex
		puts int
	)
	off := failpoint.Enable("manifest.before_version_put", failpoint.Call(func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		puts++
		for n, id := range held {
			if ok, err := db.Catalog().HoldExists(ctx, n, id); err != nil || !ok {
				t.Errorf("table %q: write hold %s during the commit's version put: exists %v, %v", n, id, ok, err)
			}
		}
		return nil
	}))
	res, err := db.Commit(ctx, wa, wb)
	off()
	if err != nil {
		t.Fatal(err)
	}
	if puts < 2 {
		t.Fatalf("%d version puts seen during the commit, want one per table", puts)
	}
	for n := range held {
		if hs, err := writeHolds(ctx, db, n); err != nil || len(hs) != 0 {
			t.Fatalf("table %q: write holds after Commit returned: %+v, %v", n, hs, err)
		}
	}
	if res[0].Rows != 10 || res[1].Rows != 3 {
		t.Fatalf("results %+v", res)
	}
	if got := ids(t, mustOpen(t, db, "b"), ""); fmt.Sprint(got) != "[3 4 5 6 7 8 9]" {
		t.Fatalf("b rows %v", got)
	}
}

// TestRejectedCommitReleasesHolds: a commit rejected by a conflict releases its members'
// holds too.
func TestRejectedCommitReleasesHolds(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	appendRange(t, mustOpen(t, db, "b"), 0, 10)
	db.opts.WriteHoldAfter = time.Millisecond
	snap, _ := db.Snapshot(ctx, "a", "b")
	if _, err := mustOpen(t, db, "b").Delete(ctx, "id = 5"); err != nil { // a logical change after the read
		t.Fatal(err)
	}
	wa := prepareAppend(t, snap.Tables["a"], 100, 110)
	wb, err := snap.Tables["b"].PrepareDelete(ctx, "id = 3")
	if err != nil {
		t.Fatal(err)
	}
	ha, hb := waitWriteHold(t, db, "a"), waitWriteHold(t, db, "b")
	if _, err := db.Commit(ctx, wa, wb); OutcomeOf(err) != Rejected {
		t.Fatalf("commit: %v, want rejected", err)
	}
	for _, h := range []catalog.Hold{ha, hb} {
		if ok, err := db.Catalog().HoldExists(ctx, h.Table, h.ID); err != nil || ok {
			t.Fatalf("table %q: write hold %s after a rejected commit: exists %v, %v", h.Table, h.ID, ok, err)
		}
	}
}

// TestQuickMultiTableCommitTakesNoHold: under the default WriteHoldAfter, a prepare and
// commit that end quickly touch no hold key.
func TestQuickMultiTableCommitTakesNoHold(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	snap, _ := db.Snapshot(ctx, "a", "b")
	wa := prepareAppend(t, snap.Tables["a"], 0, 5)
	wb := prepareAppend(t, snap.Tables["b"], 0, 5)
	off := failpoint.Enable("manifest.before_version_put", failpoint.Call(func(ctx context.Context) error {
		for _, n := range []string{"a", "b"} {
			if hs, err := db.Catalog().Holds(ctx, n); err != nil || len(hs) != 0 {
				t.Errorf("table %q: holds during a quick commit: %+v, %v", n, hs, err)
			}
		}
		return nil
	}))
	defer off()
	if _, err := db.Commit(ctx, wa, wb); err != nil {
		t.Fatal(err)
	}
}

// TestReleasedWriteDropsHold: Release removes the write's hold at once, is idempotent,
// and a released write cannot be committed (nothing lands).
func TestReleasedWriteDropsHold(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	db.opts.WriteHoldAfter = time.Millisecond
	snap, _ := db.Snapshot(ctx, "a", "b")
	wa := prepareAppend(t, snap.Tables["a"], 0, 5)
	wb := prepareAppend(t, snap.Tables["b"], 0, 5)
	ha, hb := waitWriteHold(t, db, "a"), waitWriteHold(t, db, "b")
	wa.Release()
	wa.Release()
	if ok, err := db.Catalog().HoldExists(ctx, "a", ha.ID); err != nil || ok {
		t.Fatalf("write hold %s after Release: exists %v, %v", ha.ID, ok, err)
	}
	if ok, err := db.Catalog().HoldExists(ctx, "b", hb.ID); err != nil || !ok {
		t.Fatalf("the other write's hold %s after releasing a: exists %v, %v", hb.ID, ok, err)
	}
	_, err := db.Commit(ctx, wa, wb)
	if !errors.Is(err, ErrWriteReleased) || OutcomeOf(err) != Rejected {
		t.Fatalf("commit of a released write: %v (outcome %v), want ErrWriteReleased, rejected", err, OutcomeOf(err))
	}
	for _, n := range []string{"a", "b"} {
		if head, err := manifest.Head(ctx, db.Store(), n); err != nil || head != 1 {
			t.Fatalf("table %q: HEAD %d (%v) after a refused commit, want 1", n, head, err)
		}
	}
	if ok, err := db.Catalog().HoldExists(ctx, "b", hb.ID); err != nil || ok {
		t.Fatalf("write hold %s after its refused commit returned: exists %v, %v", hb.ID, ok, err)
	}
}

// TestUnreachableWriteReleasesHold: a prepared write dropped without Commit or Release
// gives up its hold once the Go garbage collector finds it unreachable.
func TestUnreachableWriteReleasesHold(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	db.opts.WriteHoldAfter = time.Millisecond
	func() {
		prepareAppend(t, mustOpen(t, db, "a"), 0, 5)
	}()
	h := waitWriteHold(t, db, "a")
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		ok, err := db.Catalog().HoldExists(ctx, "a", h.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("write hold %s still live 10 s after its write became unreachable", h.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMultiTableCommitRunsBeforeFirstWrite: DB.Commit runs Options.BeforeFirstWrite once
// per member table, in table-name order, before anything of the group is prepared; a
// hook error rejects the commit with nothing prepared or published, and the hook runs
// again (for the tables it failed on) at the next commit.
func TestMultiTableCommitRunsBeforeFirstWrite(t *testing.T) {
	ctx := context.Background()
	db := twoTables(t)
	var calls []string
	hookErr := errors.New("roll-forward failed")
	failOn := "b"
	hook := func(ctx context.Context, s store.Store, cat *catalog.Catalog, table string) error {
		calls = append(calls, table)
		if head, err := manifest.Head(ctx, s, table); err != nil || head != 1 {
			t.Errorf("table %q: HEAD %d (%v) when the hook ran, want 1: the hook must run before the group prepares", table, head, err)
		}
		if table == failOn {
			return hookErr
		}
		return nil
	}
	db.opts.BeforeFirstWrite = hook
	db.opts.WriteHoldAfter = time.Millisecond
	snap, _ := db.Snapshot(ctx, "a", "b")
	wb := prepareAppend(t, snap.Tables["b"], 0, 5)
	wa := prepareAppend(t, snap.Tables["a"], 0, 5)
	ha, hb := waitWriteHold(t, db, "a"), waitWriteHold(t, db, "b")
	_, err := db.Commit(ctx, wb, wa)
	if !errors.Is(err, hookErr) || OutcomeOf(err) != Rejected {
		t.Fatalf("commit with a failing hook: %v (outcome %v), want the hook's error, rejected", err, OutcomeOf(err))
	}
	if fmt.Sprint(calls) != "[a b]" {
		t.Fatalf("hook calls %v, want [a b]", calls)
	}
	for _, n := range []string{"a", "b"} {
		if head, err := manifest.Head(ctx, db.Store(), n); err != nil || head != 1 {
			t.Fatalf("table %q: HEAD %d (%v) after the hook failed, want 1", n, head, err)
		}
		if p, _, err := db.Catalog().Get(ctx, n); err != nil || p.Version != 1 {
			t.Fatalf("table %q: pointer %+v (%v) after the hook failed, want version 1", n, p, err)
		}
	}
	for _, h := range []catalog.Hold{ha, hb} {
		if ok, err := db.Catalog().HoldExists(ctx, h.Table, h.ID); err != nil || ok {
			t.Fatalf("table %q: write hold %s after the failed commit: exists %v, %v", h.Table, h.ID, ok, err)
		}
	}

	// The hook now succeeds: it runs for b only (a's succeeded) and the same writes commit.
	calls, failOn = nil, ""
	if _, err := db.Commit(ctx, wa, wb); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(calls) != "[b]" {
		t.Fatalf("hook calls %v at the second commit, want [b]", calls)
	}
	for _, n := range []string{"a", "b"} {
		if got := ids(t, mustOpen(t, db, n), ""); fmt.Sprint(got) != "[0 1 2 3 4]" {
			t.Fatalf("table %q rows %v", n, got)
		}
	}
	// A later commit does not run it again.
	calls = nil
	snap, _ = db.Snapshot(ctx, "a", "b")
	if _, err := db.Commit(ctx, prepareAppend(t, snap.Tables["a"], 5, 6), prepareAppend(t, snap.Tables["b"], 5, 6)); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 {
		t.Fatalf("hook calls %v after both tables' first writes", calls)
	}
}
