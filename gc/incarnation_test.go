package gc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// TestDroppedTableLeftoversUnderMarker (issue 8 item 10): a drop that died after
// committing its marker and removing the pointer leaves the dropped table's versions and
// files. Garbage collection over every table, and over that table alone, deletes them
// once past the grace period (young ones stay), never the drop marker and its record
// (they keep the version numbers from being used again), and lists no table report for
// it. While the dropped table's pointer is still in the catalog its leftovers are kept.
func TestDroppedTableLeftoversUnderMarker(t *testing.T) {
	for _, only := range []string{"", "gone"} {
		t.Run("table="+only, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Local(t)
			db := openDB(t, s)
			makeTable(t, db, "live", 1, 5)
			tbl := makeTable(t, db, "gone", 2, 10)
			drop := manifest.NewTransaction(tbl.Version(), manifest.Operation{Kind: manifest.OpDrop})
			marker, _, err := manifest.Commit(ctx, s, "gone", tbl.Manifest(), drop, manifest.CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			age(t, s, 3*time.Hour)
			plant(t, s, "gone/data/YOUNG.arrow", 7, 10*time.Minute)

			// The pointer is still there: the drop died before removing it.
			rep, err := Run(ctx, s, db.Catalog(), only, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.DroppedLeftovers) != 0 || len(rep.DroppedSkipped) != 1 || !strings.Contains(rep.DroppedSkipped[0].Reason, "drop it again") {
				t.Fatalf("with the pointer left: deleted %v, skipped %+v", rep.DroppedLeftovers, rep.DroppedSkipped)
			}
			if err := db.Catalog().Delete(ctx, "gone"); err != nil {
				t.Fatal(err)
			}
			rep, err = Run(ctx, s, db.Catalog(), only, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range rep.Tables {
				if tr.Table == "gone" && (!tr.Dropped || len(tr.Deleted) > 0 || len(tr.Expired) > 0) {
					t.Fatalf("the dropped table was collected as a live one: %+v", tr)
				}
			}
			disk := diskFiles(t, s)
			var left []string
			for k := range disk {
				if strings.HasPrefix(k, "gone/") {
					left = append(left, k)
				}
			}
			slices.Sort(left)
			want := []string{marker.TxnKey, "gone/data/YOUNG.arrow", marker.Key()}
			slices.Sort(want)
			if !slices.Equal(left, want) || len(rep.DroppedLeftovers) == 0 || rep.DroppedKept != 1 {
				t.Fatalf("left under gone/: %v (deleted %d, kept %d); want %v", left, len(rep.DroppedLeftovers), rep.DroppedKept, want)
			}
			if _, err := db.OpenTable(ctx, "gone"); !errors.Is(err, manifest.ErrTableNotFound) {
				t.Fatalf("open: %v", err)
			}
			if n := len(scanRows(t, mustOpen(t, db, "live"))); n != 5 {
				t.Fatalf("live table: %d rows", n)
			}
		})
	}
}

// TestReCreatedTableKeepsOnlyItsIncarnation (issue 8 item 10): after a drop and a create,
// garbage collection retains the new incarnation's versions from its Create only; the drop
// marker and a version a writer of the dropped table put into a number the drop freed
// (below the marker), with its record and files, are garbage, deleted once old without
// fencing their transactions (the marker and the pointer fence them). The new table's
// rows stay.
func TestReCreatedTableKeepsOnlyItsIncarnation(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	tbl := makeTable(t, db, "t", 2, 10) // v1..v3
	old := tbl.Manifest()
	appendRows(t, mustOpen(t, db, "t"), 100, 5) // v4: the number the late writer retries at
	if _, err := db.DropTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	again, err := db.CreateTable(ctx, "t", testSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, again, 500, 3)
	since := again.Manifest().IncarnationSince
	// The late writer of the dropped table: its version lands below the marker.
	late := manifest.NewTransaction(old.Version, manifest.Operation{Kind: manifest.OpAppend})
	lateFile := manifest.TxnDataDir("t", late.ID) + "/late.arrow"
	late.Op.NewFragments = []manifest.Fragment{{Files: []fragment.DataFile{{Key: lateFile, Rows: 1}}, PhysicalRows: 1}}
	hole, _, err := manifest.Commit(ctx, s, "t", old, late, manifest.CommitOptions{})
	if err != nil || hole.Version >= since {
		t.Fatalf("late commit: %v %v (the test needs it below the marker)", hole, err)
	}
	plant(t, s, lateFile, 9, 0)
	age(t, s, 3*time.Hour)
	before := scanRows(t, mustOpen(t, db, "t"))

	rep, err := Run(ctx, s, db.Catalog(), "", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	if tr.Table != "t" || tr.IncarnationSince != since || tr.Retained[0] != since || tr.Fence != 0 || tr.FencedTxns != 0 {
		t.Fatalf("report: %+v; want versions from %d retained and no fence", tr, since)
	}
	var deleted []string
	for _, f := range tr.Deleted {
		deleted = append(deleted, f.Key)
	}
	for _, k := range []string{hole.Key(), hole.TxnKey, lateFile, manifest.ManifestKey("t", since-1)} {
		if !slices.Contains(deleted, k) {
			t.Errorf("%s not deleted (deleted %v)", k, deleted)
		}
	}
	vs, err := manifest.Versions(ctx, s, "t")
	if err != nil || vs[0] != since {
		t.Fatalf("versions left: %v %v, want none below %d", vs, err, since)
	}
	if after := scanRows(t, mustOpen(t, db, "t")); !slices.Equal(after, before) || len(after) != 3 {
		t.Fatalf("rows: %v, want %v", after, before)
	}
}

func mustOpen(t testing.TB, db *engine.DB, name string) *engine.Table {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}
