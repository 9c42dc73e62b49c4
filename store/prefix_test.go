package store

import (
	"context"
	"testing"
)

// TestDeletePrefix: every object under the prefix goes, with its count; others stay; a
// second run finds nothing to delete.
func TestDeletePrefix(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "mem://deleteprefix", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"t/data/a/1", "t/data/a/2", "t/data/ab/1", "t/data/b/1"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := DeletePrefix(ctx, s, "t/data/a/"); err != nil || n != 2 {
		t.Fatalf("DeletePrefix: %d, %v; want 2 deleted", n, err)
	}
	objs, err := s.List(ctx, "t/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Key != "t/data/ab/1" || objs[1].Key != "t/data/b/1" {
		t.Fatalf("left %+v, want t/data/ab/1 and t/data/b/1", objs)
	}
	if n, err := DeletePrefix(ctx, s, "t/data/a/"); err != nil || n != 0 {
		t.Fatalf("again: %d, %v; want 0", n, err)
	}
}
