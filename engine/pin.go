package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// HoldKindPin is the catalog hold kind of a pinned reader.
const HoldKindPin = "pin"

// ErrNoCatalog: the operation needs the etcd catalog and the DB was opened without one.
var ErrNoCatalog = errors.New("no catalog (open the DB with etcd)")

// Pin keeps one version of a table readable: while it is held, garbage collection in any
// process keeps that version (and every version above it) and every file they reference.
// It is a catalog hold (catalog.AcquireHold, kind "pin") under a lease, so a reader that
// dies stops pinning history once its lease expires (catalog.DefaultHoldTTL). Its methods
// are safe for concurrent use.
type Pin struct {
	h     *catalog.Holding
	table string
	v     uint64
}

// Pin holds t.ContentVersion() until Release: t.Version(), or, for a handle on a prepared
// version of an aborted multi-table group, the version whose content it reads (that
// version's files are the ones the handle needs, and holding it keeps every version
// above it too). After the hold is stored it checks that the version's manifest still
// exists, so once Pin returns, GC cannot expire the version nor delete a file it
// references (a GC that had already decided to expire it keeps its files, because GC
// re-reads the holds after expiring manifests and before deleting files).
//
// A reader that wants to time-travel to an old version V should Checkout(V), Pin the
// returned handle, and only then scan: Checkout alone does not stop a GC running
// meanwhile. (Pin re-checks V; if V expired between the Checkout and the Pin, Pin fails
// with manifest.ErrVersionNotFound and holds nothing.)
//
// Errors: ErrNoCatalog; manifest.ErrVersionNotFound / manifest.ErrVersionExpired (as
// *manifest.ObjectError naming the manifest key) when the version is gone; catalog and
// store errors.
func (t *Table) Pin(ctx context.Context) (*Pin, error) {
	if t.db.cat == nil {
		return nil, fmt.Errorf("table %q: pin version %d: %w", t.name, t.Version(), ErrNoCatalog)
	}
	v := t.ContentVersion()
	id := "pin-" + manifest.NewTransactionID()
	h, err := t.db.cat.AcquireHold(ctx, catalog.Hold{ID: id, Table: t.name, Kind: HoldKindPin, Version: v}, 0)
	if err != nil {
		return nil, fmt.Errorf("table %q: pin version %d: %w", t.name, v, err)
	}
	// Expired versions keep a tombstone under their key, so read it (one GET).
	if _, err := manifest.Load(ctx, t.db.store, t.name, v); err != nil {
		_ = h.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("table %q: pin version %d: %w", t.name, v, err)
	}
	return &Pin{h: h, table: t.name, v: v}, nil
}

// Version is the pinned version.
func (p *Pin) Version() uint64 { return p.v }

// ID is the pin's hold id (catalog.Holds lists it).
func (p *Pin) ID() string { return p.h.Hold().ID }

// Lost is closed when the pin no longer protects anything: after Release, or when its
// lease expired (etcd unreachable for longer than the TTL).
func (p *Pin) Lost() <-chan struct{} { return p.h.Lost() }

// Release drops the pin. Releasing twice is harmless. Errors: catalog errors (the lease
// then expires on its own within its TTL).
func (p *Pin) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := p.h.Release(ctx); err != nil {
		return fmt.Errorf("table %q: release pin of version %d: %w", p.table, p.v, err)
	}
	return nil
}
