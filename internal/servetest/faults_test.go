package servetest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/plan"
)

// TestEtcdFaultsDuringPlacementAndRelease runs two serve servers (goroutines of this
// process, each with its own etcd client) on an etcd of its own whose replies to
// assignment and ledger writes are lost after etcd applied them (placement, bind,
// progress and release transactions), and which is restarted in the middle of a
// placement and of a release. No slot is ever worked twice at once, no assignment is
// bound by two executors, every assignment ends, and all the work gets done: the
// backlog merged exactly once, the tables quiet.
func TestEtcdFaultsDuringPlacementAndRelease(t *testing.T) {
	ctx := context.Background()
	etcdDir := t.TempDir()
	ed, err := coord.StartEmbedded(etcdDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ed.Close)
	connect := func() *coord.Client {
		c, err := coord.Connect(ctx, coord.Config{Endpoints: ed.Endpoints()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	s := storetest.Local(t)
	prefix := "/servetest/faults"
	open := func(c *coord.Client) *engine.DB {
		opts := dbOptions(s, prefix)
		opts.Etcd = c.Etcd()
		db, err := engine.Open(ctx, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	// The parent's DB has a clean client.
	e := &env{s: s, prefix: prefix, db: open(connect()), dir: t.TempDir()}
	tables := []string{"f1", "f2", "f3"}
	ledgers := map[string]*ledger{}
	for i, tb := range tables {
		createTable(t, e, tb, 1, false)
		ledgers[tb] = &ledger{attempted: map[int64]bool{}, acked: map[int64]bool{}}
		ledgers[tb].add(-1, 1)
		appendGens(t, e.db, tb, int64(i)*1_000_000, 3, 4, ledgers[tb])
	}

	seed := faults.NewSeed(t)
	var kvs []*faults.EtcdKV
	var handles []*faults.Handle
	var servers []*serve.Server
	for i, id := range []string{"x1", "x2"} {
		c := connect()
		kv := faults.WrapKV(c.Etcd(), seed+uint64(i))
		kvs = append(kvs, kv)
		// The first write to any assignment key of each kind of transaction is lost
		// after it landed, then a fifth of them at random; a few ledger writes too.
		handles = append(handles,
			kv.Add(faults.EtcdRule{Name: id + "-assign-first", Ops: []faults.EtcdOp{faults.EtcdTxn}, Key: "*/serve/assign/*",
				WritesOnly: true, Kind: faults.DropResponse, Times: 4}),
			kv.Add(faults.EtcdRule{Name: id + "-assign-random", Ops: []faults.EtcdOp{faults.EtcdTxn}, Key: "*/serve/assign/*",
				WritesOnly: true, Kind: faults.DropResponse, Probability: 0.2}))
		f, err := os.Create(filepath.Join(e.dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cfg := e.serveChild(id, nil)
		srv, err := serve.New(ctx, open(c), serve.Options{ID: id, Config: serveConfig(cfg),
			Logger: slog.New(slog.NewJSONHandler(&syncBuffer{f: f}, nil)), Recovery: plan0Recovery()})
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, srv)
	}
	// etcd restarts in the middle of the first placement, then of the first release.
	place := faults.RestartEtcdAt(ed, "serve.before_place", faults.RestartOptions{Down: 300 * time.Millisecond})
	defer place.Cancel()
	for _, srv := range servers {
		if err := srv.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer srv.Close(ctx)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := place.Wait(wctx); err != nil {
		t.Fatalf("etcd restart at a placement: %v", err)
	}
	release := faults.RestartEtcdAt(ed, "serve.before_release", faults.RestartOptions{Down: 300 * time.Millisecond})
	defer release.Cancel()
	if err := release.Wait(wctx); err != nil {
		t.Fatalf("etcd restart at a release: %v", err)
	}
	// More work after the restarts.
	for i, tb := range tables {
		appendGens(t, e.db, tb, int64(i)*1_000_000+500_000, 3, 3, ledgers[tb])
	}
	waitFor(t, 90*time.Second, "every table quiet", func() bool {
		for _, tb := range tables {
			if _, ok := quiet(ctx, e.db, tb); !ok {
				return false
			}
		}
		return true
	})
	for _, srv := range servers {
		if err := srv.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	injected := 0
	for _, h := range handles {
		injected += h.Injected()
	}
	if injected == 0 {
		t.Fatal("no lost reply was injected")
	}

	// Every table's rows exactly once, every generation merged once, verify clean.
	for _, tb := range tables {
		checkOnce(t, e.db, tb, ledgers[tb])
		checkWatermarks(t, e.db, tb)
		if w := mergedWatermark(t, e.db, tb); w != 7 {
			t.Fatalf("table %s: merged watermark %d, want 7", tb, w)
		}
		checkVerify(t, e.db, tb)
	}
	// No assignment bound by two executors, none worked twice at once, each ended.
	var execs []execution
	byAssignment := map[string]map[string]bool{}
	for _, id := range []string{"x1", "x2"} {
		es, _, err := readExecutions(e.dir, id, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range es {
			if byAssignment[x.Assignment] == nil {
				byAssignment[x.Assignment] = map[string]bool{}
			}
			byAssignment[x.Assignment][id] = true
		}
		execs = append(execs, es...)
	}
	for a, who := range byAssignment {
		if len(who) > 1 {
			t.Fatalf("assignment %s was bound by %v", a, who)
		}
	}
	checkNoOverlap(t, execs)
	checkNoOverlapPrep(t, execs)
	phases := map[string]int{}
	for _, x := range execs {
		phases[string(x.Kind)+"/"+x.Phase]++
	}
	var lost []string
	for _, kv := range kvs {
		for _, in := range kv.Injections() {
			lost = append(lost, in.Rule)
		}
	}
	t.Logf("%d lost replies (%v); executions %v", injected, lost, phases)
	snap, err := serve.StateOf(e.db).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Assignments) != 0 {
		t.Fatalf("assignments left after both servers drained: %+v", snap.Assignments)
	}
}

// checkNoOverlapPrep checks that no two executions of one table's preparation slot
// (compact, index) overlapped.
func checkNoOverlapPrep(t *testing.T, execs []execution) {
	t.Helper()
	var prep []execution
	for _, x := range execs {
		if !plan.TakesWriteTurn(x.Kind) {
			x.Kind = plan.KindMergeWAL // the same check, on the preparation slot
			prep = append(prep, x)
		}
	}
	checkNoOverlap(t, prep)
}

// plan0Recovery is the recovery options of in-process servers: sidecars act at once.
func plan0Recovery() recovery.Options { return recovery.Options{MinAge: time.Millisecond} }
