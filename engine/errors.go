package engine

import (
	"errors"

	"github.com/shale-db/shale/internal/panics"
	"github.com/shale-db/shale/manifest"
)

var (
	// ErrSchemaMismatch: appended records do not match the table schema.
	ErrSchemaMismatch = errors.New("schema mismatch")
	// ErrTableExists: CreateTable of a table that already exists.
	ErrTableExists = errors.New("table already exists")
	// ErrReadOnly: a write on a table checked out at an older version.
	ErrReadOnly = errors.New("table handle is read-only (checked out at an older version)")
	// ErrDrift: HEAD is below the published version, which is corruption (invariant 3).
	ErrDrift = errors.New("HEAD is below the published version")
	// ErrTableBusy: DropTable of a table that a running operation (compaction, long
	// write) or a pinned reader holds in the catalog.
	ErrTableBusy = errors.New("table is in use")
	// ErrTableDropped: the table was dropped while the write ran (it is
	// manifest.ErrTableDropped). The write did not take effect and never will: its
	// transaction met the drop marker in its commit loop, or its version landed in a
	// number the drop freed and belongs to no table (the pointer names a later
	// incarnation, or none). What it would have written is in no table.
	ErrTableDropped = manifest.ErrTableDropped
	// ErrInternal: an operation panicked (a bug, in Shale or a library it calls) on a
	// goroutine of a read or write path, and returns the panic as an error naming the
	// table, version and object when known, with the first frames of the stack. The
	// operation failed and committed nothing. Compaction's errors wrap the same value.
	ErrInternal = panics.ErrInternal
)

// InternalError is the error made from a recovered panic (it wraps ErrInternal, and the
// panic value when that is an error). Fields: Op (what was running, e.g. "read data
// file"), Key (the object being read or written, "" when unknown), Value (the value
// passed to panic) and Stack (the panicking goroutine's first frames, as runtime/debug
// prints them). Use errors.As to reach it and report it as a bug.
type InternalError = panics.Error
