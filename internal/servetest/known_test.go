package servetest

import (
	"context"
	"os"
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

// TestKnownRecoverPlacedForLiveSidecar: while a table's compaction runs (its recovery
// sidecar armed), the planner's picture counts that sidecar as pending (PendingSidecars),
// so every pass places a recover unit on the table's write turn: with recovery's default
// MinAge it skips the young sidecar (skipped-young) and releases, and the next pass places
// it again, taking the write turn from merges for as long as the compaction runs (the
// bounded run saw 120-220 recover executions in 20 s, the metrics test recover units
// that recovered nothing). Skipped (known gap, reported to the coordinator) unless
// SHALE_KNOWN=1: the picture should leave out sidecars of work with a live assignment
// (or the planner should not place recover on a table whose only sidecars belong to its
// running assignments).
func TestKnownRecoverPlacedForLiveSidecar(t *testing.T) {
	if os.Getenv("SHALE_KNOWN") != "1" {
		t.Skip("known gap (see the comment); SHALE_KNOWN=1 runs it")
	}
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
	defer s.Close(ctx)
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
