// Package fencetest pins issue 8's fencing defects with the parties in separate OS
// processes: a writer paused (SIGSTOP) past its hold's lease (revoked, as etcd does one
// TTL after the last keep-alive, or outlasted for real), or one that never took a hold,
// while garbage collection deletes what it wrote, then resumed (SIGCONT), must fail at
// its commit point with manifest.ErrTxnAborted instead of publishing a version naming
// deleted objects (invariant 15, issue 8 items 1 and 12); a write retried after its files
// were collected is rejected the same way; a compaction paused past its lease and
// recovery's minimum age, and a multi-table transaction paused past another writer's
// group timeout, fail at their commit points (item 12); a commit from a paused process
// that lands between recovery's scan and its fence makes recovery roll forward instead of
// deleting a published version's files (item 2); a pin taken in another process while GC
// runs keeps its version's files through later runs (item 5); and a writer paused at its
// commit point while its table is dropped (and created again) fails with
// engine.ErrTableDropped instead of landing in the new table or reporting success
// (invariant 16, item 10). It holds only tests; children are the test binary re-executed
// with SHALE_FENCETEST_CHILD set, each printing one result line (FENCETEST-RESULT {json}).
package fencetest
