package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/shale-db/shale/manifest"
)

// ErrTableChanged: DropTableAt of a table whose HEAD is no longer the version the caller
// expected (another writer committed since); nothing was dropped.
var ErrTableChanged = errors.New("the table changed since")

// DropTableAt drops table name as DropTable does, but only while its HEAD is version at:
// the drop marker is committed as version at+1 with a single put-if-absent, so if any
// other transaction commits after at first (say, an append to a table the caller has
// just created), nothing is dropped and the result is ErrTableChanged. It is for
// undoing what the caller itself did: a program that created a table and failed to fill
// it drops it without ever dropping rows another writer added meanwhile.
// Errors: as DropTable, and ErrTableChanged.
func (db *DB) DropTableAt(ctx context.Context, name string, at uint64) (int, error) {
	if at == 0 {
		return 0, fmt.Errorf("drop table %q at version 0: versions start at 1", name)
	}
	return db.dropTable(ctx, name, at)
}

// dropMarkerAt commits the drop marker of name as version at+1, on version at, or fails
// with ErrTableChanged.
func (db *DB) dropMarkerAt(ctx context.Context, name string, at uint64, opts manifest.CommitOptions) (*manifest.Manifest, bool, error) {
	changed := func(why string) error {
		return fmt.Errorf("drop table %q at version %d: %w: %s; nothing was dropped", name, at, ErrTableChanged, why)
	}
	head, err := manifest.Head(ctx, db.store, name)
	if err != nil {
		return nil, false, fmt.Errorf("drop table %q: %w", name, err)
	}
	if head != at {
		return nil, false, changed(fmt.Sprintf("HEAD is version %d", head))
	}
	read, err := manifest.LoadCounted(ctx, db.store, name, at, opts.Groups)
	if err != nil {
		return nil, false, fmt.Errorf("drop table %q: %w", name, err)
	}
	if read.Dropped() {
		return nil, false, changed("it is dropped already")
	}
	opts.MaxAttempts = 1 // version at+1 or nothing: never on top of another writer's version
	txn := manifest.NewTransaction(at, manifest.Operation{Kind: manifest.OpDrop})
	m, _, err := manifest.Commit(ctx, db.store, name, read, txn, opts)
	switch {
	case err == nil:
		return m, false, nil
	case errors.Is(err, manifest.ErrTooManyAttempts), errors.Is(err, manifest.ErrConflict):
		return nil, false, changed(fmt.Sprintf("another transaction committed version %d", at+1))
	}
	return nil, false, fmt.Errorf("drop table %q: commit the drop marker: %w", name, err)
}
