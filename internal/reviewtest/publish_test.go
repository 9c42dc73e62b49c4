package reviewtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/recovery"
)

// runResult is what an in-process compaction run returned.
type runResult struct {
	st   compaction.Stats
	err  error
	took time.Duration
}

// inProcessCompaction returns an executor (sidecars on) whose etcd client goes through a
// fault wrapper, so the test can break its publish while writers in other processes
// publish through a healthy etcd.
func (f *fixture) inProcessCompaction(publishTimeout time.Duration) (*compaction.Executor, *faults.EtcdKV) {
	f.t.Helper()
	ctx := context.Background()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: enginetest.Etcd().Endpoints()})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cli.Close() })
	kv := faults.WrapKV(cli.Etcd(), faults.NewSeed(f.t))
	db, err := engine.Open(ctx, f.s, engine.Options{Etcd: cli.Etcd()})
	if err != nil {
		f.t.Fatal(err)
	}
	e := recovery.Enable(compaction.New(db))
	e.PublishTimeout = publishTimeout
	return e, kv
}

// TestPublishBudgetRunsOutPastOurVersion (scenario 4; B2): the in-process compaction
// commits and is held; a writer in another process commits on top of it; then every
// pointer write of the compaction's publish is broken (etcd faults) while the writer
// publishes past our version. The compaction's postcondition (the pointer includes its
// version) holds, so Run must report success, remove its sidecar and leave nothing for
// recovery.
//
//   - writer-published-first: the writer publishes before our publish starts; every write
//     we would make is dropped, so success can come only from reading the pointer.
//   - publish-times-out: our pointer write hangs (never sent) until PublishTimeout; the
//     writer publishes while it hangs. When the time budget runs out the pointer is past
//     our version.
func TestPublishBudgetRunsOutPastOurVersion(t *testing.T) {
	cases := []struct {
		name  string
		kind  faults.Kind
		first bool // the writer publishes before our publish starts
	}{
		{"writer-published-first", faults.DropRequest, true},
		{"publish-times-out", faults.Hang, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, storetest.Local(t), 6, 50)
			before, pub0 := f.rows(), f.published()
			const publishTimeout = 3 * time.Second // the writer publishes well within it; the test checks that it did
			e, kv := f.inProcessCompaction(publishTimeout)

			hold := make(chan struct{})
			var releaseOnce sync.Once
			releaseRun := func() { releaseOnce.Do(func() { close(hold) }) }
			off := failpoint.Enable("compaction.after_commit", failpoint.BlockUntilClosed(hold))
			defer off()
			defer releaseRun() // never leave the run blocked when the test fails early
			done := make(chan runResult, 1)
			go func() {
				start := time.Now()
				st, err := e.Run(context.Background(), f.table, compaction.Options{TargetRows: targetRows})
				done <- runResult{st, err, time.Since(start)}
			}()
			ours := pub0 + 1
			ran := func() bool {
				select {
				case r := <-done:
					done <- r
					return true
				default:
					return false
				}
			}
			f.waitFor("the compaction's commit", func() bool { return ran() || f.headIs(ours)() })
			if ran() {
				r := <-done
				t.Fatalf("compaction ended before it was held: %+v %v", r.st, r.err)
			}
			relW := f.releaseFile("writer")
			writer := f.appender("writer", block("engine.before_publish", relW), 1000, 40)
			theirs := ours + 1
			f.waitFor("the writer's commit", f.headIs(theirs), writer)

			rule := kv.Add(faults.EtcdRule{Name: "compaction-publish", Ops: []faults.EtcdOp{faults.EtcdTxn},
				WritesOnly: true, Key: f.db.Catalog().Key(f.table), Kind: c.kind})
			if c.first {
				f.release(relW)
				w := writer.mustSucceed(t)
				if w.Version != theirs || !w.Published {
					t.Fatalf("writer: %+v, want version %d published", w, theirs)
				}
				releaseRun()
			} else {
				releaseRun()
				f.waitFor("the compaction's publish to hang", func() bool { return rule.Injected() > 0 || ran() })
				if ran() {
					r := <-done
					t.Fatalf("compaction ended before its pointer write: %+v %v", r.st, r.err)
				}
				f.release(relW)
				w := writer.mustSucceed(t)
				if w.Version != theirs || !w.Published {
					t.Fatalf("writer: %+v, want version %d published", w, theirs)
				}
				if ran() {
					t.Fatalf("the compaction's publish ended before the writer published past it: raise publishTimeout (%v)", publishTimeout)
				}
			}
			var r runResult
			select {
			case r = <-done:
			case <-time.After(childTimeout):
				t.Fatalf("compaction did not end within %v", childTimeout)
			}
			p := f.published()
			t.Logf("compaction: version %d, published %v, took %v, err %v; pointer %d (ours %d, writer's %d); faults injected %d: %+v",
				r.st.Version, r.st.Published, r.took.Round(time.Millisecond), r.err, p, ours, theirs, rule.Injected(), kv.Injections())
			if r.st.Version != ours {
				t.Fatalf("compaction committed version %d, want %d", r.st.Version, ours)
			}
			if p < ours {
				t.Fatalf("pointer %d is below our version %d", p, ours)
			}
			if r.err != nil || !r.st.Published {
				t.Fatalf("Run: published %v, err %v; want success (pointer %d ≥ our version %d)", r.st.Published, r.err, p, ours)
			}
			// The compaction's catalog remembers the pointer from before the writer moved
			// it, so its publish may send its guarded write first (one round trip when
			// nobody raced: catalog.lastSeen). That write compares the older mod
			// revision and cannot land; the publish then decides on the pointer as it is.
			// What must hold is that the writer's pointer was left in place.
			if c.first && p != theirs {
				t.Fatalf("pointer %d after the compaction's publish, want the writer's %d left in place (%d guarded writes attempted)", p, theirs, rule.Injected())
			}
			if sc := f.sidecars(); len(sc) != 0 {
				t.Fatalf("sidecars left after a successful run: %+v", sc)
			}
			equalRows(t, "rows", f.rows(), merged(before, ids(1000, 1040)))
			f.verifyOK()
			f.noOrphanFiles()
			if rep := f.recover(); len(rep.Outcomes) != 0 {
				t.Fatalf("recover acted after a successful run: %+v", rep)
			}
		})
	}
}
