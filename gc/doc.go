// Package gc is Shale's garbage collector (DESIGN §12 invariant 13): it expires old
// versions of a table by policy and then deletes the objects no retained version needs.
//
// What is never expired: the published version (the catalog pointer) and everything
// above it, HEAD, and every version at or above the low watermark of the live holds in
// the catalog (catalog.Holds: compactions in flight, pinned readers, in any process).
// The retained versions are always one unbroken suffix of the history (see Floor).
//
// What is deleted, once older than the grace period: data files (<table>/data/*.arrow)
// and abandoned attempt directories (<table>/data/<txn>/…) that no retained version
// references, deletion vectors (<table>/_deletions/…) and index objects
// (<table>/_indices/<txn>/<uuid>/…: an index build that did not commit, a dropped or
// replaced index, segments of a merged index) likewise, transaction records of
// losing commit attempts, of expired versions and of writers that died before their
// manifest put (<table>/_txn/…), a local store's temp files (<root>/.shale-tmp/…), and
// precondition-probe objects of a process that died opening the store (_probe/…). Files under a pending recovery sidecar's attempt
// prefixes are never touched (recovery owns them); Run first resolves stale sidecars
// with recovery.Recover, which collects their outputs. Sidecars, and the claims of
// sidecars that still exist, are not GC's; a claim whose sidecar is gone (its recovery
// died between deleting the sidecar and releasing the claim) is deleted once older than
// the claim TTL (recovery.OrphanClaims). Keys GC does not recognise are kept and reported.
//
// WAL shards (<table>/_wal/<shard>/, package wal): kept are what a reader of a retained
// version reads from the WAL, what a writer may still list, and what fences a stale
// writer; none of it depends on a clock (the grace period spares young WAL objects too,
// for tidiness only). A run reads the newest manifest S of every shard first, before the
// published pointer and the versions, and lists the table's objects after both. Then:
//
//   - An entry (entries/<epoch>/<pos>.arrows) at or below S's replay position goes (its
//     rows are in a generation S lists, or were merged into the base table), except the
//     highest-position entry present in its epoch's directory. For an epoch a later
//     writer fenced, that entry is its fence: a stale writer of the epoch only ever puts
//     at positions at or below it, so while it stays, the stale writer's next put collides
//     and it stops with wal.ErrFenced. Deleting it would reopen the slot: the stale put
//     would land and be acknowledged, and replay, which starts after the replay position,
//     would never read it. (Keeping the last entry of the live epoch as well means the
//     tail a claimant puts its fence after never moves back.)
//   - A generation directory (gen-<g>-<e>-<rand>/, generation g flushed by epoch e) goes
//     only when all of these hold:
//     (a) no retained version, nor one committed during the run, references any of its
//     files: MergeWAL commits a generation's files as base fragments without copying
//     them, so a merged generation is collected like any data file, once compaction has
//     rewritten it and the versions naming it expired;
//     (b) e ≤ S.Epoch: a writer that claimed after the run read S may be flushing, or
//     have flushed, generations S cannot list;
//     (c) not e = S.Epoch with g ≥ S.NextGeneration: S's writer writes a generation's
//     files before it puts the shard manifest listing them (a flush in flight, paused for
//     any length of time at seam wal.flush_files); deleting them would let that put land
//     naming missing files;
//     (d) not listed in S (that very directory, as generation g) with g above the lowest
//     merged watermark (manifest.Manifest.WALMerged) over the retained versions: a reader
//     of a retained version below g reads g from the WAL.
//     Why S comes first: a writer drops a generation from its shard manifest only after a
//     merge committed it. Were the versions read first and S after, a merge committing in
//     between, then a flush dropping the generation, would leave the run with versions
//     that do not name the generation's files and a shard manifest that no longer lists
//     them: it would delete the files of a committed version. In this order a generation
//     S does not list was merged before S was read, so the versions read afterwards hold
//     that merge (or a later one). What goes: generations of fenced epochs (their flush
//     can never be listed: the claim took the version it would put), failed flush
//     attempts (a retry writes a new directory), merged generations no retained version
//     names.
//   - Shard manifests are never deleted (a fenced writer's flush would land in a freed
//     version number); all but the newest Policy.WALKeepManifests of each shard become
//     tombstones (wal.ExpireShardManifest), oldest first.
//   - A shard whose newest manifest does not read is kept whole (WALUnread).
//
// Incarnations: a table dropped and created again is a new incarnation, numbered on from
// the drop marker (manifest.OpDrop). Only HEAD's incarnation is retained (versions from
// its Create, TableReport.IncarnationSince); the manifests and tombstones below it (the
// marker, versions a drop that died midway left, a version a writer of the dropped table
// put into a number the drop freed) are garbage with their records and files, deleted
// once older than the grace period. Their transactions need no fence: the marker fences
// them, and a version below it can never be published (the catalog pointer names a
// later incarnation).
//
// Leftovers of dropped tables: engine.DB.DropTable commits a drop marker, removes the
// catalog pointer, then deletes the table's objects below the marker, and the marker
// stays; a drop that died midway, or a write that raced the drop, leaves objects below
// it. A table whose HEAD is a drop marker (manifest.Tables no longer lists it) has every
// object under data/, _deletions/, _indices/, _txn/, _versions/ and _wal/ except the marker,
// its transaction record and the WAL shard manifests (kept for good, as the marker is)
// deleted once older than the grace period; so does a top-level
// prefix with a valid table name and such children but no manifest at all
// (DroppedCandidates: what drops of older builds left). Either is kept whole while the
// catalog has a pointer (a drop that died before removing it: dropping again finishes
// it) or a live hold for the name, or a pending recovery sidecar names it. Other keys
// under it, top-level objects and the store's own prefixes (_shale/, _recovery/,
// _probe/, .shale-tmp/) are never touched. A run over one table does this for that
// table when it is dropped.
//
// Order (each step is safe to crash after; the next run finishes the job):
//
//  1. recovery.Recover (stale sidecars only: Options.MinAge);
//  2. read the newest manifest of every WAL shard (first: see WAL shards above), the
//     published pointer, then the live holds (in that order: an operation that acquires
//     its hold after GC read the holds reads a version at or above the pointer GC read,
//     which GC keeps), the pending sidecars, and every version's manifest;
//  3. expire versions oldest first: replace the manifest by a tombstone (manifest.Expire;
//     tombstones stay and keep the version's transaction, so a version number is never
//     reused and late commits are still checked against it);
//  4. re-read the holds and HEAD: an expired version that a hold taken meanwhile needs is
//     put back (manifest.Restore) and its files kept; files of versions committed
//     meanwhile are kept;
//  5. fence, then delete: unreferenced files older than the grace period (or than the
//     oldest live non-pin hold, minus HoldSkew) that belong to a transaction this run did
//     not see committed (their keys name it: manifest.KeyTxn) are deleted only after an
//     abort version naming those transactions is committed on top of the newest version
//     read (recovery.Fence), so a writer paused past any grace period or lease fails at
//     its commit instead of publishing deleted files (invariant 15); if one of them
//     committed meanwhile the run reads forward and fences again. Then every unreferenced
//     file goes, with the expired versions' transaction records; then old WAL shard
//     manifest versions become tombstones. A live hold on a version that is already
//     expired (its references unknown) keeps every data file this run;
//  6. list the store (or the one table's prefix), then for each dropped table (HEAD a
//     drop marker, or no manifest) read the pointer, the holds, the pending sidecars and
//     HEAD again, and delete its old objects (a table created again meanwhile has a
//     version above the marker, or a manifest, or young files);
//  7. old temp files, probe objects and orphaned recovery claims.
//
// Where to start: Run(ctx, st, db.Catalog(), table, Policy{}) collects one table ("" for
// every table) with the defaults (keep the last versions the policy names, a grace period
// of an hour); Policy{DryRun: true} reports without deleting. Run is safe to run
// concurrently with writers, compactions, recoveries and other runs, in any process.
package gc
