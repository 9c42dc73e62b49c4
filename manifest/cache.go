package manifest

import (
	"container/list"
	"context"
	"sync"

	"github.com/shale-db/shale/store"
)

// DefaultCacheBytes bounds a Cache built with NewCache(0): 64 MiB of encoded manifests
// (about 240 manifests of 1,000 fragments each).
const DefaultCacheBytes = 64 << 20

// Cache keeps decoded manifests in memory, keyed by (table, version, checksum), so that
// opening a table at a version this process has read before costs no GET and no decode:
// only the catalog read that names the version and its checksum.
//
// What it serves is exactly what LoadVerified would return. An entry is added only after
// a successful LoadVerified: the object was a manifest (a tombstone is an error, never
// cached) whose CRC32C equals the checksum asked for (a mismatch is an error, never
// cached). A hit needs the same table, version and checksum, so a pointer naming another
// object under the same version number (say, a store wiped and rebuilt under one catalog)
// is a miss and is read and verified from the store. Versions are immutable (invariant 1),
// so an entry never goes stale; a version expired by GC since is no longer named by a
// published pointer, so it is not asked for. The manifests it returns are shared: callers
// must treat them as read-only, as every *Manifest is (Build clones its parent).
//
// Bounded by the encoded size of its manifests (least recently used first out). Safe for
// concurrent use; a nil *Cache caches nothing.
type Cache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // of *cacheEntry, most recently used first
	byKey map[cacheKey]*list.Element
	stats CacheStats
}

type cacheKey struct {
	table    string
	version  uint64
	checksum uint32
}

type cacheEntry struct {
	key  cacheKey
	m    *Manifest
	size int64
}

// CacheStats counts a Cache's lookups.
type CacheStats struct {
	Hits    int64 // lookups served from the cache
	Misses  int64 // lookups that read the store
	Entries int   // manifests held
	Bytes   int64 // encoded bytes of the manifests held
}

// NewCache returns a cache of at most maxBytes of encoded manifests (0: DefaultCacheBytes;
// a manifest larger than the bound is not kept).
func NewCache(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{max: maxBytes, order: list.New(), byKey: map[cacheKey]*list.Element{}}
}

// LoadVerified is LoadVerified through the cache: a hit returns the manifest decoded
// earlier for the same (table, v, checksum) without a request; a miss loads, verifies
// and (on success) keeps it. Errors: LoadVerified's, never cached.
func (c *Cache) LoadVerified(ctx context.Context, s store.Store, table string, v uint64, checksum uint32) (*Manifest, error) {
	if c == nil {
		return LoadVerified(ctx, s, table, v, checksum)
	}
	k := cacheKey{table, v, checksum}
	if m := c.get(k); m != nil {
		return m, nil
	}
	m, err := LoadVerified(ctx, s, table, v, checksum)
	if err != nil {
		return nil, err
	}
	c.put(k, m)
	return m, nil
}

func (c *Cache) get(k cacheKey) *Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e)
		c.stats.Hits++
		return e.Value.(*cacheEntry).m
	}
	c.stats.Misses++
	return nil
}

func (c *Cache) put(k cacheKey, m *Manifest) {
	if m.checksum != k.checksum || m.size <= 0 || m.size > c.max {
		return // only what LoadVerified verified, with a known size, within the bound
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.byKey[k] = c.order.PushFront(&cacheEntry{key: k, m: m, size: m.size})
	c.size += m.size
	for c.size > c.max {
		e := c.order.Back()
		ent := e.Value.(*cacheEntry)
		c.order.Remove(e)
		delete(c.byKey, ent.key)
		c.size -= ent.size
	}
}

// Stats returns the cache's counters and size.
func (c *Cache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes = len(c.byKey), c.size
	return s
}
