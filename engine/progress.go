package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/shale-db/shale/store"
)

// progressStore counts a preparation's completed storage reads and writes of data and
// index objects: successful Get, GetRange, Put and PutIfAbsent. Failed requests, Head and
// List (metadata polling) are not progress (lance-context §4.4: only completed I/O says
// work is alive).
type progressStore struct {
	store.Store
	n atomic.Int64
}

func (p *progressStore) count(err error) error {
	if err == nil {
		p.n.Add(1)
	}
	return err
}

func (p *progressStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := p.Store.Get(ctx, key)
	return b, p.count(err)
}

func (p *progressStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := p.Store.GetRange(ctx, key, off, n)
	return b, p.count(err)
}

func (p *progressStore) Put(ctx context.Context, key string, data []byte) error {
	return p.count(p.Store.Put(ctx, key, data))
}

func (p *progressStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return p.count(p.Store.PutIfAbsent(ctx, key, data))
}

// Progress is a preparation's storage progress: completed reads and writes so far.
func (p *progressStore) Progress() int64 { return p.n.Load() }

// watchProgress cancels ctx (cause: err) once progress() has not changed for idle,
// checking every interval; elapsed time alone never cancels (invariant 12). stop ends
// the watch.
func watchProgress(ctx context.Context, progress func() int64, idle, interval time.Duration, cause error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		last, since := progress(), time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				if p := progress(); p != last {
					last, since = p, now
				} else if now.Sub(since) >= idle {
					cancel(cause)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}
