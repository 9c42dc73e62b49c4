package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
)

// history builds table "t": create, 6 appends, a delete (deletion vector), a
// compaction (the old fragments' files become unreferenced at the new version) and two
// more appends: versions 1..11.
func history(t *testing.T, db *engine.DB) *engine.Table {
	t.Helper()
	ctx := context.Background()
	tbl := makeTable(t, db, "t", 6, 50)
	if _, err := tbl.Delete(ctx, "id % 7 = 0"); err != nil {
		t.Fatal(err)
	}
	if st, err := compaction.Compact(ctx, db, "t", compaction.Options{TargetRows: 1000}); err != nil || st.Version == 0 {
		t.Fatalf("compact: %+v %v", st, err)
	}
	if err := tbl.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	appendRows(t, tbl, 1000, 20)
	appendRows(t, tbl, 2000, 20)
	return tbl
}

// garbage plants the shapes a crashed writer leaves behind, modified d ago, and returns
// their keys: a killed import's data file, an abandoned compaction attempt's directory,
// an unreferenced deletion vector, a losing commit's transaction record, the record of
// a writer that died before its manifest put (above HEAD), a local temp file, and a
// precondition probe's object.
func garbage(t *testing.T, s store.Store, tag string, d time.Duration) []string {
	dead := manifest.NewTransactionID() // a writer that never committed: gc fences it
	keys := []string{
		"t/data/" + dead + "/0.arrow",
		"t/_deletions/" + dead + "/3-0.dv",
		"t/data/" + tag + "KILLEDIMPORT.arrow",
		"t/data/" + tag + "ABANDONEDTXN/0.arrow",
		"t/_deletions/0-3-" + tag + "dead.dv",
		fmt.Sprintf("t/_txn/4-%sLOSER.txn", tag),
		fmt.Sprintf("t/_txn/99-%sDEADWRITER.txn", tag),
		store.TempDir + "/w-" + tag + "crashed",
		store.ProbeKeyPrefix + tag + "-deadprobe",
	}
	for i, k := range keys {
		plant(t, s, k, 100+i, d)
	}
	return keys
}

func TestRunExpiresAndCollects(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	history(t, db)
	before := allRows(t, db, "t")
	if len(before) != 11 {
		t.Fatalf("history has %d versions, want 11", len(before))
	}
	age(t, s, 3*time.Hour) // the whole history is old
	olds := garbage(t, s, "OLD", 2*time.Hour)
	youngs := garbage(t, s, "YOUNG", 10*time.Minute)

	// A dry run reports and deletes nothing.
	diskBefore := diskFiles(t, s)
	dry, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 3, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Tables[0].Expired, []uint64{1, 2, 3, 4, 5, 6, 7, 8}) || len(dry.Tables[0].Deleted) == 0 {
		t.Fatalf("dry run: expired %v, deleted %d", dry.Tables[0].Expired, len(dry.Tables[0].Deleted))
	}
	if after := diskFiles(t, s); len(after) != len(diskBefore) {
		t.Fatalf("dry run deleted %d objects", len(diskBefore)-len(after))
	}

	rep, err := Run(ctx, s, db.Catalog(), "", Policy{KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	t.Logf("expired %v, deleted %d files (%d bytes), kept %d bytes %v, temp %v",
		tr.Expired, len(tr.Deleted), tr.BytesDeleted, tr.BytesKept, tr.Kept, rep.TempFiles)
	if !slices.Equal(tr.Expired, []uint64{1, 2, 3, 4, 5, 6, 7, 8}) || !slices.Equal(tr.Retained, []uint64{9, 10, 11}) ||
		tr.Floor != 9 || tr.Published != 11 || tr.Head != 11 {
		t.Fatalf("report: %+v", tr)
	}
	deleted := map[string]bool{}
	for _, f := range tr.Deleted {
		deleted[f.Key] = true
	}
	for _, f := range append(rep.TempFiles, rep.StoreFiles...) {
		deleted[f.Key] = true
	}
	for _, k := range olds {
		if !deleted[k] {
			t.Errorf("old garbage %s not deleted", k)
		}
	}
	for _, k := range youngs {
		if deleted[k] {
			t.Errorf("young file %s deleted", k)
		}
	}
	var tempBytes int64
	for _, f := range append(rep.TempFiles, rep.StoreFiles...) {
		tempBytes += f.Bytes
	}
	diskAfter := diskFiles(t, s)
	var tombstones int64
	for _, v := range tr.Expired {
		tombstones += diskAfter[manifest.ManifestKey("t", v)]
	}
	// A tombstone keeps the expired version's transaction (an append's: a few hundred
	// bytes), so commits can still be checked against it.
	if tombstones == 0 || tombstones > 400*int64(len(tr.Expired)) {
		t.Fatalf("tombstones of %d expired versions: %d bytes", len(tr.Expired), tombstones)
	}
	// The run fenced the planted writer's transaction (an abort version: a manifest and
	// its transaction record) before deleting its files.
	if tr.Fence != 12 || tr.FencedTxns != 1 {
		t.Fatalf("fence %d naming %d transactions, want version 12 naming the dead writer", tr.Fence, tr.FencedTxns)
	}
	abort, err := manifest.Load(ctx, s, "t", tr.Fence)
	if err != nil || abort.Txn.Op.Kind != manifest.OpAbort {
		t.Fatalf("fence version: %v %v", abort, err)
	}
	fenceBytes := diskAfter[abort.Key()] + diskAfter[abort.TxnKey]
	if got, want := sum(diskBefore)-sum(diskAfter), tr.BytesDeleted+tempBytes+tr.ExpiredManifestBytes-tombstones-fenceBytes; got != want {
		t.Fatalf("disk shrank by %d bytes, the report says %d (deleted %d + temp %d + manifests %d - tombstones %d - fence %d)",
			got, want, tr.BytesDeleted, tempBytes, tr.ExpiredManifestBytes, tombstones, fenceBytes)
	}
	// Kept (under the table) + the fixed _shale/ objects + young temp files = the disk.
	if got := sum(diskFiles(t, s)); got != tr.BytesKept+fenceBytes+sum(needed(t, s))+youngTemp(t, s) {
		t.Fatalf("disk holds %d bytes; report kept %d", got, tr.BytesKept)
	}
	checkRetained(t, db, "t", before)
	checkDiskIsNeeded(t, s, youngs, "t")

	// Once the young files are past the grace period, they go too.
	age(t, s, 2*time.Hour)
	reqs := s.Counters().Snapshot()
	rep, err = Run(ctx, s, db.Catalog(), "", Policy{KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	// It reads HEAD once to tell whether the table was dropped (its HEAD a drop marker)
	// when listing the tables, the 4 manifests above the first tombstone (9..11 and the
	// first run's fence, 12), the newest tombstone, and looks past HEAD once: not the 8
	// expired versions again. (Its own fence of the formerly young writer is built on 12,
	// read already.)
	if gets := s.Counters().Snapshot().Sub(reqs).ByOp[store.OpGet]; gets != 7 {
		t.Fatalf("second run made %d GETs, want 7", gets)
	}
	// The first run's fence (12) pushed version 9 out of the newest three: it expires
	// now (its transaction record goes with it).
	n := len(rep.TempFiles) + len(rep.StoreFiles)
	for _, f := range rep.Tables[0].Deleted {
		if f.Class != ExpiredVersion {
			n++
		}
	}
	if n != len(youngs) || !slices.Equal(rep.Tables[0].Expired, []uint64{9}) {
		t.Fatalf("second run: deleted %v temp %v expired %v, want the %d formerly young files and version 9",
			rep.Tables[0].Deleted, rep.TempFiles, rep.Tables[0].Expired, len(youngs))
	}
	checkDiskIsNeeded(t, s, nil, "t")
	checkRetained(t, db, "t", before)
}

// checkRetained: verify (every version; expired ones are tombstones, not gaps) finds no fault and each version
// still present has the rows it had before GC.
func checkRetained(t *testing.T, db *engine.DB, table string, before map[uint64][]string) {
	t.Helper()
	ctx := context.Background()
	vr, err := verify.Table(ctx, db.Store(), db.Catalog(), table, verify.Options{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify: %v\n%+v", vr.Err(), vr)
	}
	var last uint64
	for v := range before {
		last = max(last, v)
	}
	for v, rows := range allRows(t, db, table) {
		want, ok := before[v]
		if !ok {
			// A version GC committed: the abort fencing uncommitted writers' files. It
			// changes no row.
			m, err := manifest.Load(ctx, db.Store(), table, v)
			if err != nil || m.Txn.Op.Kind != manifest.OpAbort || v <= last {
				t.Fatalf("version %d after GC is not an abort above the old HEAD %d: %v %v", v, last, m, err)
			}
			want = before[last]
		}
		if !slices.Equal(rows, want) {
			t.Fatalf("version %d: %d rows after GC, %d before", v, len(rows), len(want))
		}
	}
}

// TestPinnedReaderKeepsVersion: a reader pinned at an old version keeps it (and its
// files) through a GC that would otherwise expire it; after Release it expires.
func TestPinnedReaderKeepsVersion(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	tbl := history(t, db)
	old, err := tbl.Checkout(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := scanRows(t, old)
	pin, err := old.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	if !tr.HasLow || tr.LowWatermark != 3 || len(tr.Holds) != 1 || tr.Holds[0].ID != pin.ID() ||
		!slices.Equal(tr.Expired, []uint64{1, 2}) {
		t.Fatalf("report with a pin at 3: %+v", tr)
	}
	if got := scanRows(t, old); !slices.Equal(got, want) {
		t.Fatalf("pinned version 3: %d rows after GC, %d before", len(got), len(want))
	}
	if err := pin.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Tables[0].Expired; len(got) != 8 || got[0] != 3 || rep.Tables[0].HasLow {
		t.Fatalf("after release: expired %v, low %v", got, rep.Tables[0].HasLow)
	}
	if _, err := old.Pin(ctx); !errors.Is(err, manifest.ErrVersionNotFound) {
		t.Fatalf("pin of an expired version: %v, want ErrVersionNotFound", err)
	}
	checkDiskIsNeeded(t, s, nil, "t")
}

// TestPinDuringGC: a reader pins an old version after GC read the holds (at
// gc.after_plan). GC still expires that version's manifest, but re-reads the holds
// before deleting files, so the reader (holding the manifest in memory) scans it whole.
func TestPinDuringGC(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	tbl := history(t, db)
	old, err := tbl.Checkout(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := scanRows(t, old)
	var pin *engine.Pin
	off := failpoint.Enable("gc.after_plan", failpoint.Call(func(ctx context.Context) error {
		var err error
		pin, err = old.Pin(ctx)
		return err
	}).Once())
	rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
	off()
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Release(ctx)
	if !slices.Contains(rep.Tables[0].Expired, 2) {
		t.Fatalf("version 2 was not expired: %+v", rep.Tables[0])
	}
	if got := scanRows(t, old); !slices.Equal(got, want) {
		t.Fatalf("version 2 pinned during GC: %d rows, want %d", len(got), len(want))
	}
}

// TestBareStore: without a catalog, HEAD counts as published and there are no holds.
func TestBareStore(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	history(t, db)
	before := allRows(t, db, "t")
	rep, err := Run(ctx, s, nil, "t", Policy{KeepLast: 2, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	if tr := rep.Tables[0]; !slices.Equal(tr.Retained, []uint64{10, 11}) || tr.Published != 11 {
		t.Fatalf("bare store: %+v", tr)
	}
	checkRetained(t, db, "t", before)
	checkDiskIsNeeded(t, s, nil, "t")
}

// youngTemp sums the bytes of the store-wide files GC collects by age (local temp files,
// probe objects): after a run, only young ones are left.
func youngTemp(t *testing.T, s store.Store) (n int64) {
	for k, size := range diskFiles(t, s) {
		if strings.HasPrefix(k, store.TempDir+"/") || strings.HasPrefix(k, store.ProbeKeyPrefix) {
			n += size
		}
	}
	return n
}

// TestNoFenceForLandedTransactionsFiles: files that became garbage because the versions
// referencing them expired (a compaction rewrote an append's fragments) belong to
// transactions that committed: gc deletes them without committing an abort version.
func TestNoFenceForLandedTransactionsFiles(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	history(t, db) // v2..v7 appends, v8 a delete, v9 a compaction, v10, v11 appends
	// The first run expires the appends' own versions (v1..v5) while v6..v8 still
	// reference their files; the second expires those, so the files go with versions
	// whose transactions did not introduce them.
	if _, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 6, GracePeriod: -1}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	if tr.Fence != 0 || tr.FencedTxns != 0 || len(tr.Deleted) == 0 {
		t.Fatalf("gc of a history with no uncommitted writer: fence %d (%d txns), deleted %d; want no fence", tr.Fence, tr.FencedTxns, len(tr.Deleted))
	}
	checkRetained(t, db, "t", allRows(t, db, "t"))
}
