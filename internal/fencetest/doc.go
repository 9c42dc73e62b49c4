// Package fencetest pins issue 8's fencing defects with writers in other OS processes:
// a writer paused (SIGSTOP) past its hold's lease while garbage collection deletes what
// it wrote, then resumed (SIGCONT), must fail at its commit point with
// manifest.ErrTxnAborted instead of publishing a version naming deleted objects
// (invariant 15); a write retried after its files were collected is rejected the same
// way; and a writer held at its commit point while its table is dropped (and created
// again) fails with engine.ErrTableDropped instead of landing in the new table or
// reporting success (invariant 16, issue 8 item 10). It holds only tests; children are the test binary re-executed with
// SHALE_FENCETEST_CHILD set, each printing one result line (FENCETEST-RESULT {json}).
package fencetest
