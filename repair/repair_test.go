package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

var schema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

func appendRows(t *testing.T, tbl *engine.Table, from, n int) {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(from + i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := tbl.AppendRecord(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// rowsAt scans table at version v, sorted.
func rowsAt(t *testing.T, db *engine.DB, table string, v uint64) []string {
	t.Helper()
	tbl, err := db.OpenTableAt(context.Background(), table, v)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := tbl.Scan(context.Background(), engine.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, rec.Column(0).ValueStr(i))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func published(t *testing.T, db *engine.DB, table string) uint64 {
	t.Helper()
	p, _, err := db.Catalog().Get(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	return p.Version
}

func head(t *testing.T, s store.Store, table string) uint64 {
	t.Helper()
	h, err := manifest.Head(context.Background(), s, table)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRepairPublishesMaintenanceDrift: a compaction committed without publishing (and
// without a sidecar) is maintenance drift: the preview changes nothing, --confirm
// publishes HEAD, the rows are unchanged and verify passes; a second repair has no drift.
func TestRepairPublishesMaintenanceDrift(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		appendRows(t, tbl, i*10, 10)
	}
	pub := published(t, db, "t")
	want := rowsAt(t, db, "t", pub)
	ex := compaction.New(db)
	ex.Catalog = nil // commit, never publish: drift with no sidecar
	if st, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000}); err != nil || st.Version != pub+1 {
		t.Fatalf("compaction: %+v, %v", st, err)
	}
	p, err := Inspect(ctx, s, db.Catalog(), "t")
	if err != nil || p.Decision != Publishable || len(p.Versions) != 1 || p.Versions[0].Kind != manifest.OpRewrite {
		t.Fatalf("inspect: %+v, %v", p, err)
	}
	res, err := Repair(ctx, s, db.Catalog(), "t", Options{})
	if err != nil || res.Repaired || published(t, db, "t") != pub {
		t.Fatalf("preview: %+v, %v; published %d, want %d", res, err, published(t, db, "t"), pub)
	}
	res, err = Repair(ctx, s, db.Catalog(), "t", Options{Confirm: true})
	if err != nil || !res.Repaired || res.PublishedNow != pub+1 || published(t, db, "t") != pub+1 {
		t.Fatalf("confirm: %+v, %v", res, err)
	}
	if got := rowsAt(t, db, "t", pub+1); !slices.Equal(got, want) {
		t.Fatalf("rows after repair: %v, want %v", got, want)
	}
	vr, err := verify.Table(ctx, s, db.Catalog(), "t", verify.Options{AllVersions: true})
	if err != nil || !vr.OK() {
		t.Fatalf("verify: %v %v", err, vr.Err())
	}
	if res, err := Repair(ctx, s, db.Catalog(), "t", Options{Confirm: true}); err != nil || res.Repaired || res.Decision != NoDrift {
		t.Fatalf("second repair: %+v, %v", res, err)
	}
}

// TestRepairRefusesLogicalDrift: an append committed by a writer without the catalog is
// logical drift; --confirm alone refuses and publishes nothing; --force --confirm
// publishes it.
func TestRepairRefusesLogicalDrift(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, tbl, 0, 5)
	pub := published(t, db, "t")
	bare, err := engine.Open(ctx, s, engine.Options{}) // no catalog: commits, never publishes
	if err != nil {
		t.Fatal(err)
	}
	bt, err := bare.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, bt, 100, 5)
	ex := compaction.New(db)
	ex.Catalog = nil
	if _, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000}); err != nil {
		t.Fatal(err)
	}
	res, err := Repair(ctx, s, db.Catalog(), "t", Options{Confirm: true})
	if !errors.Is(err, ErrLogicalDrift) || res.Repaired || published(t, db, "t") != pub {
		t.Fatalf("confirm without force: %+v, %v", res, err)
	}
	if len(res.Versions) != 2 || res.Versions[0].Class != Logical || res.Versions[1].Class != Maintenance {
		t.Fatalf("classes: %+v", res.Versions)
	}
	res, err = Repair(ctx, s, db.Catalog(), "t", Options{Confirm: true, Force: true})
	if err != nil || !res.Repaired || published(t, db, "t") != head(t, s, "t") {
		t.Fatalf("force: %+v, %v", res, err)
	}
	if got := len(rowsAt(t, db, "t", head(t, s, "t"))); got != 10 {
		t.Fatalf("%d rows, want 10", got)
	}
}

// TestRepairLeavesSidecarDriftToRecover: a compaction that committed, failed to publish
// and kept its sidecar is recover's work: repair refuses even with --force, and after
// recover there is no drift.
func TestRepairLeavesSidecarDriftToRecover(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		appendRows(t, tbl, i*10, 10)
	}
	pub := published(t, db, "t")
	disable := failpoint.Enable("compaction.before_publish", failpoint.Error(fmt.Errorf("publish lost")))
	_, err = recovery.Enable(compaction.New(db)).Run(ctx, "t", compaction.Options{TargetRows: 1000})
	disable()
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("compaction: %v, want the injected error", err)
	}
	res, err := Repair(ctx, s, db.Catalog(), "t", Options{Confirm: true, Force: true})
	if !errors.Is(err, ErrSidecarPending) || res.Repaired || res.Decision != RunRecover || published(t, db, "t") != pub {
		t.Fatalf("repair with a sidecar: %+v, %v", res, err)
	}
	if res.Versions[0].Sidecar == "" {
		t.Fatalf("sidecar not named: %+v", res.Versions)
	}
	if _, err := recovery.Recover(ctx, s, db.Catalog(), "t", recovery.Options{MinAge: -1}); err != nil {
		t.Fatal(err)
	}
	if p, err := Inspect(ctx, s, db.Catalog(), "t"); err != nil || p.Decision != NoDrift {
		t.Fatalf("after recover: %+v, %v", p, err)
	}
}

// TestRepairWithoutCatalog: nothing is published without a catalog.
func TestRepairWithoutCatalog(t *testing.T) {
	s := storetest.Mem(t)
	if _, err := Repair(context.Background(), s, nil, "t", Options{Confirm: true}); !errors.Is(err, ErrNoCatalog) {
		t.Fatalf("got %v, want ErrNoCatalog", err)
	}
}

// TestRepairAfterDropAndCreate (issue 8 item 10): a dropped table has nothing to repair
// (ErrTableNotFound, ErrTableDropped), and a table created again whose first writes were
// never published, with the dropped incarnation's pointer left behind, counts its drift
// from its own first version (never the dropped one's versions) and publishes over the
// stale pointer.
func TestRepairAfterDropAndCreate(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, tbl, 0, 3)
	stale, _, err := db.Catalog().Get(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(ctx, s, db.Catalog(), "t"); !errors.Is(err, manifest.ErrTableNotFound) || !errors.Is(err, manifest.ErrTableDropped) {
		t.Fatalf("inspect of a dropped table: %v", err)
	}
	// Created again by a DB without a catalog (nothing published), then the dropped
	// incarnation's pointer put back (a drop that died before removing it).
	bare, err := engine.Open(ctx, s, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := bare.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, again, 10, 2)
	if _, err := db.Catalog().FastForward(ctx, "t", stale); err != nil {
		t.Fatal(err)
	}
	p, err := Inspect(ctx, s, db.Catalog(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if p.Published != 0 || len(p.Versions) != 2 || p.Versions[0].Version != again.Manifest().IncarnationSince || p.Target != again.Version() {
		t.Fatalf("plan %+v, want the new incarnation's versions %d..%d as unpublished drift", p, again.Manifest().IncarnationSince, again.Version())
	}
	res, err := Repair(ctx, s, db.Catalog(), "t", Options{Confirm: true, Force: true})
	if err != nil || !res.Repaired || res.PublishedNow != again.Version() {
		t.Fatalf("repair: %+v %v", res, err)
	}
	if got := rowsAt(t, db, "t", again.Version()); fmt.Sprint(got) != "[10 11]" {
		t.Fatalf("rows %v", got)
	}
}
