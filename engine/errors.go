package engine

import (
	"errors"

	"github.com/shale-db/shale/internal/panics"
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
	// ErrTableDropped: a write committed to a table that was dropped meanwhile; its
	// version is not published (drop the table again to clear what it left).
	ErrTableDropped = errors.New("table was dropped")
	// ErrInternal: an operation panicked (a bug, in Shale or a library it calls) on a
	// goroutine of a read or write path, and returns the panic as an error naming the
	// table, version and object when known, with the first frames of the stack. The
	// operation failed and committed nothing. Compaction's errors wrap the same value.
	ErrInternal = panics.ErrInternal
)
