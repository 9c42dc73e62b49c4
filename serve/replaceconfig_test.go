package serve_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve"
)

// passCounter is a recorder that counts planning passes.
type passCounter struct {
	*recorder
	passes atomic.Int64
}

func (p *passCounter) ObservePass(time.Duration, int64) { p.passes.Add(1) }

// TestLeaderFollowsReplacedPassInterval: a config replaced in etcd by another process
// (--replace-config) is followed by the process already leading: after its current
// interval ends, it plans at the stored pass interval (a trial saw a running leader keep
// its own 5 s while etcd said 2 s).
func TestLeaderFollowsReplacedPassInterval(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	cfg := fastConfig()
	cfg.PassInterval = 2 * time.Second
	m := &passCounter{recorder: newRecorder()}
	s, err := serve.New(ctx, db, serve.Options{ID: "a", Config: cfg, Logger: quietLog(), Metrics: m,
		Recovery: recovery.Options{MinAge: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	waitFor(t, "a leads and plans", func() bool { return s.IsLeader() && m.passes.Load() >= 1 })
	fast := cfg
	fast.PassInterval = 50 * time.Millisecond
	if _, err := s.State().EnsureConfig(ctx, fast, true); err != nil {
		t.Fatal(err)
	}
	// Within the old interval plus a pass the leader has switched: 20 passes then take
	// about a second, where the old interval would need 40 s.
	deadline := time.Now().Add(20 * time.Second)
	from := m.passes.Load()
	for m.passes.Load() < from+20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d passes in 20 s after the pass interval was replaced with 50ms", m.passes.Load()-from)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
