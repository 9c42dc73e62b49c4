package indextest

import (
	"context"
	"errors"
	"testing"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
)

// TestIndexOnTableDroppedDuringPreparation (bad input): an index prepared in another
// process on a table that is dropped before it commits (and, or not, created again) gets
// ErrTableDropped and changes nothing: the dropped table stays dropped with no pointer,
// the new table gains no index and keeps its HEAD; no sidecar is left, and garbage
// collection removes the build's objects. While the build runs its hold keeps the drop
// out (ErrTableBusy); the drop here comes after the hold's lease expired.
func TestIndexOnTableDroppedDuringPreparation(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		name := "dropped"
		if recreate {
			name = "dropped and created again"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			p, release := heldBuild(t, f, btreeK)
			if _, err := f.db.DropTable(ctx, "t"); !errors.Is(err, engine.ErrTableBusy) {
				t.Fatalf("drop while the build holds the table: %v, want ErrTableBusy", err)
			}
			enginetest.ExpireHolds(t, f.db, "t")
			if _, err := f.db.DropTable(ctx, "t"); err != nil {
				t.Fatal(err)
			}
			var again *engine.Table
			if recreate {
				var err error
				if again, err = f.db.CreateTable(ctx, "t", kvSchema); err != nil {
					t.Fatal(err)
				}
				f.appendRows(again, 0, 300, 0)
			}
			headBefore, err := manifest.Head(ctx, f.s, "t")
			if err != nil {
				t.Fatal(err)
			}
			release()
			r, _ := p.wait(t)
			if r.Outcome != engine.Rejected.String() || !r.Dropped {
				t.Fatalf("build: %+v; want rejected with ErrTableDropped", r)
			}
			if head, err := manifest.Head(ctx, f.s, "t"); err != nil || head != headBefore {
				t.Fatalf("HEAD %d (%v), %d before the build's commit", head, err, headBefore)
			}
			if left, err := recovery.Pending(ctx, f.s, ""); err != nil || len(left) != 0 {
				t.Fatalf("sidecars left: %v %v", left, err)
			}
			if !recreate {
				if _, err := f.db.OpenTable(ctx, "t"); !errors.Is(err, manifest.ErrTableNotFound) {
					t.Fatalf("open after the drop: %v", err)
				}
				if _, _, err := f.db.Catalog().Get(ctx, "t"); !errors.Is(err, catalog.ErrNoPointer) {
					t.Fatalf("the build brought the pointer back: %v", err)
				}
				if _, err := gc.Run(ctx, f.s, f.db.Catalog(), "", gc.Policy{GracePeriod: -1}); err != nil {
					t.Fatal(err)
				}
				if objs, err := f.s.List(ctx, manifest.IndicesDir("t")+"/", 0); err != nil || len(objs) != 0 {
					t.Fatalf("index objects after gc: %v %v", objs, err)
				}
				return
			}
			tbl := f.table()
			if tbl.Version() != again.Version() || len(tbl.Manifest().Indexes) != 0 {
				t.Fatalf("re-created table at v%d with indexes %+v; want v%d and none", tbl.Version(), tbl.Manifest().Indexes, again.Version())
			}
			if n, err := tbl.Count(ctx, ""); err != nil || n != 300 {
				t.Fatalf("rows %d %v", n, err)
			}
			if _, err := gc.Run(ctx, f.s, f.db.Catalog(), "t", gc.Policy{GracePeriod: -1}); err != nil {
				t.Fatal(err)
			}
			f.checkSound()
		})
	}
}

// TestIndexOnDroppedTableHandle (bad input): CreateIndex through a handle opened before
// its table was dropped fails with ErrTableDropped before writing anything.
func TestIndexOnDroppedTableHandle(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	tbl := f.table()
	if _, err := f.db.DropTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"k"}}); !errors.Is(err, engine.ErrTableDropped) {
		t.Fatalf("create index on a dropped table: %v, want ErrTableDropped", err)
	}
	if objs, err := f.s.List(ctx, manifest.IndicesDir("t")+"/", 0); err != nil || len(objs) != 0 {
		t.Fatalf("index objects written: %v %v", objs, err)
	}
}
