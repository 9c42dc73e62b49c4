package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shale-db/shale/manifest"
)

// TestPin: a pin is a catalog hold of kind "pin" at the handle's version while held,
// gone after Release (twice is harmless); pinning a version whose manifest is gone fails
// with ErrVersionNotFound and leaves no hold; a DB without a catalog cannot pin.
func TestPin(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "pinned", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	appendRange(t, tbl, 10, 20)
	old, err := tbl.Checkout(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := old.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holds, err := db.Catalog().Holds(ctx, "pinned")
	if err != nil {
		t.Fatal(err)
	}
	if len(holds) != 1 || holds[0].ID != p.ID() || holds[0].Kind != HoldKindPin || holds[0].Version != 2 || p.Version() != 2 {
		t.Fatalf("holds while pinned: %+v", holds)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	select {
	case <-p.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after Release")
	}
	if ok, err := db.Catalog().HoldExists(ctx, "pinned", p.ID()); err != nil || ok {
		t.Fatalf("hold after release: %v %v", ok, err)
	}

	// Expire version 2 (a tombstone, as GC does): pinning it now fails and holds nothing.
	if err := manifest.Expire(ctx, db.Store(), old.Manifest()); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Pin(ctx); !errors.Is(err, manifest.ErrVersionExpired) {
		t.Fatalf("pin of an expired version: %v", err)
	}
	if holds, err := db.Catalog().Holds(ctx, "pinned"); err != nil || len(holds) != 0 {
		t.Fatalf("holds after a failed pin: %+v %v", holds, err)
	}

	bare, err := Open(ctx, db.Store(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	bt, err := bare.OpenTable(ctx, "pinned")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bt.Pin(ctx); !errors.Is(err, ErrNoCatalog) {
		t.Fatalf("pin without a catalog: %v", err)
	}
}

// TestDropRefusesHeldTable: a pinned (held) table cannot be dropped; once released it can.
func TestDropRefusesHeldTable(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "held", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	p, err := tbl.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTable(ctx, "held"); !errors.Is(err, ErrTableBusy) {
		t.Fatalf("drop of a pinned table: %v, want ErrTableBusy", err)
	}
	if got := ids(t, mustOpen(t, db, "held"), ""); len(got) != 10 {
		t.Fatalf("%d rows after the refused drop, want 10", len(got))
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTable(ctx, "held"); err != nil {
		t.Fatalf("drop after release: %v", err)
	}
}
