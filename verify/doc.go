// Package verify checks a table's stored objects against each other (DESIGN §11,
// `shale verify`): the published pointer in etcd against the manifest it names, the
// manifest chain 1..HEAD, every data file and deletion vector a version references
// (read in full, so every CRC32C is checked), fragment row counts, and index segments:
// each segment's objects are read whole (a BTree's lookup and every page, a zone map),
// checked against the table's data (a page pairs each row address with the value the
// data holds there, within the page's bounds; a zone's bounds hold its rows), and its
// coverage against the manifest (covered fragments exist, segments of one name are alike
// and disjoint, a BTree holds every row of each covered fragment once, zones tile each
// covered fragment, and no segment describes a fragment it does not cover), and the WAL
// shards (package wal): every shard manifest version decodes (a tombstone gc left is a
// note) and none is missing, the published version's merged watermark of each shard is at
// most the shard's sealed generation and the generations listed above it are contiguous
// up to it, every data file of those generations is read in full, and every entry above
// the replay position decodes (checksum, trailer, metadata).
//
// Verification never writes. It reports what it finds as a Report: faults (corruption or
// a broken invariant, each naming the object key and version) and notes (states that are
// legal but worth knowing, such as aborted multi-table group versions). A run that cannot proceed at all (the store
// cannot be listed, etcd cannot be reached) returns an error instead.
//
// Where to start: All(ctx, st, db.Catalog(), Options{}) checks every table, Table one;
// Report.Err is nil when nothing is wrong and wraps ErrFaults otherwise.
package verify
