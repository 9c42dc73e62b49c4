package servetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/state"
)

// passCounter is a serve.Metrics that counts planning passes.
type passCounter struct {
	passes atomic.Int64
}

func (*passCounter) ObserveScheduleToBind(string, time.Duration) {}
func (*passCounter) ObserveTurnWait(string, time.Duration)       {}
func (*passCounter) Placement(string)                            {}
func (*passCounter) SetBacklog(map[string]int)                   {}
func (*passCounter) Execution(string, string)                    {}
func (*passCounter) SetRunning(string, int)                      {}
func (*passCounter) Stall(string)                                {}
func (*passCounter) Recovery(string)                             {}
func (*passCounter) SetLeader(bool)                              {}
func (p *passCounter) ObservePass(time.Duration, int64)          { p.passes.Add(1) }
func (*passCounter) SetTopTables(map[string]uint64)              {}

// TestNoRecoverForLiveSidecar: while a table's compaction runs (its recovery sidecar
// armed), no pass places a recover unit on the table for that sidecar (it belongs to a
// running assignment: recovering it would take the write turn for nothing, or with a
// small MinAge roll back live work). The temporary gather stub counted such sidecars
// as pending, and the bounded run saw 120-220 recover executions in 20 s; package
// serve/gather leaves them out.
func TestNoRecoverForLiveSidecar(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	createTable(t, e, "c", 1, false)
	tc, err := e.db.OpenTable(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		rec := batch(int64(i*10), 10, "parent")
		_, err := tc.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	defer release()
	t.Cleanup(failpoint.Enable("compaction.write_batch", failpoint.BlockUntilClosed(hold).Once()))

	st := serve.StateOf(e.db)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var recovers atomic.Int64
	wch := st.Client().Watch(wctx, st.Keys().Assignment("c", state.SlotTurn), clientv3.WithFilterDelete())
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				if a, err := state.DecodeAssignment(ev.Kv.Value); err == nil && ev.IsCreate() && a.Kind == "recover" {
					recovers.Add(1)
				}
			}
		}
	}()
	m := &passCounter{}
	cfg := serveConfig(e.serveChild("k1", nil))
	cfg.IdleTimeout = time.Minute
	s, err := serve.New(ctx, e.db, serve.Options{ID: "k1", Config: cfg, Logger: quietLog(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { release(); s.Close(ctx) }() // the held compaction must end first
	waitFor(t, 30*time.Second, "the compaction held with its sidecar armed", func() bool {
		return failpoint.Hits("compaction.write_batch") > 0 && pendingSidecars(t, e.db, "c") == 1
	})
	from := m.passes.Load()
	waitFor(t, 30*time.Second, "ten passes while the compaction runs", func() bool { return m.passes.Load() >= from+10 })
	if n := recovers.Load(); n > 0 {
		t.Fatalf("%d recover units placed on c while its only sidecar belongs to its running compaction", n)
	}
	release()
}
