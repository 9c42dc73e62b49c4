package reviewtest

import (
	"slices"
	"testing"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// TestInsertBetweenCommitAndPublish (scenario 1; B3 first form): our compaction child
// commits its rewrite and is held before publishing; an appender child commits on top of
// it (rebasing over the rewrite) and publishes; then the compaction is released. Its
// fast-forward publish must succeed (the pointer is already past its version, or moves to
// it), leaving the pointer at HEAD ≥ both versions, rows = original + inserted, no
// sidecar, no orphaned data file, and a table that verifies.
func TestInsertBetweenCommitAndPublish(t *testing.T) {
	for _, seam := range []string{"compaction.after_commit", "compaction.before_publish"} {
		t.Run(seam, func(t *testing.T) {
			f := newFixture(t, storetest.Local(t), 6, 50)
			before, pub0 := f.rows(), f.published()
			rel := f.releaseFile("compaction")
			comp := f.compactor("compactor", block(seam, rel))
			ours := pub0 + 1
			f.waitFor("the compaction's commit", f.headIs(ours), comp)
			if k := f.load(ours).Txn.Op.Kind; k != manifest.OpRewrite {
				t.Fatalf("version %d is a %v, want the compaction's rewrite", ours, k)
			}
			if len(f.sidecars()) != 1 {
				t.Fatalf("sidecars while the compaction is held: %+v", f.sidecars())
			}
			app := f.appender("appender", "", 1000, 40).mustSucceed(t)
			t.Logf("appender: committed version %d, rebased over %v, published %v", app.Version, app.Rebased, app.Published)
			if app.Version != ours+1 || !app.Published {
				t.Fatalf("appender: %+v, want version %d published", app, ours+1)
			}
			if p := f.published(); p != app.Version {
				t.Fatalf("published %d after the append, want %d", p, app.Version)
			}
			f.release(rel)
			res := comp.mustSucceed(t)
			t.Logf("compaction: read version %d, committed version %d, attempts %d, rebased %v, published %v",
				res.ReadVersion, res.Version, res.Attempts, res.Rebased, res.Published)
			if res.Version != ours || !res.Published {
				t.Fatalf("compaction: %+v, want version %d published", res, ours)
			}
			head, p := f.head().Version, f.published()
			t.Logf("after: published %d, HEAD %d (ours %d, appender's %d)", p, head, ours, app.Version)
			if p != head || p < ours || p < app.Version {
				t.Fatalf("published %d, HEAD %d: want published = HEAD ≥ %d and ≥ %d", p, head, ours, app.Version)
			}
			equalRows(t, "rows after", f.rows(), merged(before, ids(1000, 1040)))
			if sc := f.sidecars(); len(sc) != 0 {
				t.Fatalf("sidecars left: %+v", sc)
			}
			f.noOrphanFiles()
			f.verifyOK()
			if rep := f.recover(); len(rep.Outcomes) != 0 {
				t.Fatalf("recover acted after a clean run: %+v", rep)
			}
		})
	}
}

// TestDeleteBeforeCompactionCommits (scenario 2; B3 second form): our compaction child has
// planned (and, at the later seam, written its new fragments and its transaction record)
// and is held before committing; a deleter child deletes rows of fragments the plan
// rewrites and publishes; then the compaction is released. It must rebase or replan, and
// the deleted rows stay deleted: rows = original − deleted, the pointer at HEAD, no
// sidecar, no orphaned data file (the first attempt's files are removed), verify passes.
func TestDeleteBeforeCompactionCommits(t *testing.T) {
	for _, seam := range []string{"compaction.after_sidecar", "manifest.before_version_put"} {
		t.Run(seam, func(t *testing.T) {
			f := newFixture(t, storetest.Local(t), 6, 50)
			before, pub0 := f.rows(), f.published()
			rel := f.releaseFile("compaction")
			comp := f.compactor("compactor", block(seam, rel))
			f.waitFor("the compaction's sidecar", f.sidecarArmed, comp)
			sc := f.sidecars()
			if len(sc) != 1 || len(sc[0].Attempts) != 1 || sc[0].Attempts[0].ReadVersion != pub0 {
				t.Fatalf("sidecar while held: %+v, want one attempt read at %d", sc, pub0)
			}
			firstTxn := sc[0].Attempts[0].TxnID
			if seam == "manifest.before_version_put" {
				f.waitFor("the compaction's transaction record", f.txnStored(firstTxn), comp)
			}
			// Rows in the first and the last fragment (ids 0..49 and 250..299), both rewritten.
			del := f.deleter("deleter", "", "id < 10 OR id >= 290").mustSucceed(t)
			t.Logf("deleter: deleted %d rows as version %d, published %v", del.Rows, del.Version, del.Published)
			if del.Version != pub0+1 || del.Rows != 20 || !del.Published {
				t.Fatalf("deleter: %+v, want 20 rows deleted as version %d, published", del, pub0+1)
			}
			f.release(rel)
			res := comp.mustSucceed(t)
			how := "rebased"
			if res.Attempts > 1 {
				how = "replanned"
			}
			t.Logf("compaction %s: attempts %d, read version %d, committed version %d, rebased over %v, rows rewritten %d, published %v",
				how, res.Attempts, res.ReadVersion, res.Version, res.Rebased, res.Rows, res.Published)
			if res.Version <= del.Version || !res.Published {
				t.Fatalf("compaction: %+v, want a published version above the delete's %d", res, del.Version)
			}
			if res.Attempts > 1 && res.TxnID == firstTxn {
				t.Fatalf("replanned but committed the first attempt's transaction %s", firstTxn)
			}
			want := merged(before)
			want = diff(want, merged(ids(0, 10), ids(290, 300)))
			equalRows(t, "rows after", f.rows(), want)
			if res.Rows != int64(len(want)) {
				t.Fatalf("compaction rewrote %d rows, want %d live rows (a deleted row was copied?)", res.Rows, len(want))
			}
			head, p := f.head(), f.published()
			if p != head.Version || p != res.Version || head.Txn.Op.Kind != manifest.OpRewrite {
				t.Fatalf("published %d, HEAD %d (%v): want both the compaction's %d", p, head.Version, head.Txn.Op.Kind, res.Version)
			}
			for _, fr := range head.Fragments {
				if fr.Deletion != nil {
					t.Logf("HEAD fragment %d keeps a deletion vector (%d rows)", fr.ID, fr.PhysicalRows)
				}
			}
			if sc := f.sidecars(); len(sc) != 0 {
				t.Fatalf("sidecars left: %+v", sc)
			}
			f.noOrphanFiles()
			f.verifyOK()
		})
	}
}

// TestDeleteOutsidePlanRebases (scenario 2, the disjoint case): the table has one large
// fragment (not compacted: it is at the target size) and five small ones. Our compaction
// child is held after writing its new fragments; a deleter child deletes rows of the
// large fragment only; then the compaction is released. A delete of fragments the plan
// does not rewrite does not conflict: the compaction rebases over it in its first
// attempt, and both the deletion and the compacted rows survive.
func TestDeleteOutsidePlanRebases(t *testing.T) {
	f := newFixtureSizes(t, storetest.Local(t), targetRows, 50, 50, 50, 50, 50)
	before, pub0 := f.rows(), f.published()
	rel := f.releaseFile("compaction")
	comp := f.compactor("compactor", block("manifest.before_version_put", rel))
	f.waitFor("the compaction's sidecar", f.sidecarArmed, comp)
	f.waitFor("the compaction's transaction record", f.txnStored(f.sidecars()[0].Attempts[0].TxnID), comp)
	del := f.deleter("deleter", "", "id < 20").mustSucceed(t)
	t.Logf("deleter: deleted %d rows of the large fragment as version %d", del.Rows, del.Version)
	if del.Version != pub0+1 || del.Rows != 20 || !del.Published {
		t.Fatalf("deleter: %+v, want 20 rows deleted as version %d, published", del, pub0+1)
	}
	f.release(rel)
	res := comp.mustSucceed(t)
	t.Logf("compaction: attempts %d, read version %d, committed version %d, rebased over %v, rows rewritten %d",
		res.Attempts, res.ReadVersion, res.Version, res.Rebased, res.Rows)
	if res.Attempts != 1 || !slices.Contains(res.Rebased, del.Version) || res.Version != del.Version+1 {
		t.Fatalf("compaction: %+v, want one attempt rebased over the delete's version %d", res, del.Version)
	}
	if res.Rows != 250 {
		t.Fatalf("compaction rewrote %d rows, want the 250 of the small fragments", res.Rows)
	}
	equalRows(t, "rows after", f.rows(), diff(before, ids(0, 20)))
	if p, h := f.published(), f.head().Version; p != h || p != res.Version {
		t.Fatalf("published %d, HEAD %d, want the compaction's %d", p, h, res.Version)
	}
	if sc := f.sidecars(); len(sc) != 0 {
		t.Fatalf("sidecars left: %+v", sc)
	}
	f.noOrphanFiles()
	f.verifyOK()
}
