package servetest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/admin"
)

// TestLostPlacementReplyIsDecidedByAssignmentID: a placement transaction that etcd
// applied but whose reply was lost is decided by reading the slot for the assignment's
// id (state.Place), never inferred from the error: it counts as
// shale_serve_placements_total{result="placed"}, so placed equals the assignments etcd
// holds and nothing counts as an error.
func TestLostPlacementReplyIsDecidedByAssignmentID(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	createTable(t, e, "w", 1, false)
	l := &ledger{attempted: map[int64]bool{}, acked: map[int64]bool{}}
	appendGens(t, e.db, "w", 0, 5, 2, l)

	st := serve.StateOf(e.db)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	rev, err := st.Client().Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	created := make(chan struct{}, 100)
	wch := st.Client().Watch(wctx, st.Keys().Assignments(), clientv3.WithPrefix(), clientv3.WithRev(rev.Header.Revision+1))
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				if ev.IsCreate() {
					created <- struct{}{}
				}
			}
		}
	}()

	c, err := coord.Connect(ctx, coord.Config{Endpoints: enginetest.Etcd().Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kv := faults.WrapKV(c.Etcd(), faults.NewSeed(t))
	// Only the placement transaction puts the history key: its first reply is lost.
	h := kv.Add(faults.EtcdRule{Ops: []faults.EtcdOp{faults.EtcdTxn}, Key: "*/serve/history/*", WritesOnly: true,
		Kind: faults.DropResponse, Times: 1})
	opts := dbOptions(e.s, e.prefix)
	opts.Etcd = c.Etcd()
	db, err := engine.Open(ctx, e.s, opts)
	if err != nil {
		t.Fatal(err)
	}
	m := admin.NewMetrics()
	cfg := serveConfig(e.serveChild("k1", nil))
	s, err := serve.New(ctx, db, serve.Options{ID: "k1", Config: cfg, Logger: quietLog(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := admin.NewServer("127.0.0.1:0", s, m, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	waitFor(t, 30*time.Second, "w merged and quiet", func() bool {
		_, ok := quiet(ctx, e.db, "w")
		return ok && mergedWatermark(t, e.db, "w") == 2
	})
	if h.Injected() != 1 {
		t.Fatalf("%d lost placement replies, want 1", h.Injected())
	}
	wcancel()
	n := len(created)
	got := scrape(t, "http://"+srv.Addr()+"/metrics")
	placed, failed := got[`shale_serve_placements_total{result="placed"}`], got[`shale_serve_placements_total{result="error"}`]
	if int(placed) != n || failed != 0 {
		t.Fatalf("%d assignments created in etcd, placements_total{placed} %v, {error} %v", n, placed, failed)
	}
}
