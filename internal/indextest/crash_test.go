package indextest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// buildSeams are the seams an index build passes after its sidecar is stored, in order,
// with what Recover must do after a SIGKILL there and whether it deletes objects.
var buildSeams = []struct {
	seam    string
	kinds   []string // the builds that pass it
	action  string
	deletes bool
}{
	{"engine.index_read", []string{"btree", "zonemap"}, recovery.RolledBack, false},                // sidecar stored, nothing read
	{"engine.index_read=after(7)->kill", []string{"btree", "zonemap"}, recovery.RolledBack, false}, // mid-read
	{"fragment.encode_batch", []string{"btree"}, recovery.RolledBack, false},                       // encoding the pages
	{"fragment.encode_batch=after(1)->kill", []string{"btree"}, recovery.RolledBack, false},        // a page encoded
	{"engine.index_commit", []string{"btree", "zonemap"}, recovery.RolledBack, true},               // objects stored
	{"manifest.before_txn_put", []string{"btree", "zonemap"}, recovery.RolledBack, true},           // committing
	{"manifest.before_version_put", []string{"btree", "zonemap"}, recovery.RolledBack, true},       // its transaction record stored
	{"manifest.after_version_put", []string{"btree", "zonemap"}, recovery.RolledForward, false},    // committed
	{"engine.before_publish", []string{"btree", "zonemap"}, recovery.RolledForward, false},         // committed, not published
	{"engine.after_publish", []string{"btree", "zonemap"}, recovery.AlreadyPublished, false},       // published, sidecar not removed
}

// TestIndexBuildCrashAtEverySeam kills a child building an index (SIGKILL) at each seam,
// expires its hold as etcd would, and runs Recover: the build is rolled forward when it
// committed and rolled back (fenced, its objects deleted) otherwise; verify passes; no
// sidecar is left and no object under _indices/ is left that no version names; answers
// are unchanged, with the indexes forced and without them; a second Recover does
// nothing.
func TestIndexBuildCrashAtEverySeam(t *testing.T) {
	var names []string
	for _, c := range buildSeams {
		names = append(names, c.seam)
	}
	t.Logf("crash seams (%d): %s", len(names), strings.Join(names, ", "))
	ran := 0
	for _, c := range buildSeams {
		for _, kind := range c.kinds {
			b := btreeK
			if kind == "zonemap" {
				b = zonesIDK
			}
			spec := c.seam
			if !strings.Contains(spec, "=") {
				spec += "=kill"
			}
			t.Run(kind+"/"+c.seam, func(t *testing.T) {
				ctx := context.Background()
				f := newFixture(t)
				preds := f.predicates(25)
				before := answers(t, "before", f.table(), preds)
				if _, killed := start(t, f.s, "t", b, spec).wait(t); !killed {
					t.Fatalf("the build was not killed at %s", spec)
				}
				enginetest.ExpireHolds(t, f.db, "t")
				pending, err := recovery.PendingSidecars(ctx, f.s, "t")
				if err != nil || len(pending) != 1 || pending[0].Sidecar.Kind != recovery.KindIndex {
					t.Fatalf("after the kill: sidecars %+v %v; want the build's", pending, err)
				}
				txn := pending[0].Sidecar.Attempts[0].TxnID
				rep, err := recovery.Recover(ctx, f.s, f.db.Catalog(), "", recovery.Options{MinAge: -1})
				if err != nil || len(rep.Outcomes) != 1 {
					t.Fatalf("recover: %+v %v", rep, err)
				}
				o := rep.Outcomes[0]
				if o.Action != c.action || (len(o.DeletedFiles) > 0) != c.deletes {
					t.Fatalf("recover: %+v; want %s, deletions %v", o, c.action, c.deletes)
				}
				after := f.table()
				head, err := manifest.LoadHead(ctx, f.s, "t")
				if err != nil {
					t.Fatal(err)
				}
				if after.Version() != head.Version {
					t.Fatalf("published v%d, HEAD v%d", after.Version(), head.Version)
				}
				if c.action == recovery.RolledBack {
					if len(after.Manifest().Indexes) != 0 || head.Txn.Op.Kind != manifest.OpAbort || !slices.Contains(head.Txn.Op.Aborted, txn) {
						t.Fatalf("after roll back: indexes %+v, HEAD %s %v; want none, and the abort naming %s", after.Manifest().Indexes, head.Txn.Op.Kind, head.Txn.Op.Aborted, txn)
					}
				} else if cov := coverage(after); !slices.Equal(cov[b.name], fragmentIDs(after)) || o.Version == 0 {
					t.Fatalf("after roll forward (v%d): coverage %v of %v", o.Version, cov, fragmentIDs(after))
				}
				got := answers(t, "after recover", after, preds)
				for _, p := range preds {
					if !slices.Equal(got[p], before[p]) {
						t.Fatalf("%q: %d rows, %d before", p, len(got[p]), len(before[p]))
					}
				}
				f.checkSound()
				if rep, err := recovery.Recover(ctx, f.s, f.db.Catalog(), "", recovery.Options{MinAge: -1}); err != nil || len(rep.Outcomes) != 0 {
					t.Fatalf("second recover: %+v %v", rep, err)
				}
				ran++
			})
		}
	}
	t.Logf("crash cases run: %d", ran)
}

// TestRecoverOfIndexBuildCrashAtEverySeam: the recovery of a crashed index build is
// itself killed (SIGKILL) at each of its seams, then run again (the dead recovery's
// claim taken over): the table ends as a single uninterrupted recovery leaves it.
func TestRecoverOfIndexBuildCrashAtEverySeam(t *testing.T) {
	cases := []struct{ buildSeam, recoverSeam, action string }{
		{"engine.index_commit", "recovery.after_claim", recovery.RolledBack},
		{"engine.index_commit", "recovery.before_fence", recovery.RolledBack},
		{"engine.index_commit", "recovery.after_fence", recovery.RolledBack},
		{"engine.index_commit", "recovery.mid_delete", recovery.RolledBack},
		{"engine.index_commit", "recovery.before_sidecar_delete", recovery.RolledBack},
		{"engine.before_publish", "recovery.after_publish", recovery.AlreadyPublished},
		{"engine.before_publish", "recovery.before_sidecar_delete", recovery.AlreadyPublished},
	}
	for _, c := range cases {
		t.Run(c.buildSeam+"/"+c.recoverSeam, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			preds := f.predicates(20)
			before := answers(t, "before", f.table(), preds)
			if _, killed := start(t, f.s, "t", btreeK, c.buildSeam+"=kill").wait(t); !killed {
				t.Fatalf("the build was not killed at %s", c.buildSeam)
			}
			enginetest.ExpireHolds(t, f.db, "t")
			if _, killed := startMode(t, f.s, "recover", "t", btreeK, c.recoverSeam+"=kill").wait(t); !killed {
				t.Fatalf("the recovery was not killed at %s", c.recoverSeam)
			}
			rep, err := recovery.Recover(ctx, f.s, f.db.Catalog(), "", recovery.Options{MinAge: -1, ClaimTTL: time.Nanosecond})
			if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != c.action {
				t.Fatalf("recover again: %+v %v; want %s", rep, err, c.action)
			}
			after := f.table()
			if (c.action == recovery.RolledBack) != (len(after.Manifest().Indexes) == 0) {
				t.Fatalf("indexes %+v after %s", after.Manifest().Indexes, c.action)
			}
			got := answers(t, "after recover", after, preds)
			for _, p := range preds {
				if !slices.Equal(got[p], before[p]) {
					t.Fatalf("%q: %d rows, %d before", p, len(got[p]), len(before[p]))
				}
			}
			f.checkSound()
			if rep, err := recovery.Recover(ctx, f.s, f.db.Catalog(), "", recovery.Options{MinAge: -1}); err != nil || len(rep.Outcomes) != 0 {
				t.Fatalf("third recover: %+v %v", rep, err)
			}
		})
	}
}

// TestWriteRollsForwardUnpublishedBuild: a build killed after its commit and before its
// publish is published by the next write through recovery.Hook (as every CLI write
// runs), which also removes its sidecar; the index then answers queries.
func TestWriteRollsForwardUnpublishedBuild(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, killed := start(t, f.s, "t", btreeK, "engine.before_publish=kill").wait(t); !killed {
		t.Fatal("the build was not killed")
	}
	enginetest.ExpireHolds(t, f.db, "t")
	if len(f.table().Manifest().Indexes) != 0 {
		t.Fatal("the build is published")
	}
	db := enginetest.OpenDB(t, f.s, engine.Options{BeforeFirstWrite: recovery.Hook(recovery.Options{})})
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	f.appendRows(tbl, 10_000, 100, 0)
	after := f.table()
	if cov := coverage(after); len(cov[btreeK.name]) != 4 || len(after.Manifest().Fragments) != 5 {
		t.Fatalf("coverage %v of %v; want the build over the first 4 fragments", cov, fragmentIDs(after))
	}
	answers(t, "after the write", after, f.predicates(20))
	f.checkSound()
}
