package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// pendingOne returns the single pending sidecar of table.
func pendingOne(t *testing.T, s store.Store, table string) Keyed {
	t.Helper()
	ks, err := PendingSidecars(context.Background(), s, table)
	if err != nil || len(ks) != 1 || ks[0].Err != nil {
		t.Fatalf("pending sidecars: %+v, %v; want one readable", ks, err)
	}
	return ks[0]
}

// dataFiles lists the data files of table.
func dataFiles(t *testing.T, s store.Store, table string) int {
	t.Helper()
	objs, err := s.List(context.Background(), manifest.DataDir(table)+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(objs)
}

// TestLiveHoldSkipsWhateverTheAge: a sidecar whose operation holds a live catalog hold is
// skipped (SkippedLive) even with MinAge off, and its files stay; once the hold is
// released, the same Recover rolls it back.
func TestLiveHoldSkipsWhateverTheAge(t *testing.T) {
	ctx := context.Background()
	s, db, _ := crashedCompaction(t, "manifest.before_version_put")
	before := rowsOf(t, db, "t") // the crash committed nothing, or only a rewrite
	k := pendingOne(t, s, "t")
	files := dataFiles(t, s, "t")
	h, err := db.Catalog().AcquireHold(ctx, catalog.Hold{ID: k.Sidecar.OperationID, Table: "t", Kind: "compaction", Version: k.Sidecar.PublishedAtStart}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() (Report, error){
		func() (Report, error) { return Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1}) },
		func() (Report, error) { return RollForward(ctx, s, db.Catalog(), "t", Options{}) },
	} {
		rep, err := f()
		if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != SkippedLive {
			t.Fatalf("with a live hold: %+v, %v; want %s", rep, err, SkippedLive)
		}
	}
	if got := dataFiles(t, s, "t"); got != files {
		t.Fatalf("data files %d after skipping, want %d", got, files)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack {
		t.Fatalf("after the release: %+v, %v; want %s", rep, err, RolledBack)
	}
	checkRecovered(t, s, db, "t", before)
}

// TestExitedOperationResolvedAtOnce: a sidecar whose operation the caller knows has
// exited (Options.Exited) is resolved at once, although its hold is live and the sidecar
// younger than MinAge; other operations are still skipped.
func TestExitedOperationResolvedAtOnce(t *testing.T) {
	ctx := context.Background()
	s, db, _ := crashedCompaction(t, "manifest.before_version_put")
	before := rowsOf(t, db, "t")
	k := pendingOne(t, s, "t")
	h, err := db.Catalog().AcquireHold(ctx, catalog.Hold{ID: k.Sidecar.OperationID, Table: "t", Kind: "compaction", Version: k.Sidecar.PublishedAtStart}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{Exited: map[string]bool{"another-operation": true}})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != SkippedLive {
		t.Fatalf("another operation exited: %+v, %v; want %s", rep, err, SkippedLive)
	}
	rep, err = Recover(ctx, s, db.Catalog(), "t", Options{Exited: map[string]bool{k.Sidecar.OperationID: true}})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack {
		t.Fatalf("its operation exited: %+v, %v; want %s", rep, err, RolledBack)
	}
	checkRecovered(t, s, db, "t", before)
}

// TestDefaultMinAgeWithCatalog: a dead operation's sidecar last written 40 s ago is
// resolved by the default MinAge with a catalog (DefaultMinAgeWithHolds, 30 s), but is
// still too young for the no-catalog default (10 min).
func TestDefaultMinAgeWithCatalog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := storetest.LocalAt(t, dir)
	db := openDB(t, s)
	makeTable(t, db, "t", 6, 50)
	if !runChild(t, s, "t", "compaction.before_publish") {
		t.Fatal("compaction was not killed")
	}
	expireHolds(t, db, "t")
	k := pendingOne(t, s, "t")
	if rep, err := Recover(ctx, s, db.Catalog(), "t", Options{}); err != nil || rep.Outcomes[0].Action != SkippedYoung {
		t.Fatalf("fresh sidecar: %+v, %v; want %s", rep, err, SkippedYoung)
	}
	old := time.Now().Add(-40 * time.Second)
	sc := k.Sidecar
	sc.Created = old.UTC()
	if err := s.Put(ctx, k.Key, sc.Encode()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(k.Key)), old, old); err != nil {
		t.Fatal(err)
	}
	if rep, err := Recover(ctx, s, nil, "t", Options{}); err != nil || rep.Outcomes[0].Action != SkippedYoung {
		t.Fatalf("40 s old, no catalog: %+v, %v; want %s", rep, err, SkippedYoung)
	}
	if rep, err := Recover(ctx, s, db.Catalog(), "t", Options{}); err != nil || rep.Outcomes[0].Action != RolledForward {
		t.Fatalf("40 s old, catalog: %+v, %v; want %s", rep, err, RolledForward)
	}
}

// TestRollForwardNeverRollsBack: RollForward publishes a landed compaction and removes
// its sidecar, but leaves an unlanded one (and every file it wrote) for Recover.
func TestRollForwardNeverRollsBack(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "a", 6, 50)
	makeTable(t, db, "b", 6, 50)
	if !runChild(t, s, "a", "compaction.before_publish") || !runChild(t, s, "b", "manifest.before_version_put") {
		t.Fatal("compactions were not killed")
	}
	expireHolds(t, db, "a")
	expireHolds(t, db, "b")
	headA, err := manifest.Head(ctx, s, "a")
	if err != nil {
		t.Fatal(err)
	}
	filesB := dataFiles(t, s, "b")
	rep, err := RollForward(ctx, s, db.Catalog(), "", Options{})
	if err != nil || len(rep.Outcomes) != 2 {
		t.Fatalf("roll forward: %+v, %v", rep, err)
	}
	for _, o := range rep.Outcomes {
		want := map[string]string{"a": RolledForward, "b": NotLanded}[o.Table]
		if o.Action != want || len(o.DeletedFiles) != 0 || o.SidecarKept {
			t.Fatalf("%s: %+v, want %s deleting nothing", o.Table, o, want)
		}
	}
	if p, _, err := db.Catalog().Get(ctx, "a"); err != nil || p.Version != headA {
		t.Fatalf("a published %d, %v; want HEAD %d", p.Version, err, headA)
	}
	if got := dataFiles(t, s, "b"); got != filesB {
		t.Fatalf("b data files %d, want %d untouched", got, filesB)
	}
	if pending := pendingOne(t, s, "b"); pending.Sidecar.Table != "b" {
		t.Fatalf("pending: %+v", pending)
	}
	if keys, err := Pending(ctx, s, "a"); err != nil || len(keys) != 0 {
		t.Fatalf("a's sidecar left: %v, %v", keys, err)
	}
	if rep, err := RollForward(ctx, s, nil, "", Options{}); err != nil || len(rep.Outcomes) != 0 {
		t.Fatalf("without a catalog: %+v, %v; want nothing done", rep, err)
	}
}

// TestHookRollsForwardOnFirstWrite: with recovery.Hook as BeforeFirstWrite, the first
// append to a table whose compaction died between commit and publish publishes that
// compaction and removes its sidecar before committing; the hook runs once per DB and
// table, even for concurrent first writes, and again in a new DB.
func TestHookRollsForwardOnFirstWrite(t *testing.T) {
	ctx := context.Background()
	s, db, _ := crashedCompaction(t, "compaction.before_publish")
	before := rowsOf(t, db, "t") // the crash committed nothing, or only a rewrite
	compacted, err := manifest.Head(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	hook := Hook(Options{})
	opts := engine.Options{BeforeFirstWrite: func(ctx context.Context, s store.Store, cat *catalog.Catalog, table string) error {
		calls.Add(1)
		return hook(ctx, s, cat, table)
	}}
	hdb := enginetest.OpenDB(t, s, opts)
	tbl, err := hdb.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Version() >= compacted {
		t.Fatalf("opened at %d, want below the unpublished compaction %d", tbl.Version(), compacted)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := hdb.OpenTable(ctx, "t")
			if err == nil {
				rec := oneRow(int64(1000 + i))
				_, err = w.AppendRecord(ctx, rec)
				rec.Release()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("hook ran %d times for 4 writes, want 1", n)
	}
	if keys, err := Pending(ctx, s, "t"); err != nil || len(keys) != 0 {
		t.Fatalf("sidecars after the first write: %v, %v", keys, err)
	}
	m, err := manifest.Load(ctx, s, "t", compacted)
	if err != nil || m.Txn.Op.Kind != manifest.OpRewrite {
		t.Fatalf("v%d: %v, want the compaction", compacted, err)
	}
	if got := len(rowsOf(t, db, "t")); got != len(before)+4 {
		t.Fatalf("%d rows, want %d", got, len(before)+4)
	}
	hdb2 := enginetest.OpenDB(t, s, opts)
	w, err := hdb2.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rec := oneRow(2000)
	defer rec.Release()
	if _, err := w.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("hook ran %d times after a second DB's write, want 2", n)
	}
}

// oneRow is one (id, s) row matching makeTable's schema.
func oneRow(id int64) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(id)
	b.Field(1).(*array.StringBuilder).Append("x")
	return b.NewRecordBatch()
}

// TestDeadHolderSkippedUntilLeaseExpires: a compaction SIGKILLed after its commit leaves
// its hold until the lease expires (one TTL, 15 s, after its last keep-alive); until then
// Recover reports SkippedLive, then it rolls the compaction forward. Waits for the real
// expiry (about 15 s).
func TestDeadHolderSkippedUntilLeaseExpires(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 6, 50)
	before := rowsOf(t, db, "t")
	if !runChild(t, s, "t", "compaction.before_publish") {
		t.Fatal("compaction was not killed")
	}
	killed := time.Now()
	k := pendingOne(t, s, "t")
	if live, err := db.Catalog().HoldExists(ctx, "t", k.Sidecar.OperationID); err != nil || !live {
		t.Fatalf("the killed compaction's hold: %v, %v; want live", live, err)
	}
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != SkippedLive {
		t.Fatalf("right after the kill: %+v, %v; want %s", rep, err, SkippedLive)
	}
	deadline := killed.Add(2*catalog.DefaultHoldTTL + 10*time.Second)
	for rep.Outcomes[0].Action == SkippedLive {
		if time.Now().After(deadline) {
			t.Fatalf("the dead compaction's hold outlived %s", time.Since(killed))
		}
		time.Sleep(250 * time.Millisecond) // polling the condition (lease expiry), with the deadline above
		if rep, err = Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1}); err != nil || len(rep.Outcomes) != 1 {
			t.Fatalf("recover: %+v, %v", rep, err)
		}
	}
	if rep.Outcomes[0].Action != RolledForward {
		t.Fatalf("after the hold expired: %+v, want %s", rep, RolledForward)
	}
	t.Logf("hold expired and the compaction rolled forward %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	checkRecovered(t, s, db, "t", before)
}

// TestBeforeFirstWriteErrorFailsTheWrite: a hook error fails the write (wrapped, nothing
// committed) and the hook runs again before the next write; after a success it does not.
func TestBeforeFirstWriteErrorFailsTheWrite(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	makeTable(t, openDB(t, s), "t", 1, 10)
	errHook := errors.New("hook refused")
	var calls atomic.Int32
	db := enginetest.OpenDB(t, s, engine.Options{BeforeFirstWrite: func(ctx context.Context, _ store.Store, cat *catalog.Catalog, table string) error {
		if cat == nil || table != "t" {
			return fmt.Errorf("hook got table %q, catalog %v", table, cat)
		}
		if calls.Add(1) == 1 {
			return errHook
		}
		return nil
	}})
	head0, err := manifest.Head(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rec := oneRow(1)
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); !errors.Is(err, errHook) {
		t.Fatalf("first append: %v, want the hook's error", err)
	}
	if h, err := manifest.Head(ctx, s, "t"); err != nil || h != head0 {
		t.Fatalf("HEAD %d after a refused write, want %d: %v", h, head0, err)
	}
	for i := range 2 {
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatalf("append %d: %v", i+2, err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("hook ran %d times, want 2 (a failure, then one success)", n)
	}
}
