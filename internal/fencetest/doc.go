// Package fencetest pins issue 8's fencing defects with writers in other OS processes:
// a writer paused (SIGSTOP) past its hold's lease while garbage collection deletes what
// it wrote, then resumed (SIGCONT), must fail at its commit point with
// manifest.ErrTxnAborted instead of publishing a version naming deleted objects
// (invariant 15); and a write retried after its files were collected is rejected the
// same way. It holds only tests; children are the test binary re-executed with
// SHALE_FENCETEST_CHILD set, each printing one result line (FENCETEST-RESULT {json}).
package fencetest
