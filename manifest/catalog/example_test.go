package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// The two publish modes and a lease-backed hold. A fast-forward succeeds once the pointer
// is at or past its version, whoever put it there, and never moves it back; a
// compare-and-swap succeeds only from the version it expects. (The engine publishes every
// write for you; this is what it does underneath.)
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "catalog-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	etcd, err := coord.Connect(ctx, coord.Config{InProcess: true, StateDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	cat := catalog.New(etcd.Etcd(), "/example")

	ptr := func(v uint64) catalog.Pointer {
		return catalog.Pointer{Version: v, ManifestKey: manifest.ManifestKey("t", v), Checksum: uint32(v)}
	}
	if _, err := cat.FastForward(ctx, "t", ptr(3)); err != nil {
		log.Fatal(err)
	}
	now, err := cat.FastForward(ctx, "t", ptr(2)) // the goal (at or past 2) already holds
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after fast-forward to 2:", now.Version)

	err = cat.CompareAndSwap(ctx, "t", 2, ptr(4)) // expects version 2; it is at 3
	var ce *catalog.ConflictError
	fmt.Println("compare-and-swap from 2:", errors.Is(err, catalog.ErrConflict), errors.As(err, &ce) && ce.Current.Version == 3)
	if err := cat.CompareAndSwap(ctx, "t", 3, ptr(4)); err != nil {
		log.Fatal(err)
	}
	p, _, err := cat.Get(ctx, "t")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("published:", p.Version)

	// A hold keeps versions >= 4 from garbage collection while its lease lives.
	h, err := cat.AcquireHold(ctx, catalog.Hold{ID: "reader-1", Table: "t", Kind: "pin", Version: 4}, catalog.DefaultHoldTTL)
	if err != nil {
		log.Fatal(err)
	}
	holds, err := cat.Holds(ctx, "t")
	if err != nil {
		log.Fatal(err)
	}
	low, _ := catalog.LowWatermark(holds)
	fmt.Println("holds:", len(holds), "low watermark:", low)
	if err := h.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// after fast-forward to 2: 3
	// compare-and-swap from 2: true true
	// published: 4
	// holds: 1 low watermark: 4
}
