package main

import (
	"context"
	"sync"
	"testing"

	"github.com/shale-db/shale/store"
)

// TestReadCounterKinds: query --explain's store wrapper sorts reads by the kind of object
// (by the key's first segment after the table name) and counts them from many goroutines
// (a scan reads in parallel); writes are not counted.
func TestReadCounterKinds(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "mem://explain-counter", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := newReadCounter(s)
	keys := map[string]string{
		"t/_indices/TXN/UUID/lookup.btree": objIndex,
		"t/data/TXN/F.arrow":               objData,
		"t/_deletions/TXN/1-x.dv":          objDeletions,
		"t/_versions/000.manifest":         objMetadata,
		"_shale/store-id":                  objMetadata,
		"t/datafile":                       objMetadata, // not under data/
	}
	for k := range keys {
		if err := rc.Put(ctx, k, []byte("12345")); err != nil {
			t.Fatal(err)
		}
		if got := objectKind(k); got != keys[k] {
			t.Errorf("objectKind(%q) = %q, want %q", k, got, keys[k])
		}
	}
	if got := rc.snapshot(); got[0].Requests+got[1].Requests+got[2].Requests+got[3].Requests != 0 {
		t.Fatalf("writes were counted: %+v", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				if _, err := rc.Get(ctx, k); err != nil {
					t.Error(err)
				}
				if _, err := rc.GetRange(ctx, k, 1, 2); err != nil {
					t.Error(err)
				}
				if _, err := rc.Head(ctx, k); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	want := map[string]objectReads{
		objIndex:     {Kind: objIndex, Requests: 8 * 3, Bytes: 8 * 7},
		objData:      {Kind: objData, Requests: 8 * 3, Bytes: 8 * 7},
		objDeletions: {Kind: objDeletions, Requests: 8 * 3, Bytes: 8 * 7},
		objMetadata:  {Kind: objMetadata, Requests: 3 * 8 * 3, Bytes: 3 * 8 * 7},
	}
	got := rc.snapshot()
	if len(got) != len(objectKinds) {
		t.Fatalf("snapshot %+v", got)
	}
	for i, k := range objectKinds {
		if got[i] != want[k] {
			t.Errorf("%s: %+v, want %+v", k, got[i], want[k])
		}
	}
	rc.reset()
	if got := rc.snapshot(); got[0].Requests != 0 {
		t.Fatalf("after reset: %+v", got)
	}
}
