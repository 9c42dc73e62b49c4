package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// noGrace is a policy with no grace period: what keeps WAL objects must not be a clock.
var noGrace = Policy{KeepLast: 1, GracePeriod: -1}

// walTable creates name with one WAL shard.
func walTable(t testing.TB, db *engine.DB, name string) *engine.Table {
	t.Helper()
	tbl, err := db.CreateTable(context.Background(), name, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.UpdateConfig(context.Background(), map[string]string{engine.ConfigWALShards: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func walWriter(t testing.TB, db *engine.DB, name string) *engine.WALWriter {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.WAL(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// walAppend appends rows ids [from, from+n) through w (one entry).
func walAppend(t testing.TB, w *engine.WALWriter, from int64, n int) error {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for id := from; id < from+int64(n); id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row-%d", id))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	_, err := w.Append(context.Background(), rec)
	return err
}

func mustWALAppend(t testing.TB, w *engine.WALWriter, from int64, n int) {
	t.Helper()
	if err := walAppend(t, w, from, n); err != nil {
		t.Fatalf("WAL append [%d, %d): %v", from, from+int64(n), err)
	}
}

// rowIDs reads table name in a fresh handle (WAL included), as "row-<id>" strings, sorted.
func rowIDs(t testing.TB, db *engine.DB, name string) []string {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return scanRows(t, tbl)
}

// wantRows is the rows scanRows gives for ids [from, to) of each range.
func wantRows(ranges ...[2]int64) []string {
	var out []string
	for _, r := range ranges {
		for id := r[0]; id < r[1]; id++ {
			out = append(out, fmt.Sprintf("%d|row-%d", id, id))
		}
	}
	slices.Sort(out)
	return out
}

// genKeys lists the objects of shard 0's generation directories.
func genKeys(t testing.TB, s store.Store, table string) []string {
	t.Helper()
	objs, err := s.List(context.Background(), wal.ShardDir(table, "0")+"gen-", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

func deletedKeys(rep Report) map[string]bool {
	out := map[string]bool{}
	for _, tr := range rep.Tables {
		for _, f := range tr.Deleted {
			out[f.Key] = true
		}
	}
	for _, f := range rep.DroppedLeftovers {
		out[f.Key] = true
	}
	return out
}

func runGC(t testing.TB, db *engine.DB, table string, p Policy) Report {
	t.Helper()
	rep, err := Run(context.Background(), db.Store(), db.Catalog(), table, p)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	return rep
}

// TestWALPausedFlushSurvivesGC (clause c): a flush that wrote its generation's files but
// has not yet put the shard manifest listing them, paused at wal.flush_files for as long
// as it takes, keeps them through a gc with no grace period; once it goes on, every row
// reads. Without the clause gc deletes them and the manifest lands naming missing files.
func TestWALPausedFlushSurvivesGC(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	walTable(t, db, "w")
	w := walWriter(t, db, "w")
	mustWALAppend(t, w, 0, 10)
	reached, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(failpoint.Enable("wal.flush_files", failpoint.Call(func(ctx context.Context) error {
		close(reached)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}).Once()))
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(let) // before the writer's Close, which waits for the flush
	flushed := make(chan error, 1)
	go func() { flushed <- w.Flush(ctx) }()
	select {
	case <-reached:
	case err := <-flushed:
		t.Fatalf("the flush ended before its seam: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the flush did not reach wal.flush_files within 30 s")
	}
	files := genKeys(t, s, "w")
	if len(files) == 0 {
		t.Fatal("the paused flush wrote no generation file")
	}
	rep := runGC(t, db, "w", noGrace)
	if del := deletedKeys(rep); len(del) > 0 {
		for _, k := range files {
			if del[k] {
				t.Fatalf("gc deleted %s of the flush in flight", k)
			}
		}
	}
	if tr := rep.Tables[0]; tr.Kept[WALInFlight] != len(files) {
		t.Fatalf("kept %d objects as %s, want the %d generation files: %+v", tr.Kept[WALInFlight], WALInFlight, len(files), tr.Kept)
	}
	let()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if got := rowIDs(t, openDB(t, s), "w"); !slices.Equal(got, wantRows([2]int64{0, 10})) {
		t.Fatalf("after the flush: %v", got)
	}
}

// TestWALFencedWritersGenerationIsCollected: a writer fenced between writing its
// generation's files and putting its manifest leaves a generation no shard manifest will
// ever list; gc deletes it (epoch below the newest, not listed) and keeps the new
// writer's unmerged generation (clause d), which holds the fenced writer's rows (replayed).
func TestWALFencedWritersGenerationIsCollected(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	walTable(t, db, "w")
	stale := walWriter(t, db, "w")
	mustWALAppend(t, stale, 0, 10)
	fresh := walWriter(t, openDB(t, s), "w") // another process claims: epoch 2
	if err := stale.Flush(ctx); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("stale flush: %v", err)
	}
	staleFiles := genKeys(t, s, "w")
	if len(staleFiles) == 0 {
		t.Fatal("the fenced flush left no generation files")
	}
	mustWALAppend(t, fresh, 10, 5)
	if err := fresh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rep := runGC(t, db, "w", noGrace)
	del := deletedKeys(rep)
	for _, k := range staleFiles {
		if !del[k] {
			t.Fatalf("the fenced writer's generation file %s was kept (deleted: %v)", k, del)
		}
	}
	left := genKeys(t, s, "w")
	if len(left) == 0 || rep.Tables[0].Kept[WALUnmerged] != len(left) {
		t.Fatalf("the new writer's generation: %v on disk, %d kept as unmerged", left, rep.Tables[0].Kept[WALUnmerged])
	}
	if got := rowIDs(t, openDB(t, s), "w"); !slices.Equal(got, wantRows([2]int64{0, 15})) {
		t.Fatalf("after gc: %v", got)
	}
}

// TestWALMergedAndCompactedGenerationsAreCollected: a merged generation's files are base
// fragments, kept while a retained version names them (clause a); once compaction
// rewrote them and the versions naming them expired, gc deletes them although the shard
// manifest still lists the generation (at or below every retained watermark).
func TestWALMergedAndCompactedGenerationsAreCollected(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	tbl := walTable(t, db, "w")
	appendRows(t, tbl, 0, 10)
	w := walWriter(t, db, "w")
	mustWALAppend(t, w, 10, 10)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	gen := genKeys(t, s, "w")
	h, err := db.OpenTable(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.MergeWAL(ctx, engine.MergeWALOptions{}); err != nil {
		t.Fatal(err)
	}
	rep := runGC(t, db, "w", noGrace)
	if del := deletedKeys(rep); len(del) > 0 && del[gen[0]] {
		t.Fatalf("gc deleted merged generation file %s, a base fragment of the retained version", gen[0])
	}
	if m := rep.Tables[0].WAL[0].Merged; m != 1 {
		t.Fatalf("the report says merged through %d in every retained version, want 1", m)
	}
	if rep.Tables[0].Kept[Referenced] < len(gen) {
		t.Fatalf("kept %+v, want the generation's %d files referenced", rep.Tables[0].Kept, len(gen))
	}
	st, err := compaction.New(db).Run(ctx, "w", compaction.Options{TargetRows: 1000})
	if err != nil || st.Version == 0 {
		t.Fatalf("compaction: %+v, %v", st, err)
	}
	if sm, err := wal.LoadShard(ctx, s, "w", "0"); err != nil || len(sm.Generations) != 1 {
		t.Fatalf("the shard manifest should still list the merged generation: %v, %v", sm, err)
	}
	rep = runGC(t, db, "w", noGrace)
	del := deletedKeys(rep)
	for _, k := range gen {
		if !del[k] {
			t.Fatalf("merged and compacted generation file %s kept: %+v", k, rep.Tables[0].Kept)
		}
	}
	if got := rowIDs(t, openDB(t, s), "w"); !slices.Equal(got, wantRows([2]int64{0, 20})) {
		t.Fatalf("after gc: %v", got)
	}
}

// TestWALStaleWriterCollidesAfterGCCollectedEntries: gc deletes the entries a flush
// covered but keeps the last entry of each epoch, the fence of a fenced one, so the
// fenced writer's next append still collides and fails with ErrFenced instead of landing,
// acknowledged, in a slot replay would never read. The new writer dies right after its
// flush's manifest landed (before collecting the entries itself), so gc is what deletes
// them.
func TestWALStaleWriterCollidesAfterGCCollectedEntries(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	walTable(t, db, "w")
	stale := walWriter(t, db, "w")
	for i := range int64(5) {
		mustWALAppend(t, stale, i*10, 10)
	}
	fresh := walWriter(t, openDB(t, s), "w") // epoch 2 fences epoch 1 at position 6
	mustWALAppend(t, fresh, 100, 1)
	t.Cleanup(failpoint.Enable("wal.flushed", failpoint.Error(errors.New("died after the manifest put")).Once()))
	if err := fresh.Flush(ctx); err == nil {
		t.Fatal("the flush did not stop at wal.flushed")
	}
	fence := wal.EntryKey("w", "0", wal.Position{Epoch: 1, Pos: 6})
	rep := runGC(t, db, "w", noGrace)
	del := deletedKeys(rep)
	for p := uint64(1); p <= 5; p++ {
		if k := wal.EntryKey("w", "0", wal.Position{Epoch: 1, Pos: p}); !del[k] {
			t.Fatalf("gc kept covered entry %s (deleted %v)", k, del)
		}
	}
	if del[fence] {
		t.Fatalf("gc deleted the fence %s", fence)
	}
	if err := walAppend(t, stale, 200, 1); !errors.Is(err, wal.ErrFenced) {
		t.Fatalf("the fenced writer's append after gc: %v (want ErrFenced)", err)
	}
	if got := rowIDs(t, openDB(t, s), "w"); !slices.Equal(got, wantRows([2]int64{0, 50}, [2]int64{100, 101})) {
		t.Fatalf("after gc: %v", got)
	}
}

// TestWALClaimAfterGCReadTheManifestKeepsItsGeneration (clause b): a writer that claims
// the shard after gc read its manifest, and flushes a generation that manifest cannot
// list, keeps it through the run.
func TestWALClaimAfterGCReadTheManifestKeepsItsGeneration(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	walTable(t, db, "w")
	first := walWriter(t, db, "w")
	mustWALAppend(t, first, 0, 10)
	other := openDB(t, s)
	var claimed []string
	t.Cleanup(failpoint.Enable("gc.after_wal_manifests", failpoint.Call(func(context.Context) error {
		w := walWriter(t, other, "w")
		if err := walAppend(t, w, 10, 5); err != nil {
			return err
		}
		if err := w.Flush(ctx); err != nil {
			return err
		}
		claimed = genKeys(t, s, "w")
		return nil
	}).Once()))
	rep := runGC(t, db, "w", noGrace)
	if len(claimed) == 0 {
		t.Fatal("the writer that claimed during gc flushed nothing")
	}
	if tr := rep.Tables[0]; tr.WAL[0].Epoch != 1 || tr.Kept[WALInFlight] != len(claimed) {
		t.Fatalf("gc read epoch %d and kept %+v, want epoch 1 and the %d files of epoch 2's generation in flight", tr.WAL[0].Epoch, tr.Kept, len(claimed))
	}
	if got := rowIDs(t, openDB(t, s), "w"); !slices.Equal(got, wantRows([2]int64{0, 15})) {
		t.Fatalf("after gc: %v", got)
	}
}

// TestWALMergeAndFlushAfterGCReadTheManifest: a merge that commits after gc read the
// shard manifest, followed by a flush that drops the merged generation from the shard
// manifest, is seen in the versions gc reads next: the generation's files (base
// fragments of the merge's version) are kept. This is why gc reads the shard manifests
// before the versions.
func TestWALMergeAndFlushAfterGCReadTheManifest(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	walTable(t, db, "w")
	w := walWriter(t, db, "w")
	mustWALAppend(t, w, 0, 10)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	gen := genKeys(t, s, "w")
	t.Cleanup(failpoint.Enable("gc.after_wal_manifests", failpoint.Call(func(context.Context) error {
		h, err := db.OpenTable(ctx, "w")
		if err != nil {
			return err
		}
		if _, err := h.MergeWAL(ctx, engine.MergeWALOptions{}); err != nil {
			return err
		}
		if err := walAppend(t, w, 10, 5); err != nil {
			return err
		}
		return w.Flush(ctx) // drops generation 1 (merged) from the shard manifest
	}).Once()))
	rep := runGC(t, db, "w", noGrace)
	if sm, err := wal.LoadShard(ctx, s, "w", "0"); err != nil || len(sm.Generations) != 1 || sm.Generations[0].Generation != 2 {
		t.Fatalf("the flush during gc should have dropped generation 1: %+v, %v", sm, err)
	}
	del := deletedKeys(rep)
	for _, k := range gen {
		if del[k] {
			t.Fatalf("gc deleted %s, a base fragment of the merge committed during the run", k)
		}
	}
	if got := rowIDs(t, openDB(t, s), "w"); !slices.Equal(got, wantRows([2]int64{0, 15})) {
		t.Fatalf("after gc: %v", got)
	}
}

// TestWALOldShardManifestsBecomeTombstones: all but the newest WALKeepManifests versions
// of a shard become tombstones, oldest first; none is deleted, a second run finds nothing
// to do, and a reader and a new claim still work.
func TestWALOldShardManifestsBecomeTombstones(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	walTable(t, db, "w")
	w := walWriter(t, db, "w")
	for i := range int64(8) {
		mustWALAppend(t, w, i*10, 10)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	latest, err := wal.LatestVersion(ctx, s, "w", "0") // 1 claim + 8 flushes
	if err != nil || latest != 9 {
		t.Fatalf("latest shard manifest %d, %v", latest, err)
	}
	p := noGrace
	p.WALKeepManifests = 3
	rep := runGC(t, db, "w", p)
	if got := rep.Tables[0].WAL[0].ExpiredManifests; !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("expired shard manifests %v, want 1..6", got)
	}
	objs, err := s.List(ctx, wal.ManifestDir("w", "0"), 0)
	if err != nil || len(objs) != 9 {
		t.Fatalf("%d shard manifest objects left (%v), want all 9 (tombstones are never deleted)", len(objs), err)
	}
	for v := uint64(1); v <= 9; v++ {
		_, err := wal.LoadShardVersion(ctx, s, "w", "0", v)
		if expired := errors.Is(err, wal.ErrExpired); expired != (v <= 6) || (!expired && err != nil) {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	if rep := runGC(t, db, "w", p); len(rep.Tables[0].WAL[0].ExpiredManifests) != 0 {
		t.Fatalf("a second run expired %v", rep.Tables[0].WAL[0].ExpiredManifests)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w2 := walWriter(t, openDB(t, s), "w")
	mustWALAppend(t, w2, 100, 1)
	if got := rowIDs(t, openDB(t, s), "w"); !slices.Equal(got, wantRows([2]int64{0, 80}, [2]int64{100, 101})) {
		t.Fatalf("after gc: %v", got)
	}
}

// TestWALDroppedTableLeftovers: a WAL writer of a dropped table that goes on writing
// leaves entries and a generation; gc deletes them with the table's other leftovers and
// keeps the shard manifests (which keep the shard's versions taken).
func TestWALDroppedTableLeftovers(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	walTable(t, db, "w")
	w := walWriter(t, db, "w")
	mustWALAppend(t, w, 0, 10)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTable(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	mustWALAppend(t, w, 10, 10) // the dropped table's writer goes on
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := s.List(ctx, wal.Dir("w"), 0)
	if err != nil {
		t.Fatal(err)
	}
	rep := runGC(t, db, "", noGrace)
	del := deletedKeys(rep)
	var manifests, others int
	for _, o := range before {
		isManifest := strings.Contains(o.Key, "/manifest/")
		switch {
		case isManifest && del[o.Key]:
			t.Fatalf("gc deleted shard manifest %s of the dropped table", o.Key)
		case isManifest:
			manifests++
		case !del[o.Key]:
			t.Fatalf("gc kept %s of the dropped table (leftovers %v)", o.Key, rep.DroppedLeftovers)
		default:
			others++
		}
	}
	if manifests != 3 || others == 0 {
		t.Fatalf("%d shard manifests kept, %d WAL objects deleted", manifests, others)
	}
	// Created again, the table's shard continues above the kept manifests.
	walTable(t, db, "w")
	w2 := walWriter(t, db, "w")
	if w2.Epoch() != 2 {
		t.Fatalf("the new incarnation's writer has epoch %d, want 2", w2.Epoch())
	}
	mustWALAppend(t, w2, 100, 1)
	if got := rowIDs(t, db, "w"); !slices.Equal(got, wantRows([2]int64{100, 101})) {
		t.Fatalf("the new incarnation: %v", got)
	}
	if v, err := manifest.Head(ctx, s, "w"); err != nil || v < 3 {
		t.Fatalf("HEAD %d, %v", v, err)
	}
}

// TestClassifyWAL pins each rule of ClassifyWAL on a hand-made shard: shard manifest S at
// epoch 3, replay position 3/2, next generation 5, listing generations 3 (directory a) and
// 4 (directory b); the retained versions' lowest merged watermark is 3.
func TestClassifyWAL(t *testing.T) {
	const table = "t"
	sd := wal.ShardDir(table, "0")
	gdir := func(g, e uint64, r string) string { return fmt.Sprintf("%sgen-%020d-%020d-%s", sd, g, e, r) }
	entry := func(e, p uint64) string { return wal.EntryKey(table, "0", wal.Position{Epoch: e, Pos: p}) }
	s := &wal.ShardManifest{Table: table, Shard: "0", Version: 7, Epoch: 3, Replay: wal.Position{Epoch: 3, Pos: 2}, NextGeneration: 5,
		Generations: []wal.Generation{{Generation: 3, Epoch: 3, Dir: gdir(3, 3, "a")}, {Generation: 4, Epoch: 3, Dir: gdir(4, 3, "b")}}}
	st := &WALState{Shards: map[string]*wal.ShardManifest{"0": s, "1": nil}, Merged: map[string]uint64{"0": 3}}
	old, young := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	refs := &Refs{Files: map[string]bool{gdir(2, 2, "m") + "/f1.arrow": true}, Cutoff: time.Now()}
	cases := []struct {
		key  string
		mod  time.Time
		want Class
		why  string
	}{
		{wal.ManifestKey(table, "0", 3), old, ManifestObj, "a shard manifest is never deleted"},
		{entry(1, 4), old, WALLog, "the last entry of epoch 1 (its fence)"},
		{entry(1, 3), old, Garbage, "covered by the replay position, not its epoch's last"},
		{entry(2, 1), old, WALLog, "the only entry of epoch 2"},
		{entry(3, 1), old, Garbage, "covered"},
		{entry(3, 2), old, Garbage, "covered: at the replay position, and epoch 3 has a later one"},
		{entry(3, 3), old, WALLog, "above the replay position"},
		{entry(1, 2), young, Young, "covered, within the grace period"},
		{entry(4, 1), old, WALLog, "an epoch above S's: above the replay position"},
		{gdir(2, 2, "m") + "/f1.arrow", old, Referenced, "a merged generation's file a retained version names"},
		{gdir(2, 2, "m") + "/f2.arrow", old, Referenced, "the same directory as a referenced file"},
		{gdir(3, 3, "a") + "/f.arrow", old, Garbage, "listed, but at or below every retained watermark, unreferenced"},
		{gdir(4, 3, "b") + "/f.arrow", old, WALUnmerged, "listed above the lowest retained watermark"},
		{gdir(4, 3, "c") + "/f.arrow", old, Garbage, "generation 4, but not the directory S lists (a failed attempt)"},
		{gdir(5, 3, "d") + "/f.arrow", old, WALInFlight, "S's epoch at its next generation: a flush in flight"},
		{gdir(6, 3, "e") + "/f.arrow", old, WALInFlight, "S's epoch above its next generation"},
		{gdir(5, 2, "f") + "/f.arrow", old, Garbage, "a fenced epoch's generation, never listed"},
		{gdir(5, 4, "g") + "/f.arrow", old, WALInFlight, "an epoch that claimed after S was read"},
		{gdir(1, 1, "h") + "/f.arrow", young, Young, "garbage within the grace period"},
		{sd + "stray", old, Unknown, "a key of no known shape"},
		{wal.ShardDir(table, "1") + "entries/x", old, WALUnread, "a shard whose manifest did not read"},
		{wal.ShardDir(table, "9") + "manifest/x", old, WALInFlight, "a shard that appeared after the run read the WAL"},
		{wal.Dir(table) + "_merge/x/y", old, Unknown, "under a merge's attempt prefix"},
	}
	var objs []store.ObjectInfo
	for _, c := range cases {
		objs = append(objs, store.ObjectInfo{Key: c.key, ModTime: c.mod})
	}
	got := ClassifyWAL(table, objs, st, refs)
	for _, c := range cases {
		if got[c.key] != c.want {
			t.Errorf("%s: %s, want %s (%s)", c.key, got[c.key], c.want, c.why)
		}
	}
}
