package demand

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// waitUntil waits for cond with a deadline (a bounded poll of an in-memory condition).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for d := time.Millisecond; !cond(); d = min(2*d, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(d)
	}
}

// Offered events are published detached, and none is lost: events that wait for a slot
// are joined per shard. Every event is counted once, and the stored records are exactly
// the join of every event offered.
func TestPublisherPublishesDetached(t *testing.T) {
	r := newRecords(t)
	p := NewPublisher(r, PublisherOptions{Slots: 3, OnResult: func(res Result) {
		if res.Err != nil {
			t.Errorf("publish %+v: %v", res.Event, res.Err)
		}
	}})
	var all []Event
	const n = 60
	for g := uint64(1); g <= n; g++ {
		for _, sh := range []string{"a", "b"} {
			e := ev(sh, g, none, 1, W)
			all = append(all, e)
			p.Publish("t", e)
			if g%3 == 0 {
				m := MergedEvent(sh, g-2, 0, 5)
				all = append(all, m)
				p.Publish("t", m)
			}
		}
	}
	p.Close(testCtx(t))
	st := p.Stats()
	if total := st.Written + st.Unchanged + st.Coalesced + st.Failed + st.TimedOut + st.Dropped; total != uint64(len(all)) ||
		st.Failed != 0 || st.TimedOut != 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v: want %d events counted, none failed or dropped", st, len(all))
	}
	want := storeJoin(t, all...)
	for _, sh := range []string{"a", "b"} {
		got, _ := getRecord(t, r, "t", sh)
		sameShards(t, "stored vs the join of every event", rebuild(t, map[string]Event{sh: want[sh]}), rebuild(t, map[string]Event{sh: got}))
	}
	t.Logf("stats %+v", st)
	// Closed: later events are dropped, never run.
	p.Publish("t", ev("a", 1000, none, 1, W))
	if p.Stats().Dropped != 1 {
		t.Fatalf("after Close: %+v", p.Stats())
	}
}

// While every slot is busy, events for a waiting shard are joined into it, a new shard
// waits while fewer than MaxPending do, and beyond that events are dropped and counted at
// once: Publish never waits for a slot.
func TestPublisherDropsWhenFull(t *testing.T) {
	r := newRecords(t)
	release := make(chan struct{})
	var mu sync.Mutex
	holding := 0
	p := NewPublisher(r, PublisherOptions{Slots: 2, MaxPending: 1, OnResult: func(Result) {
		mu.Lock()
		holding++
		mu.Unlock()
		<-release // hold the slot
	}})
	p.Publish("t", ev("a", 1, none, 1, W))
	p.Publish("t", ev("b", 1, none, 1, W))
	waitUntil(t, "both slots held", func() bool { mu.Lock(); defer mu.Unlock(); return holding == 2 })
	for g := uint64(2); g <= 9; g++ {
		p.Publish("t", ev("a", g, none, 1, W)) // 2 waits, 3..9 join it
	}
	p.Publish("t", ev("c", 1, none, 1, W)) // a second waiting shard: dropped
	p.Publish("t", ev("d", 1, none, 1, W))
	if st := p.Stats(); st.Written != 2 || st.Coalesced != 7 || st.Dropped != 2 {
		t.Fatalf("stats %+v, want 2 written, 7 coalesced, 2 dropped while the slots are held", st)
	}
	close(release)
	p.Close(testCtx(t))
	if st := p.Stats(); st.Written != 3 {
		t.Fatalf("stats %+v, want the waiting event written at Close", st)
	}
	a, _ := getRecord(t, r, "t", "a")
	if a.SealedThrough != 9 || len(a.SealedTimes) != 9 {
		t.Fatalf("record %s: want sealed 9 with the flush times of all 9 generations (joined, not dropped)", a.Encode())
	}
	for _, sh := range []string{"c", "d"} {
		if _, rev := getRecord(t, r, "t", sh); rev != 0 {
			t.Fatalf("dropped shard %s was published", sh)
		}
	}
}

// A publish to an etcd that never answers ends at the publisher's timeout and is counted
// as timed out; the caller never waits for it. Invalid events count as failed. A nil
// Publisher ignores everything.
func TestPublisherTimeoutAndFailures(t *testing.T) {
	hole, err := net.Listen("tcp", "127.0.0.1:0") // accepts connections (kernel backlog), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + hole.Addr().String()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var mu sync.Mutex
	var errs []error
	p := NewPublisher(New(cli, "/hole"), PublisherOptions{Timeout: 200 * time.Millisecond, OnResult: func(res Result) {
		mu.Lock()
		errs = append(errs, res.Err)
		mu.Unlock()
	}})
	p.Publish("t", ev("a", 1, none, 1, W))
	p.Publish("t", ev("", 1, none, 1, W))
	p.Close(testCtx(t))
	if st := p.Stats(); st.TimedOut != 1 || st.Failed != 1 || st.Written != 0 {
		t.Fatalf("stats %+v, want 1 timed out and 1 failed (%v)", st, errs)
	}
	invalid := 0
	for _, err := range errs {
		if errors.Is(err, ErrInvalid) {
			invalid++
		}
	}
	if invalid != 1 {
		t.Fatalf("results %v, want one ErrInvalid", errs)
	}
	var nilp *Publisher
	nilp.Publish("t", ev("a", 1, none, 1, W))
	nilp.PublishMerged("t", "a", 1, 0)
	nilp.Close(testCtx(t))
	if nilp.Stats() != (PublisherStats{}) {
		t.Fatal("nil publisher counted something")
	}
}

// Close gives up at its context's end: what still waits is dropped, the publishes in
// flight are cancelled, and Close returns once they have returned (not after Timeout).
func TestPublisherCloseGivesUp(t *testing.T) {
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + hole.Addr().String()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	p := NewPublisher(New(cli, "/hole"), PublisherOptions{Slots: 1, Timeout: time.Hour})
	p.Publish("t", ev("a", 1, none, 1, W)) // in flight, never answered
	p.Publish("t", ev("b", 1, none, 1, W)) // waits
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	p.Close(ctx)
	if st := p.Stats(); st.Failed != 1 || st.Dropped != 1 {
		t.Fatalf("stats %+v, want the cancelled publish failed and the waiting one dropped", st)
	}
}
