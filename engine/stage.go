package engine

import (
	"context"
	"sync"

	"github.com/shale-db/shale/store"
)

// maxStagedBytes bounds the data file an append hands to its commit instead of putting it
// first (see stagingStore).
const maxStagedBytes = 8 << 20

// stagingStore is the store an append's fragment writer writes through: it holds back the
// newest data file (at most maxStagedBytes) instead of putting it, and puts any earlier
// one when the next arrives, so the file the commit's first attempt writes together with
// its transaction record (manifest.CommitOptions.Stage) is only ever the last one. Every
// other call goes to the store.
type stagingStore struct {
	store.Store
	mu   sync.Mutex
	held *store.Object
}

// Put holds data back when it is small enough, after putting the file held before.
func (s *stagingStore) Put(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.held; prev != nil {
		s.held = nil
		if err := s.Store.Put(ctx, prev.Key, prev.Data); err != nil {
			return err
		}
	}
	if len(data) > maxStagedBytes {
		return s.Store.Put(ctx, key, data)
	}
	s.held = &store.Object{Key: key, Data: data}
	return nil
}

// take returns the held files (none or one) and forgets them.
func (s *stagingStore) take() []store.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		return nil
	}
	out := []store.Object{*s.held}
	s.held = nil
	return out
}
