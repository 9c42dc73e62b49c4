package serve

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/shale-db/shale/store"
)

// progress counts one execution's completed storage requests. The execution's context
// carries it; progressStore, the store of the runtime's DB, counts into it.
type progress struct {
	n    atomic.Int64 // completed requests
	last atomic.Int64 // Unix ns of the last completion (or of the start)
}

func newProgress(now time.Time) *progress {
	p := &progress{}
	p.last.Store(now.UnixNano())
	return p
}

// done counts one completed request.
func (p *progress) done() {
	p.n.Add(1)
	p.last.Store(time.Now().UnixNano())
}

// idle is how long ago the last request completed (or the execution started).
func (p *progress) idle(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, p.last.Load()))
}

type progressKey struct{}

func withProgress(ctx context.Context, p *progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// progressStore counts every request that completes (returns before its context ends,
// with or without an error: an answer is progress) into the progress its context carries.
// A request without one is passed through uncounted.
type progressStore struct{ store.Store }

func count(ctx context.Context) {
	if p, ok := ctx.Value(progressKey{}).(*progress); ok && ctx.Err() == nil {
		p.done()
	}
}

func (s progressStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.Store.Get(ctx, key)
	count(ctx)
	return b, err
}

func (s progressStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := s.Store.GetRange(ctx, key, off, n)
	count(ctx)
	return b, err
}

func (s progressStore) Head(ctx context.Context, key string) (store.ObjectInfo, error) {
	o, err := s.Store.Head(ctx, key)
	count(ctx)
	return o, err
}

func (s progressStore) Put(ctx context.Context, key string, data []byte) error {
	err := s.Store.Put(ctx, key, data)
	count(ctx)
	return err
}

func (s progressStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, key, data)
	count(ctx)
	return err
}

func (s progressStore) List(ctx context.Context, prefix string, limit int) ([]store.ObjectInfo, error) {
	o, err := s.Store.List(ctx, prefix, limit)
	count(ctx)
	return o, err
}

func (s progressStore) Delete(ctx context.Context, key string) error {
	err := s.Store.Delete(ctx, key)
	count(ctx)
	return err
}
