// Package verify checks a table's stored objects against each other (DESIGN §11,
// `shale verify`): the published pointer in etcd against the manifest it names, the
// manifest chain 1..HEAD, every data file and deletion vector a version references
// (read in full, so every CRC32C is checked), fragment row counts, and index entries.
//
// Verification never writes. It reports what it finds as a Report: faults (corruption or
// a broken invariant, each naming the object key and version) and notes (states that are
// legal but worth knowing, such as aborted multi-table group versions or index coverage
// of fragments compaction has since removed). A run that cannot proceed at all (the store
// cannot be listed, etcd cannot be reached) returns an error instead.
//
// Where to start: All(ctx, st, db.Catalog(), Options{}) checks every table, Table one;
// Report.Err is nil when nothing is wrong and wraps ErrFaults otherwise.
package verify
