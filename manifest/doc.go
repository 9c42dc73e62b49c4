// Package manifest owns a table's versions: the manifest record of each version, its
// binary encoding, the object names under _versions/ and _txn/, the transactions a version
// applies, the conflict rules between transactions, and the commit loop.
//
// A program using the engine needs this package for its vocabulary, not its machinery:
// the errors a write can return (ErrConflict with *ConflictError, ErrTxnAborted,
// ErrTableDropped, ErrDuplicate, ErrTableNotFound, ErrVersionNotFound, ErrCorrupt), the
// Transaction an engine.UnknownError carries, and the Manifest a Table handle describes
// (Fragments, their DataFiles and statistics). Load, LoadHead and Versions read versions
// of a table directly from a store; Commit and Check are the commit loop and the conflict
// rules the engine runs. Functions that read the store cost the requests their comments
// state and are safe for concurrent use.
//
// Layout (DESIGN §2), keys relative to the store root:
//
//	<table>/_versions/<inv>.manifest   immutable; inv = 20-digit MaxUint64-N, so the first LIST entry is HEAD
//	<table>/_txn/<N>-<txn-id>.txn      the transaction attempted as version N
//
// Contracts:
//   - A committed version never changes and each version number has exactly one winner
//     (invariant 1): the manifest is created with put-if-absent and never rewritten.
//   - A new version is always built by applying the transaction to the manifest of the
//     version just below it; after losing a put the loop re-reads the winners, checks the
//     conflict rules against each, and rebuilds on the new HEAD. It never resends a version
//     built on a stale parent.
//   - A commit whose manifest put has an unknown outcome is decided by reading that version
//     back: the transaction id tells ours from anyone else's, so a retry with the same
//     transaction id commits at most once.
//   - Every decoded object is checked (magic, format version, CRC32C); corruption and newer
//     formats are reported with the table, the version and the object key.
package manifest
