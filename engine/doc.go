// Package engine is Shale's table API: a DB over one store (and, when configured, the etcd
// catalog that holds each table's published version), tables with versions and time
// travel, appends, deletes, updates and overwrites, schema and configuration changes,
// scalar indexes, multi-table transactions, and scans with SQL WHERE filters.
//
// # Where to start
//
// Open a store (store.Open) and an etcd client (coord.Connect), then Open a DB on them.
// DB.CreateTable makes a table from an Arrow schema; DB.OpenTable opens one at its
// published version. Table.Append (or AppendRecord) commits Arrow record batches,
// Table.Delete and Table.Update change rows matching a WHERE expression, and Table.Scan
// reads them back as Arrow record batches. Every write returns a CommitResult and an
// error; classify the error with OutcomeOf, and finish an Unknown write with Table.Retry.
// DB.Snapshot, Table.PrepareAppend / PrepareDelete and DB.Commit write several tables at
// once, all or nothing. The README's "As a library" section is a complete program.
//
// # Outcomes
//
// A write's result is one of three (invariant 5 of the design):
//
//   - Committed (err == nil): the version is in the store and published.
//   - Rejected: nothing took effect and nothing ever will: a conflict
//     (*manifest.ConflictError, errors.Is manifest.ErrConflict), bad input, a dropped table
//     (ErrTableDropped), a fenced transaction (manifest.ErrTxnAborted, below).
//   - Unknown (*UnknownError): the store or etcd did not answer and reading back could not
//     tell. The write may have landed. Pass UnknownError.Txn to Table.Retry, from any
//     handle in any process: the transaction id decides, so it commits at most once. Never
//     delete what an Unknown write created.
//
// # Idempotency keys
//
// A transaction id protects a retry by the same process. A write that may be run again by
// a new process (an import re-run after its client crashed) carries an idempotency key
// (WithIdempotencyKey): the table remembers the keys of its newest keyed writes, and a
// second write with a key already committed commits nothing and returns the first one's
// version with CommitResult.Duplicate set.
//
// # Fencing
//
// Garbage collection and recovery delete the files of transactions that never committed,
// but first commit an abort version naming them. A writer paused past its leases (SIGSTOP,
// a VM freeze) that resumes and tries to commit meets that version and fails with
// manifest.ErrTxnAborted (Rejected: write the data again). Dropping a table fences its
// writers the same way with a drop marker (ErrTableDropped). No clock decides what is
// kept; docs/architecture.md lists every commit point.
//
// # Commit and publish
//
// A write commits a new version in the store (manifest.Commit: the put-if-absent of the
// next version is the linearization point, checked against every version committed since
// the write's read version), then publishes it by fast-forward (catalog.FastForward).
// Because versions are linear and each was conflict-checked against all earlier ones,
// publishing version N also publishes every committed version below it, and a
// fast-forward that finds the pointer already at or past N has met its goal (invariant 4).
// Readers open the published version by default; without a catalog they open HEAD.
//
// # Concurrency
//
// A DB is safe for concurrent use. A Table handle may be read from many goroutines, but a
// write moves it, so give each writing goroutine its own handle. Any number of processes
// may write the same tables through their own DBs.
package engine
