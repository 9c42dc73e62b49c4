package wal

import (
	"context"
	"sync"
	"testing"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// onGet is a store that runs hook once, before the first Get of key.
type onGet struct {
	store.Store
	key  string
	once sync.Once
	hook func()
}

func (s *onGet) Get(ctx context.Context, key string) ([]byte, error) {
	if key == s.key {
		s.once.Do(s.hook)
	}
	return s.Store.Get(ctx, key)
}

// TestLoadShardListsAgainWhenTheNewestWasExpired: between LoadShard's LIST (which names
// version v newest) and its GET, a flush puts v+1 and gc replaces v by a tombstone (gc
// never expires the newest version, so v was superseded): LoadShard lists again and
// returns v+1 instead of failing with ErrExpired.
func TestLoadShardListsAgainWhenTheNewestWasExpired(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	w := open(t, s, opts())
	appendRange(t, w, 0, 3)
	v, err := LatestVersion(ctx, s, "t", "0")
	if err != nil {
		t.Fatal(err)
	}
	racing := &onGet{Store: s, key: ManifestKey("t", "0", v), hook: func() {
		if err := w.Flush(ctx); err != nil {
			t.Error(err)
		}
		if err := ExpireShardManifest(ctx, s, "t", "0", v); err != nil {
			t.Error(err)
		}
	}}
	m, err := LoadShard(ctx, racing, "t", "0")
	if err != nil {
		t.Fatalf("LoadShard while version %d was superseded and expired: %v", v, err)
	}
	if m.Version != v+1 || len(m.Generations) != 1 || m.Generations[0].Rows != 3 {
		t.Fatalf("LoadShard: version %d with %+v, want version %d listing the 3 rows", m.Version, m.Generations, v+1)
	}
}
