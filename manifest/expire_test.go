package manifest

import (
	"context"
	"errors"
	"testing"
)

// TestExpiredVersionNumberIsNeverReused pins the lost-write hole garbage collection
// would open by deleting manifests: a writer whose read version is older than the
// expired range must get a retryable conflict, not a commit below HEAD.
func TestExpiredVersionNumberIsNeverReused(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	ms := []*Manifest{create(t, s, "t")}
	for i := 0; i < 5; i++ {
		m, _, err := Commit(ctx, s, "t", ms[len(ms)-1], NewTransaction(ms[len(ms)-1].Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}), CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	stale := ms[1]              // version 2; HEAD is 6
	for _, m := range ms[1:4] { // expire versions 2, 3, 4
		if err := Expire(ctx, s, m); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(ctx, s, "t", 3)
	var oe *ObjectError
	if !errors.Is(err, ErrVersionExpired) || !errors.Is(err, ErrVersionNotFound) || !errors.As(err, &oe) || oe.Key != ManifestKey("t", 3) {
		t.Fatalf("load of an expired version: %v; want ErrVersionExpired and ErrVersionNotFound naming the key", err)
	}
	// A writer still at version 2 commits: version 3's number is taken by the tombstone,
	// which keeps its transaction, so the commit checks ours against 3, 4 and 5 and lands
	// on top of HEAD instead of in the hole (invariant 1) or failing.
	late, _, err := Commit(ctx, s, "t", stale, NewTransaction(stale.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(7)}}), CommitOptions{})
	if err != nil || late.Version != 7 || late.LiveRows() != 12 {
		t.Fatalf("commit from an expired read version: %v, %v; want version 7 with 12 rows", late, err)
	}
	if _, err := Load(ctx, s, "t", 3); !errors.Is(err, ErrVersionExpired) {
		t.Fatalf("version 3 after the stale commit: %v, want still expired", err)
	}
	// Catching up from the stale version jumps to HEAD.
	m, err := CatchUp(ctx, s, "t", stale, nil)
	if err != nil || m.Version != 7 || m.LiveRows() != 12 {
		t.Fatalf("catch up from an expired read version: %v, %v; want HEAD 7 with 12 rows", m, err)
	}
	// A commit planned at HEAD still works, and HEAD is listed by Versions with the
	// tombstoned numbers.
	if _, _, err := Commit(ctx, s, "t", m, NewTransaction(m.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, _ := Head(ctx, s, "t"); h != 8 {
		t.Fatalf("HEAD %d, want 8", h)
	}
	b, err := s.Get(ctx, ManifestKey("t", 2))
	if err != nil || !IsTombstone(b) || len(b) > 200 {
		t.Fatalf("tombstone of version 2: %d bytes, %v", len(b), err)
	}
}

// A tombstone is checksummed like every framed object.
func TestCorruptTombstone(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	m := create(t, s, "t")
	if err := Expire(ctx, s, m); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Get(ctx, m.Key())
	b[len(b)-6] ^= 0xff
	if err := s.Put(ctx, m.Key(), b); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, s, "t", 1); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("corrupt tombstone: %v, want ErrCorrupt only", err)
	}
}
