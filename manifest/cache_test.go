package manifest

import (
	"context"
	"errors"
	"testing"

	"github.com/shale-db/shale/store"
)

// TestCacheServesOnlyVerifiedManifests (issue 13): a second LoadVerified of the same
// (table, version, checksum) is served without a request and returns the same manifest;
// a checksum that does not match the object is ErrCorrupt every time (never served from
// the cache, even after the right checksum was cached); a tombstone is ErrVersionExpired
// every time and never cached; a version rewritten under the same number (a store rebuilt
// under one catalog) with another checksum is a miss that reads the new object.
func TestCacheServesOnlyVerifiedManifests(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	c := NewCache(0)
	m1 := create(t, s, "t")
	m2, st, err := Commit(ctx, s, "t", m1, NewTransaction(m1.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(3)}}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gets := func() int64 { return s.Counters().Snapshot().ByOp[store.OpGet] }

	g0 := gets()
	a, err := c.LoadVerified(ctx, s, "t", m2.Version, st.Checksum)
	if err != nil || a.LiveRows() != 3 {
		t.Fatalf("first load: %v %v", a, err)
	}
	b, err := c.LoadVerified(ctx, s, "t", m2.Version, st.Checksum)
	if err != nil || b != a {
		t.Fatalf("second load: %p %v, want the cached %p", b, err, a)
	}
	if n := gets() - g0; n != 1 {
		t.Fatalf("two loads of one version made %d GETs, want 1", n)
	}
	if s := c.Stats(); s.Hits != 1 || s.Misses != 1 || s.Entries != 1 || s.Bytes <= 0 {
		t.Fatalf("stats %+v", s)
	}

	// A pointer with another checksum for the same version: corrupt, from the store,
	// each time.
	for i := 0; i < 2; i++ {
		g := gets()
		if _, err := c.LoadVerified(ctx, s, "t", m2.Version, st.Checksum+1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("mismatched checksum, try %d: %v, want ErrCorrupt", i, err)
		}
		if gets() == g {
			t.Fatalf("mismatched checksum, try %d: answered without reading the store", i)
		}
	}

	// Version 1 expired: a tombstone, never cached, ErrVersionExpired each time (even
	// though its manifest was loaded through the cache before it expired, it is served
	// from the store: the entry is keyed by the checksum of the manifest object, and the
	// pointer never names an expired version; here the old checksum is asked for).
	c1, err := c.LoadVerified(ctx, s, "t", 1, m1.checksum)
	if err != nil || c1.Version != 1 {
		t.Fatalf("load version 1: %v", err)
	}
	if err := Expire(ctx, s, m1); err != nil {
		t.Fatal(err)
	}
	fresh := NewCache(0)
	for i := 0; i < 2; i++ {
		if _, err := fresh.LoadVerified(ctx, s, "t", 1, m1.checksum); !errors.Is(err, ErrVersionExpired) {
			t.Fatalf("tombstone, try %d: %v, want ErrVersionExpired", i, err)
		}
	}
	if st := fresh.Stats(); st.Entries != 0 || st.Misses != 2 {
		t.Fatalf("a tombstone was cached: %+v", st)
	}

	// The store rebuilt: version 2 holds another object. Its checksum misses the entry
	// of the old one and the new object is read and verified.
	if err := s.Delete(ctx, m2.Key()); err != nil {
		t.Fatal(err)
	}
	other := m2.clone()
	f := frag(5)
	f.ID = 99
	other.Fragments = append(other.Fragments, f)
	body, err := other.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, m2.Key(), body); err != nil {
		t.Fatal(err)
	}
	n, err := c.LoadVerified(ctx, s, "t", m2.Version, Checksum(body))
	if err != nil || n == a || n.LiveRows() != 8 {
		t.Fatalf("rebuilt version under a new checksum: %v (rows %d), %v", n == a, n.LiveRows(), err)
	}

	// The bound: a cache smaller than one manifest keeps nothing.
	tiny := NewCache(8)
	if _, err := tiny.LoadVerified(ctx, s, "t", m2.Version, Checksum(body)); err != nil {
		t.Fatal(err)
	}
	if st := tiny.Stats(); st.Entries != 0 {
		t.Fatalf("a manifest past the bound was kept: %+v", st)
	}
}
