package demand

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of PublisherOptions (lance-context §3.6: 4 slots, 15 s).
const (
	DefaultSlots      = 4
	DefaultTimeout    = 15 * time.Second
	DefaultMaxPending = 1024
)

// PublisherOptions configure a Publisher.
type PublisherOptions struct {
	// Slots bounds the publishes running at once (0: DefaultSlots).
	Slots int
	// Timeout bounds each publish, etcd retries included (0: DefaultTimeout).
	Timeout time.Duration
	// MaxPending bounds the shards whose events wait for a slot (0: DefaultMaxPending).
	// Events for a shard already waiting are joined into the waiting one, so this bounds
	// memory, not events; an event for another shard offered while every slot is busy and
	// MaxPending shards wait is dropped and counted.
	MaxPending int
	// OnResult, when set, is called (on the publishing goroutine, holding its slot) with
	// the outcome of every publish, for logging. It must not block for long.
	OnResult func(Result)
}

// Result is one detached publish's outcome, for PublisherOptions.OnResult.
type Result struct {
	Table string // the table
	Event Event  // the event published (the join of the events coalesced into it)
	Wrote bool   // Records.Publish's report
	Err   error  // nil, or Records.Publish's (or Event.Validate's) error
}

// PublisherStats counts a Publisher's events since it was made. Every offered event is
// counted exactly once: when it was coalesced into a waiting one, when it was dropped,
// when it was refused as invalid, or when its publish finished.
type PublisherStats struct {
	Written   uint64 `json:"written"`   // published, and the record changed
	Unchanged uint64 `json:"unchanged"` // published; the record already contained it
	Coalesced uint64 `json:"coalesced"` // joined into an event of the same shard still waiting (published with it)
	Failed    uint64 `json:"failed"`    // invalid, or the publish failed (newer schema, contention, etcd, cancelled by Close)
	TimedOut  uint64 `json:"timed_out"` // the publish ran out of its Timeout
	Dropped   uint64 `json:"dropped"`   // every slot busy and MaxPending shards waiting, or offered after Close, or still waiting when Close gave up
}

type pubKey struct{ table, shard string }

// Publisher runs publishes detached from their caller, for the write path (lance-context
// §3.6): Publish and PublishMerged return at once and never fail or block on etcd; at most
// Slots publishes run at a time, each bounded by Timeout and independent of the caller's
// context. While every slot is busy, events wait per shard, and an event for a shard that
// already waits is joined into the waiting one (the join makes that lossless: publishing
// the join of two events is publishing both); beyond MaxPending waiting shards, events are
// dropped and counted. A dropped or failed event costs little: every event carries
// absolute values, so the shard's next event (or the next scan) carries what it said,
// except its flush time, whose loss can turn the age into a bound.
//
// One Publisher per process is the intent (the slots are the process's etcd budget).
// Safe for concurrent use. A nil *Publisher accepts and ignores everything (a DB without
// etcd).
type Publisher struct {
	records    *Records
	slots      int
	timeout    time.Duration
	maxPending int
	onResult   func(Result)
	base       context.Context // parent of every publish; cancelled when Close gives up
	cancel     context.CancelFunc

	mu       sync.Mutex
	closed   bool
	running  int
	inflight map[pubKey]bool
	pending  map[pubKey]Event
	order    []pubKey // waiting shards, oldest first (may hold shards no longer waiting)
	wg       sync.WaitGroup

	written, unchanged, coalesced, failed, timedOut, dropped atomic.Uint64
}

// NewPublisher returns a publisher to records.
func NewPublisher(records *Records, opts PublisherOptions) *Publisher {
	if opts.Slots <= 0 {
		opts.Slots = DefaultSlots
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	base, cancel := context.WithCancel(context.Background())
	return &Publisher{
		records: records, slots: opts.Slots, timeout: opts.Timeout, maxPending: opts.MaxPending, onResult: opts.OnResult,
		base: base, cancel: cancel, inflight: map[pubKey]bool{}, pending: map[pubKey]Event{},
	}
}

// Publish offers e for table, to be published by Records.Publish on another goroutine. It
// never blocks on etcd and never fails; the outcome shows in Stats (and OnResult). An
// invalid event (Event.Validate, or a bad table name) is counted as failed at once.
func (p *Publisher) Publish(table string, e Event) {
	if p == nil {
		return
	}
	if err := errors.Join(checkName("table", table), e.Validate()); err != nil {
		p.failed.Add(1)
		p.report(Result{Table: table, Event: e, Err: &Error{Op: "publish", Table: table, Shard: e.Shard, Err: err}})
		return
	}
	k := pubKey{table, e.Shard}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch waiting, ok := p.pending[k]; {
	case p.closed:
		p.dropped.Add(1)
	case ok:
		p.pending[k] = joinEvents(waiting, e)
		p.coalesced.Add(1)
	case p.running < p.slots && !p.inflight[k]:
		p.running++
		p.inflight[k] = true
		p.wg.Add(1)
		go p.worker(k, e)
	case len(p.pending) < p.maxPending:
		p.pending[k] = e
		p.order = append(p.order, k)
	default:
		p.dropped.Add(1)
	}
}

// joinEvents is the event whose publication equals publishing a and then b (both valid,
// same shard): the record form of their join.
func joinEvents(a, b Event) Event {
	s, _ := ShardDemand{}.join(a)
	s, _ = s.join(b)
	return s.Record(a.Shard)
}

// PublishMerged offers a merge's new merged watermark for a shard: Publish of
// MergedEvent(shard, merged, incarnationSince, now).
func (p *Publisher) PublishMerged(table, shard string, merged, incarnationSince uint64) {
	p.Publish(table, MergedEvent(shard, merged, incarnationSince, time.Now().UnixMilli()))
}

// worker publishes e for k, then whatever waits, until nothing does.
func (p *Publisher) worker(k pubKey, e Event) {
	defer p.wg.Done()
	for {
		p.publish(k.table, e)
		p.mu.Lock()
		delete(p.inflight, k)
		next, ok := p.nextWaiting()
		if !ok {
			p.running--
			p.mu.Unlock()
			return
		}
		k, e = next, p.pending[next]
		delete(p.pending, next)
		p.inflight[k] = true
		p.mu.Unlock()
	}
}

// nextWaiting pops the oldest waiting shard with no publish in flight. Called with mu held.
func (p *Publisher) nextWaiting() (pubKey, bool) {
	for i, k := range p.order {
		if _, ok := p.pending[k]; !ok {
			continue // left the queue (published, or dropped by Close)
		}
		if p.inflight[k] {
			continue
		}
		p.order = append(p.order[:i:i], p.order[i+1:]...)
		return k, true
	}
	// Compact: drop entries of shards no longer waiting.
	live := p.order[:0]
	for _, k := range p.order {
		if _, ok := p.pending[k]; ok {
			live = append(live, k)
		}
	}
	p.order = live
	return pubKey{}, false
}

func (p *Publisher) publish(table string, e Event) {
	ctx, cancel := context.WithTimeout(p.base, p.timeout)
	defer cancel()
	wrote, err := p.records.Publish(ctx, table, e)
	switch {
	case err == nil && wrote:
		p.written.Add(1)
	case err == nil:
		p.unchanged.Add(1)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded):
		p.timedOut.Add(1)
	default:
		p.failed.Add(1)
	}
	p.report(Result{Table: table, Event: e, Wrote: wrote, Err: err})
}

func (p *Publisher) report(r Result) {
	if p.onResult != nil {
		p.onResult(r)
	}
}

// Stats returns the counters (zero for a nil Publisher).
func (p *Publisher) Stats() PublisherStats {
	if p == nil {
		return PublisherStats{}
	}
	return PublisherStats{
		Written: p.written.Load(), Unchanged: p.unchanged.Load(), Coalesced: p.coalesced.Load(),
		Failed: p.failed.Load(), TimedOut: p.timedOut.Load(), Dropped: p.dropped.Load(),
	}
}

// Close stops accepting events (later ones are dropped) and publishes what waits until
// nothing does or ctx ends; then it drops what still waits, cancels the publishes in
// flight, and returns once they have returned. Closing twice is a no-op (the second waits
// like the first).
func (p *Publisher) Close(ctx context.Context) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.dropped.Add(uint64(len(p.pending)))
	clear(p.pending)
	p.order = nil
	p.mu.Unlock()
	p.cancel()
	<-done
}
