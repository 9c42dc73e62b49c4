package gc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// indexObjects lists the keys under table's _indices/.
func indexObjects(t *testing.T, s store.Store, table string) []string {
	t.Helper()
	objs, err := s.List(context.Background(), manifest.IndicesDir(table)+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

func createIndex(t *testing.T, db *engine.DB, table string, spec engine.IndexSpec) engine.IndexResult {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tbl.CreateIndex(context.Background(), spec)
	if err != nil {
		t.Fatalf("create index %+v: %v", spec, err)
	}
	return res
}

// TestUncommittedIndexBuildFencedThenCollected: the objects of an index build that wrote
// them and never committed (it failed at its commit seam) are unreferenced; GC fences
// the build's transaction with an abort version before deleting them (invariant 15), and
// leaves exactly what the retained versions need.
func TestUncommittedIndexBuildFencedThenCollected(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	tbl := makeTable(t, db, "t", 3, 50)
	disable := failpoint.Enable("engine.index_commit", failpoint.Error(errors.New("crash")))
	_, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"id"}})
	disable()
	if err == nil {
		t.Fatal("the build committed")
	}
	objs := indexObjects(t, s, "t")
	if len(objs) != 2 {
		t.Fatalf("index objects %v, want a lookup and pages", objs)
	}
	txn, ok := manifest.KeyTxn("t", objs[0])
	if !ok {
		t.Fatalf("%s names no transaction", objs[0])
	}
	rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 100, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	if tr.Fence == 0 || len(indexObjects(t, s, "t")) != 0 {
		t.Fatalf("gc: fence %d, deleted %v, left %v", tr.Fence, tr.Deleted, indexObjects(t, s, "t"))
	}
	abort, err := manifest.Load(ctx, s, "t", tr.Fence)
	if err != nil || abort.Txn.Op.Kind != manifest.OpAbort || !slices.Contains(abort.Txn.Op.Aborted, txn) {
		t.Fatalf("fence v%d: %+v %v, want an abort naming %s", tr.Fence, abort.Txn.Op, err, txn)
	}
	checkDiskIsNeeded(t, s, nil, "t")
}

// TestDroppedIndexCollected: a dropped index's objects stay while a retained version
// names them and are collected (without a fence: the build committed) once none does; a
// replaced index's old segment likewise. The indexes still in use keep theirs.
func TestDroppedIndexCollected(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 3, 50)
	bt := createIndex(t, db, "t", engine.IndexSpec{Columns: []string{"id"}})
	zm := createIndex(t, db, "t", engine.IndexSpec{Columns: []string{"s"}, Kind: index.KindZoneMap})
	old := indexObjects(t, s, "t")
	zmAgain := createIndex(t, db, "t", engine.IndexSpec{Name: zm.Index.Name, Columns: []string{"s", "id"}, Kind: index.KindZoneMap, Replace: true})
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.DropIndex(ctx, bt.Index.Name); err != nil {
		t.Fatal(err)
	}
	all := indexObjects(t, s, "t")
	if len(all) != 4 {
		t.Fatalf("index objects %v", all)
	}
	rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 100, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := indexObjects(t, s, "t"); !slices.Equal(got, all) || rep.Tables[0].Fence != 0 {
		t.Fatalf("gc keeping every version: objects %v (want %v), fence %d", got, all, rep.Tables[0].Fence)
	}
	rep, err = Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	got := indexObjects(t, s, "t")
	if tr.Fence != 0 || len(got) != 1 || slices.Contains(old, got[0]) || !strings.HasSuffix(got[0], "zones.zonemap") {
		t.Fatalf("gc keeping HEAD: objects %v, fence %d; want only the replacing zone map (%s)", got, tr.Fence, zmAgain.Index.Name)
	}
	checkDiskIsNeeded(t, s, nil, "t")
	after, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if ix := after.Indexes(); len(ix) != 1 || ix[0].FragmentsCovered != 3 {
		t.Fatalf("indexes %+v", ix)
	}
	if n, err := after.Count(ctx, "s = 'row-7' AND id = 7"); err != nil || n != 1 {
		t.Fatalf("count through the zone map: %d %v", n, err)
	}
}

// TestPendingIndexSidecarProtectsPrefix: objects under a pending index sidecar's prefix
// are recovery's, not GC's: kept while the build's hold is alive, or while the sidecar
// is younger than recovery's minimum age, however old the objects are; once the
// sidecar is stale, GC's recovery step fences the build and deletes them.
func TestPendingIndexSidecarProtectsPrefix(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 2, 50)
	head, err := manifest.Head(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	txn := manifest.NewTransactionID()
	in := &engine.IndexIntent{OperationID: manifest.NewTransactionID(), Table: "t", Created: time.Now().UTC(), TxnID: txn,
		ReadVersion: head, Prefix: manifest.IndicesDir("t") + "/" + txn + "/"}
	h, err := db.Catalog().AcquireHold(ctx, catalog.Hold{ID: in.OperationID, Table: "t", Kind: engine.HoldKindIndex, Version: head}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := (recovery.IndexSidecars{Store: s}).Arm(ctx, in); err != nil {
		t.Fatal(err)
	}
	obj := in.Prefix + "01ABC/lookup.btree"
	plant(t, s, obj, 100, 2*time.Hour)
	// A live build: even a recovery with no minimum age leaves it alone.
	rep, err := RunWithRecover(ctx, s, db.Catalog(), "t", Policy{GracePeriod: -1}, recovery.Options{MinAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Recovered) != 1 || rep.Recovered[0].Action != recovery.SkippedLive || rep.Tables[0].Kept[Protected] != 1 || rep.Tables[0].Fence != 0 {
		t.Fatalf("gc with the build alive: recovered %+v, kept %v, fence %d", rep.Recovered, rep.Tables[0].Kept, rep.Tables[0].Fence)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Dead but young: recovery's minimum age skips it, and GC still keeps its prefix.
	rep, err = Run(ctx, s, db.Catalog(), "t", Policy{GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Recovered) != 1 || rep.Recovered[0].Action != recovery.SkippedYoung || rep.Tables[0].Kept[Protected] != 1 {
		t.Fatalf("gc with a young sidecar: recovered %+v, kept %v", rep.Recovered, rep.Tables[0].Kept)
	}
	if got := indexObjects(t, s, "t"); !slices.Equal(got, []string{obj}) {
		t.Fatalf("objects %v", got)
	}
	// Stale: rolled back (fenced, deleted) by GC's recovery step.
	rep, err = RunWithRecover(ctx, s, db.Catalog(), "t", Policy{GracePeriod: -1}, recovery.Options{MinAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Recovered) != 1 || rep.Recovered[0].Action != recovery.RolledBack || rep.Recovered[0].Fence == 0 ||
		!slices.Equal(rep.Recovered[0].DeletedFiles, []string{obj}) || len(indexObjects(t, s, "t")) != 0 {
		t.Fatalf("gc with a stale sidecar: recovered %+v, left %v", rep.Recovered, indexObjects(t, s, "t"))
	}
	checkDiskIsNeeded(t, s, nil, "t")
}

// TestDroppedTableIndexLeftovers: index objects a build racing a drop stored after the
// drop's listing (under a table whose HEAD is the drop marker), and those of a prefix
// with no manifest left, are a dropped table's leftovers: deleted once past the grace
// period.
func TestDroppedTableIndexLeftovers(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "gone", 2, 10)
	createIndex(t, db, "gone", engine.IndexSpec{Columns: []string{"id"}})
	if _, err := db.DropTable(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	late := "gone/_indices/" + manifest.NewTransactionID() + "/01LATE/lookup.btree"
	orphan := "orphan/_indices/" + manifest.NewTransactionID() + "/01OLD/zones.zonemap"
	plant(t, s, late, 10, 2*time.Hour)
	plant(t, s, orphan, 20, 2*time.Hour)
	rep, err := Run(ctx, s, db.Catalog(), "", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.DroppedLeftovers {
		got = append(got, f.Key)
	}
	slices.Sort(got)
	if want := []string{late, orphan}; !slices.Equal(got, want) {
		t.Fatalf("dropped leftovers deleted %v, want %v", got, want)
	}
	if len(indexObjects(t, s, "gone")) != 0 || len(indexObjects(t, s, "orphan")) != 0 {
		t.Fatal("index objects left")
	}
}
