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
// references, deletion vectors (<table>/_deletions/…) likewise, transaction records of
// losing commit attempts, of expired versions and of writers that died before their
// manifest put (<table>/_txn/…), a local store's temp files (<root>/.shale-tmp/…), and
// precondition-probe objects of a process that died opening the store (_probe/…). Files under a pending recovery sidecar's attempt
// prefixes are never touched (recovery owns them); Run first resolves stale sidecars
// with recovery.Recover, which collects their outputs. Sidecars, and the claims of
// sidecars that still exist, are not GC's; a claim whose sidecar is gone (its recovery
// died between deleting the sidecar and releasing the claim) is deleted once older than
// the claim TTL (recovery.OrphanClaims). Keys GC does not recognise are kept and reported.
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
// object under data/, _deletions/, _txn/ and _versions/ except the marker and its
// transaction record deleted once older than the grace period; so does a top-level
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
//  2. read the published pointer, then the live holds (in that order: an operation that
//     acquires its hold after GC read the holds reads a version at or above the pointer
//     GC read, which GC keeps), the pending sidecars, and every version's manifest;
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
//     file goes, with the expired versions' transaction records. A live hold on a version
//     that is already expired (its references unknown) keeps every data file this run;
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
