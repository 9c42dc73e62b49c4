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
	DefaultSlots   = 4
	DefaultTimeout = 15 * time.Second
)

// PublisherOptions configure a Publisher.
type PublisherOptions struct {
	// Slots bounds the publishes running at once (0: DefaultSlots). A publish offered
	// while every slot is busy is dropped and counted.
	Slots int
	// Timeout bounds each publish, etcd retries included (0: DefaultTimeout).
	Timeout time.Duration
	// OnResult, when set, is called (on the publish's goroutine) with every outcome except
	// drops, for logging. It must not block for long: it holds the slot.
	OnResult func(Result)
}

// Result is one detached publish's outcome, for PublisherOptions.OnResult.
type Result struct {
	Table string // the table
	Event Event  // the event published
	Wrote bool   // Records.Publish's report
	Err   error  // nil, or Records.Publish's error
}

// PublisherStats counts a Publisher's outcomes since it was made. Every offered event is
// counted exactly once, once its publish has finished (or at once when dropped).
type PublisherStats struct {
	Written   uint64 `json:"written"`   // the record changed
	Unchanged uint64 `json:"unchanged"` // the record already contained the event
	Failed    uint64 `json:"failed"`    // an error other than the timeout (invalid event, newer schema, contention, etcd)
	TimedOut  uint64 `json:"timed_out"` // the publish ran out of its Timeout
	Dropped   uint64 `json:"dropped"`   // every slot was busy, or the publisher was closed
}

// Publisher runs publishes detached from their caller, for the write path (lance-context
// §3.6): Publish and PublishMerged return at once and never fail; at most Slots publishes
// run at a time, each bounded by Timeout and independent of the caller's context; an
// event offered while all slots are busy is dropped and counted. A dropped or failed event
// loses nothing that matters for long: every event carries absolute values, so the next
// one from the same publisher (or the next scan) carries what it said, except its flush
// time, whose loss can turn the age into a bound. One Publisher per process is the intent
// (the slots are the process's budget). Safe for concurrent use. A nil *Publisher accepts
// and ignores everything (a DB without etcd).
type Publisher struct {
	records  *Records
	slots    chan struct{}
	timeout  time.Duration
	onResult func(Result)

	mu     sync.Mutex // guards closed and wg.Add against Close
	closed bool
	wg     sync.WaitGroup

	written, unchanged, failed, timedOut, dropped atomic.Uint64
}

// NewPublisher returns a publisher to records.
func NewPublisher(records *Records, opts PublisherOptions) *Publisher {
	if opts.Slots <= 0 {
		opts.Slots = DefaultSlots
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Publisher{records: records, slots: make(chan struct{}, opts.Slots), timeout: opts.Timeout, onResult: opts.OnResult}
}

// Publish offers e for table, to be published by Records.Publish on another goroutine. It
// never blocks and never fails; the outcome shows in Stats (and OnResult).
func (p *Publisher) Publish(table string, e Event) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.dropped.Add(1)
		return
	}
	select {
	case p.slots <- struct{}{}:
	default:
		p.mu.Unlock()
		p.dropped.Add(1)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.run(table, e)
}

// PublishMerged offers a merge's new merged watermark for a shard: Publish of
// MergedEvent(shard, merged, incarnationSince, now).
func (p *Publisher) PublishMerged(table, shard string, merged, incarnationSince uint64) {
	p.Publish(table, MergedEvent(shard, merged, incarnationSince, time.Now().UnixMilli()))
}

func (p *Publisher) run(table string, e Event) {
	defer p.wg.Done()
	defer func() { <-p.slots }()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	wrote, err := p.records.Publish(ctx, table, e)
	switch {
	case err == nil && wrote:
		p.written.Add(1)
	case err == nil:
		p.unchanged.Add(1)
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		p.timedOut.Add(1)
	default:
		p.failed.Add(1)
	}
	if p.onResult != nil {
		p.onResult(Result{Table: table, Event: e, Wrote: wrote, Err: err})
	}
}

// Stats returns the outcome counters (zero for a nil Publisher).
func (p *Publisher) Stats() PublisherStats {
	if p == nil {
		return PublisherStats{}
	}
	return PublisherStats{
		Written: p.written.Load(), Unchanged: p.unchanged.Load(), Failed: p.failed.Load(),
		TimedOut: p.timedOut.Load(), Dropped: p.dropped.Load(),
	}
}

// Close stops accepting events (later ones are dropped) and waits for the publishes in
// flight, each bounded by Timeout. Closing twice is a no-op.
func (p *Publisher) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}
