package reviewtest

import (
	"context"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// TestConflictAfterCommitKeepsSidecar (scenario 3; B1): our compaction child commits its
// rewrite and is held; a writer child commits on top of it (publishing, or killed before
// its publish); then our publish fails (an injected error) or our process is killed
// before it. Our committed work must not be treated as external drift: the sidecar stays
// (naming our transaction, one attempt: no replan) until Recover runs, and Recover rolls
// forward OUR version (or finds it already published), never reporting, publishing or
// deleting the other writer's version.
func TestConflictAfterCommitKeepsSidecar(t *testing.T) {
	cases := []struct {
		name         string
		compactSpec  string // after the after_commit hold
		writerSpec   string
		killed       bool // the compaction child dies (else it returns ErrNotPublished)
		writerPublic bool // the writer's version gets published
	}{
		{"killed-before-publish/writer-published", "compaction.before_publish=kill", "", true, true},
		{"killed-before-publish/writer-unpublished", "compaction.before_publish=kill", "engine.before_publish=kill", true, false},
		{"publish-fails/writer-unpublished", "compaction.before_publish=error(retryable conflict)", "engine.before_publish=kill", false, false},
		{"publish-fails/writer-published", "compaction.before_publish=error(retryable conflict)", "", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, storetest.Local(t), 6, 50)
			before, pub0 := f.rows(), f.published()
			rel := f.releaseFile("compaction")
			comp := f.compactor("compactor", spec(block("compaction.after_commit", rel), c.compactSpec))
			ours := pub0 + 1
			f.waitFor("the compaction's commit", f.headIs(ours), comp)
			ourTxn := f.load(ours).Txn.ID
			writer := f.appender("writer", c.writerSpec, 1000, 40)
			theirs := ours + 1
			if c.writerPublic {
				w := writer.mustSucceed(t)
				if w.Version != theirs || !w.Published {
					t.Fatalf("writer: %+v, want version %d published", w, theirs)
				}
			} else {
				writer.mustBeKilled(t)
			}
			if m := f.load(theirs); m.Txn.Op.Kind != manifest.OpAppend || m.Txn.ID == ourTxn {
				t.Fatalf("version %d: %v %s, want the writer's append", theirs, m.Txn.Op.Kind, m.Txn.ID)
			}
			f.release(rel)
			if c.killed {
				comp.mustBeKilled(t)
			} else {
				e := comp.wait(t)
				if e.code == 0 && c.writerPublic {
					// Also right (B2): the pointer is past our version, so a publish that
					// re-checks it after failing may report success and remove the
					// sidecar itself. Nothing is left for Recover.
					if !e.res.Published || e.res.Version != ours || f.published() < ours {
						t.Fatalf("compaction succeeded: %+v, pointer %d; want version %d published", e.res, f.published(), ours)
					}
					t.Logf("compaction succeeded although its publish failed: the pointer (%d) is past its version %d", f.published(), ours)
					if sc := f.sidecars(); len(sc) != 0 {
						t.Fatalf("sidecars after a successful run: %+v", sc)
					}
					equalRows(t, "rows published", f.rows(), merged(before, ids(1000, 1040)))
					f.afterRecover()
					return
				}
				if e.code != exitOpFailed || !e.res.NotPublished || e.res.Version != ours {
					t.Fatalf("compaction: code %d, %+v; want ErrNotPublished for version %d", e.code, e.res, ours)
				}
				t.Logf("compaction returned: %s", e.res.Err)
			}
			pubBefore := f.published()
			sc := f.sidecars()
			if len(sc) != 1 || len(sc[0].Attempts) != 1 || sc[0].Attempts[0].TxnID != ourTxn {
				t.Fatalf("sidecars before recover: %+v, want ours (one attempt, transaction %s)", sc, ourTxn)
			}
			t.Logf("before recover: ours v%d (txn %s), writer v%d, published %d, HEAD %d, sidecar %s",
				ours, ourTxn, theirs, pubBefore, f.head().Version, sc[0].OperationID)

			rep := f.recoverAfterKill()
			t.Logf("recover: %+v", rep.Outcomes)
			wantAction, wantPub := recovery.RolledForward, ours
			if pubBefore >= ours {
				wantAction, wantPub = recovery.AlreadyPublished, pubBefore
			}
			if len(rep.Outcomes) != 1 {
				t.Fatalf("recover: %+v, want one outcome", rep)
			}
			o := rep.Outcomes[0]
			if o.Action != wantAction || o.Version != ours || o.Operation != sc[0].OperationID {
				t.Fatalf("recover: %+v, want %s of our version %d (operation %s)", o, wantAction, ours, sc[0].OperationID)
			}
			if p := f.published(); p != wantPub {
				t.Fatalf("published %d after recover, want %d", p, wantPub)
			}
			if !c.writerPublic && f.published() == theirs {
				t.Fatalf("recover published the writer's version %d", theirs)
			}
			f.checkIntact(ctx, theirs, o.DeletedFiles)
			equalRows(t, "rows at the writer's version", f.rowsAt(theirs), merged(before, ids(1000, 1040)))
			equalRows(t, "rows at our version", f.rowsAt(ours), before)
			f.afterRecover()
		})
	}
}

// TestForeignUnpublishedCommit (scenario 5; B13): a writer child killed before its
// publish leaves a committed, unpublished version (foreign to our compaction), and a
// compaction child crash leaves a sidecar, in three orders. Recover must resolve only
// what the sidecar's transactions prove ours: never report the foreign version as ours,
// never delete its files or manifest; its rows stay readable at its version and the
// table verifies.
func TestForeignUnpublishedCommit(t *testing.T) {
	cases := []struct {
		name string
		// run leaves the crash state and returns our committed version (0: none) and the
		// foreign version.
		run        func(t *testing.T, f *fixture, pub0 uint64) (ours, foreign uint64)
		wantAction string
	}{
		{"foreign-then-compaction-killed-after-commit", func(t *testing.T, f *fixture, pub0 uint64) (uint64, uint64) {
			f.appender("writer", "engine.before_publish=kill", 1000, 40).mustBeKilled(t)
			f.compactor("compactor", "compaction.after_commit=kill").mustBeKilled(t)
			return pub0 + 2, pub0 + 1
		}, recovery.RolledForward},
		{"compaction-killed-before-commit-then-foreign", func(t *testing.T, f *fixture, pub0 uint64) (uint64, uint64) {
			f.compactor("compactor", "manifest.before_version_put=kill").mustBeKilled(t)
			f.appender("writer", "engine.before_publish=kill", 1000, 40).mustBeKilled(t)
			return 0, pub0 + 1
		}, recovery.RolledBack},
		{"foreign-while-compaction-held-then-killed-after-commit", func(t *testing.T, f *fixture, pub0 uint64) (uint64, uint64) {
			rel := f.releaseFile("compaction")
			comp := f.compactor("compactor", spec(block("manifest.before_version_put", rel), "compaction.after_commit=kill"))
			f.waitFor("the compaction's sidecar", f.sidecarArmed, comp)
			f.waitFor("the compaction's transaction record", f.txnStored(f.sidecars()[0].Attempts[0].TxnID), comp)
			f.appender("writer", "engine.before_publish=kill", 1000, 40).mustBeKilled(t)
			f.release(rel)
			comp.mustBeKilled(t)
			return pub0 + 2, pub0 + 1
		}, recovery.RolledForward},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, storetest.Local(t), 6, 50)
			before, pub0 := f.rows(), f.published()
			ours, foreign := c.run(t, f, pub0)
			fm := f.load(foreign)
			if fm.Txn.Op.Kind != manifest.OpAppend {
				t.Fatalf("foreign version %d is a %v, want the writer's append", foreign, fm.Txn.Op.Kind)
			}
			sc := f.sidecars()
			if len(sc) != 1 {
				t.Fatalf("sidecars: %+v, want one", sc)
			}
			var ourTxns []string
			for _, a := range sc[0].Attempts {
				ourTxns = append(ourTxns, a.TxnID)
			}
			if slices.Contains(ourTxns, fm.Txn.ID) {
				t.Fatalf("the sidecar names the foreign transaction %s", fm.Txn.ID)
			}
			if ours != 0 {
				if m := f.load(ours); !slices.Contains(ourTxns, m.Txn.ID) || m.Txn.Op.Kind != manifest.OpRewrite {
					t.Fatalf("version %d (%v, txn %s) is not the sidecar's rewrite %v", ours, m.Txn.Op.Kind, m.Txn.ID, ourTxns)
				}
			}
			t.Logf("before recover: published %d, HEAD %d, foreign v%d (txn %s), ours v%d, sidecar txns %v",
				f.published(), f.head().Version, foreign, fm.Txn.ID, ours, ourTxns)
			if p := f.published(); p != pub0 {
				t.Fatalf("published %d before recover, want %d", p, pub0)
			}

			rep := f.recoverAfterKill()
			t.Logf("recover: %+v", rep.Outcomes)
			if len(rep.Outcomes) != 1 {
				t.Fatalf("recover: %+v, want one outcome", rep)
			}
			o := rep.Outcomes[0]
			if o.Version == foreign {
				t.Fatalf("recover reported the foreign version %d as the operation's: %+v", foreign, o)
			}
			if o.Action != c.wantAction || o.Version != ours {
				t.Fatalf("recover: %+v, want %s of version %d", o, c.wantAction, ours)
			}
			for _, k := range o.DeletedFiles {
				if !underAny(k, sc[0].Attempts) {
					t.Fatalf("recover deleted %s, outside the sidecar's data prefixes", k)
				}
			}
			wantPub := pub0 // a rollback publishes nothing: the foreign version stays unpublished
			if ours != 0 {
				wantPub = ours // publishing ours publishes the history below it, foreign included
			}
			if p := f.published(); p != wantPub {
				t.Fatalf("published %d after recover, want %d", p, wantPub)
			}
			f.checkIntact(ctx, foreign, o.DeletedFiles)
			equalRows(t, "rows at the foreign version", f.rowsAt(foreign), merged(before, ids(1000, 1040)))
			if ours != 0 {
				equalRows(t, "rows at our version", f.rowsAt(ours), merged(before, ids(1000, 1040)))
			} else {
				equalRows(t, "rows published", f.rows(), before)
			}
			t.Logf("after recover: published %d, HEAD %d", f.published(), f.head().Version)
			f.afterRecover()
		})
	}
}

// checkIntact fails unless version v's manifest and every data file and deletion vector
// it references still exist, and none of them is among deleted.
func (f *fixture) checkIntact(ctx context.Context, v uint64, deleted []string) {
	f.t.Helper()
	m := f.load(v)
	var keys []string
	for _, fr := range m.Fragments {
		for _, df := range fr.Files {
			keys = append(keys, df.Key)
		}
		if fr.Deletion != nil {
			keys = append(keys, fr.Deletion.Key)
		}
	}
	for _, k := range keys {
		if slices.Contains(deleted, k) {
			f.t.Fatalf("recover deleted %s, referenced by version %d", k, v)
		}
		if _, err := f.s.Head(ctx, k); err != nil {
			f.t.Fatalf("version %d references %s: %v", v, k, err)
		}
	}
}

// afterRecover: no sidecar or claim is left, the table verifies, no data file is orphaned,
// and a second Recover does nothing.
func (f *fixture) afterRecover() {
	f.t.Helper()
	if left, err := f.s.List(context.Background(), recovery.Dir, 0); err != nil || len(left) != 0 {
		f.t.Fatalf("left under %s: %v %v", recovery.Dir, left, err)
	}
	f.verifyOK()
	f.noOrphanFiles()
	if rep := f.recover(); len(rep.Outcomes) != 0 {
		f.t.Fatalf("second recover: %+v", rep)
	}
}

func underAny(key string, as []recovery.Attempt) bool {
	return slices.ContainsFunc(as, func(a recovery.Attempt) bool { return strings.HasPrefix(key, a.DataPrefix) })
}

// recoverAfterKill runs Recover once every child of the test has ended. A killed
// compaction child leaves its catalog hold (the run's liveness, catalog.AcquireHold)
// until its lease expires (catalog.DefaultHoldTTL after the kill); while it is live,
// Recover must leave the sidecar alone (SkippedLive). The test checks that, then revokes
// the dead holders' leases, which is what their expiry does, rather than waiting out the
// TTL, and returns what Recover does next.
func (f *fixture) recoverAfterKill() recovery.Report {
	f.t.Helper()
	ctx := context.Background()
	holds, err := f.db.Catalog().Holds(ctx, f.table)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(holds) == 0 {
		return f.recover()
	}
	rep := f.recover()
	for _, o := range rep.Outcomes {
		if o.Action != recovery.SkippedLive {
			f.t.Fatalf("recover with the dead compaction's hold still live: %+v, want %s", o, recovery.SkippedLive)
		}
	}
	if len(f.sidecars()) == 0 {
		f.t.Fatalf("recover removed a sidecar whose operation holds a live hold")
	}
	f.t.Logf("recover while the killed child's hold is live: %+v", rep.Outcomes)
	cli := f.etcd()
	for _, h := range holds {
		key := f.db.Catalog().HoldKey(h.Table, h.ID)
		r, err := cli.Get(ctx, key)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, kv := range r.Kvs {
			if _, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
				f.t.Fatalf("revoke the lease of hold %s: %v", key, err)
			}
			f.t.Logf("expired hold %s (kind %s, holder %s, version %d) of the dead child", h.ID, h.Kind, h.Holder, h.Version)
		}
	}
	return f.recover()
}
