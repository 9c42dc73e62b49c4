package gc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

func TestDroppedCandidates(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	var objs []store.ObjectInfo
	for _, k := range []string{
		"_shale/store-id",
		"_recovery/01ABC.json",
		"_probe/x",
		"README",
		"misc/notes.txt",                 // not table-shaped
		"live/_versions/" + "x.manifest", // not a parsable manifest key: not live by itself
		"gone/data/A.arrow",
		"gone/_txn/3-x.txn",
		"gone/other.txt", // unknown shape inside a candidate: never deleted
		"junk/_versions/stray.tmp",
	} {
		objs = append(objs, store.ObjectInfo{Key: k, ModTime: old})
	}
	objs = append(objs, store.ObjectInfo{Key: "kept/data/B.arrow"}, store.ObjectInfo{Key: "kept/_versions/00000000000000000001.manifest"})
	got := DroppedCandidates(objs)
	keys := func(t string) (out []string) {
		for _, o := range got[t] {
			out = append(out, o.Key)
		}
		return out
	}
	if len(got) != 3 || !slices.Equal(keys("gone"), []string{"gone/_txn/3-x.txn", "gone/data/A.arrow"}) ||
		!slices.Equal(keys("junk"), []string{"junk/_versions/stray.tmp"}) || !slices.Equal(keys("live"), []string{"live/_versions/x.manifest"}) {
		t.Fatalf("candidates: %v", got)
	}
}

// TestDroppedLeftovers: a table dropped, then a file planted under its prefix (a short
// write that raced the drop) and a record of a drop that died midway: a run over every
// table deletes the old ones and keeps the young one; a young-only leftover, a held
// name, a live table, a non-table prefix and the store's own objects are untouched. A
// run over one table does not look at leftovers; a dry run deletes nothing.
func TestDroppedLeftovers(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "live", 2, 10)
	makeTable(t, db, "gone", 2, 10)
	if _, err := db.DropTable(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	age(t, s, 3*time.Hour)
	liveBefore := diskFiles(t, s)
	oldKeys := []string{"gone/data/LATEWRITE.arrow", "gone/_txn/4-DIEDDROP.txn", "gone/_deletions/0-1-x.dv"}
	for i, k := range oldKeys {
		plant(t, s, k, 10+i, 2*time.Hour)
	}
	plant(t, s, "gone/data/YOUNG.arrow", 7, 10*time.Minute)
	plant(t, s, "gone/notes.txt", 5, 2*time.Hour) // unknown shape: kept
	plant(t, s, "fresh/data/YOUNG.arrow", 7, 10*time.Minute)
	plant(t, s, "held/data/OLD.arrow", 7, 2*time.Hour)
	plant(t, s, "misc/OLD.bin", 7, 2*time.Hour)
	plant(t, s, "TOPLEVEL", 7, 2*time.Hour)
	h, err := db.Catalog().AcquireHold(ctx, catalog.Hold{ID: "op-held", Table: "held", Kind: "compaction", Version: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)

	one, err := Run(ctx, s, db.Catalog(), "live", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.DroppedLeftovers) != 0 {
		t.Fatalf("a run over one table collected leftovers: %+v", one.DroppedLeftovers)
	}
	before := diskFiles(t, s)
	dry, err := Run(ctx, s, db.Catalog(), "", Policy{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := diskFiles(t, s); len(got) != len(before) {
		t.Fatalf("dry run deleted %d objects", len(before)-len(got))
	}
	rep, err := Run(ctx, s, db.Catalog(), "", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var bytes int64
	for _, f := range rep.DroppedLeftovers {
		got = append(got, f.Key)
		bytes += f.Bytes
	}
	want := slices.Clone(oldKeys)
	slices.Sort(want)
	if !slices.Equal(got, want) || bytes != 10+11+12 {
		t.Fatalf("dropped leftovers deleted: %v (%d bytes), want %v (33 bytes)", got, bytes, want)
	}
	if !slices.Equal(dry.DroppedLeftovers, rep.DroppedLeftovers) {
		t.Fatalf("dry run reported %v, run deleted %v", dry.DroppedLeftovers, rep.DroppedLeftovers)
	}
	if len(rep.DroppedSkipped) != 1 || rep.DroppedSkipped[0].Table != "held" || !strings.Contains(rep.DroppedSkipped[0].Reason, "hold") {
		t.Fatalf("skipped: %+v, want held (live hold)", rep.DroppedSkipped)
	}
	if rep.DroppedKept != 3 { // gone/data/YOUNG.arrow, fresh/data/YOUNG.arrow, held/data/OLD.arrow
		t.Fatalf("dropped kept %d, want 3", rep.DroppedKept)
	}
	disk := diskFiles(t, s)
	for _, k := range oldKeys {
		if _, ok := disk[k]; ok {
			t.Errorf("%s still on disk", k)
		}
	}
	for _, k := range []string{"gone/data/YOUNG.arrow", "gone/notes.txt", "fresh/data/YOUNG.arrow", "held/data/OLD.arrow", "misc/OLD.bin", "TOPLEVEL"} {
		if _, ok := disk[k]; !ok {
			t.Errorf("%s was deleted", k)
		}
	}
	// The live table is untouched (its history is short: nothing expires by default).
	for k, size := range liveBefore {
		if !strings.HasPrefix(k, "live/") && !strings.HasPrefix(k, "_shale/") {
			continue
		}
		if disk[k] != size {
			t.Errorf("live object %s: %d bytes, was %d", k, disk[k], size)
		}
	}
	if len(rep.Tables) != 1 || rep.Tables[0].Table != "live" || len(rep.Tables[0].Deleted) != 0 {
		t.Fatalf("tables: %+v", rep.Tables)
	}
	if n := len(rowsAt(t, db, "live", rep.Tables[0].Head)); n != 20 {
		t.Fatalf("live table has %d rows after gc, want 20", n)
	}

	// Once the hold is gone, the held name's leftovers go too.
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(ctx, s, db.Catalog(), "", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.DroppedLeftovers) != 1 || rep.DroppedLeftovers[0].Key != "held/data/OLD.arrow" {
		t.Fatalf("after release: %+v", rep.DroppedLeftovers)
	}
}

// TestReportJSONNoNulls: empty lists encode as [] and empty maps as {}, and the
// recovery outcomes are under "outcomes" as in recovery.Report.
func TestReportJSONNoNulls(t *testing.T) {
	b, err := json.Marshal(Report{Tables: []TableReport{{Table: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "null") {
		t.Fatalf("null in %s", b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"outcomes", "tables", "dropped_leftovers", "dropped_skipped", "temp_files", "store_files", "orphan_claims"} {
		if _, ok := m[k].([]any); !ok {
			t.Errorf("%s: %v, want a list", k, m[k])
		}
	}
	tr := m["tables"].([]any)[0].(map[string]any)
	for _, k := range []string{"holds", "retained", "expired", "deleted", "unknown"} {
		if _, ok := tr[k].([]any); !ok {
			t.Errorf("tables[0].%s: %v, want a list", k, tr[k])
		}
	}
}

// TestDroppedBlocker: what keeps a manifest-less prefix whole: a catalog pointer, a
// pending recovery sidecar naming the table, a manifest that appeared after the listing
// (the table re-created); nothing keeps a plain dropped name.
func TestDroppedBlocker(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "re", 1, 5)
	plant(t, s, "_recovery/01SIDECAR.json", 0, time.Minute)
	if err := os.WriteFile(filepath.Join(root(t, s), "_recovery", "01SIDECAR.json"), []byte(`{"table":"sc"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table string
		noCat bool
		want  string
	}{
		{"re", false, "pointer"},
		{"re", true, "manifest appeared"},
		{"sc", false, "sidecar _recovery/01SIDECAR.json"},
		{"plain", false, ""},
	} {
		cat := db.Catalog()
		if c.noCat {
			cat = nil
		}
		why, err := droppedBlocker(ctx, s, cat, c.table, 0)
		if err != nil || (c.want == "") != (why == "") || !strings.Contains(why, c.want) {
			t.Errorf("%s (no catalog %v): %q, %v; want %q", c.table, c.noCat, why, err, c.want)
		}
	}
}
