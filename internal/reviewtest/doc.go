// Package reviewtest pins the compaction review scenarios of issue 4 (the bug classes of
// reference/omnigraph.md §8: B1, B2, B3, B13) with real concurrent writers in other OS
// processes. It holds only tests: each scenario re-executes the test binary as child
// processes (a compaction, an appender, a deleter) against one local store and one
// embedded etcd, holds a child at a failpoint seam (failpoint.BlockUntilFile through
// SHALE_FAILPOINTS) or kills it there, lets another child commit in between, and checks
// what the table, the catalog pointer, the recovery sidecars and recovery.Recover say
// afterwards:
//
//  1. an insert committed and published between our compaction's commit and its publish:
//     the publish fast-forwards (or finds the pointer past it), rows = original + inserted;
//  2. a delete committed before our compaction commits: the compaction replans (the
//     delete touched fragments it rewrites) or rebases (it did not), the deleted rows stay
//     deleted and no row is lost;
//  3. a writer committing after our compaction committed, then our publish failing or
//     our process dying: the sidecar stays until Recover, which rolls forward our version
//     and never claims the other writer's;
//  4. the publish budget running out while the pointer already includes our version
//     (another process published past it): Run reports success;
//  5. a foreign committed-but-unpublished version next to a crashed compaction: Recover
//     neither reports it as ours nor deletes its files or manifest, and its rows stay
//     readable at its version.
//
// A killed compaction child leaves its catalog hold until the hold's lease expires; the
// tests check that Recover skips the sidecar meanwhile (SkippedLive), then revoke the dead
// child's lease (what its expiry does) instead of waiting out the TTL.
//
// Children are the test binary re-executed with SHALE_REVIEWTEST_CHILD=compact|append|
// delete; each prints one result line (REVIEWTEST-RESULT {json}) before exiting.
package reviewtest
