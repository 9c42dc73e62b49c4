// Package chaostest is issue 8's acceptance test: a bounded, seeded chaos run with
// several OS processes on two tables (writers appending, deleting, updating and
// overwriting; compaction with recovery sidecars; recovery; garbage collection at the
// smallest grace the CLI allows and at zero), random SIGSTOP/SIGCONT past the lease,
// SIGKILL at failpoint seams and anywhere, slow seams, and lost store and etcd replies.
//
// Writers journal every operation before and after it, each under its own idempotency
// key, so that afterwards each operation can be decided by the store (a version carrying
// its key, tombstones included) and checked against what its writer was told: verify
// finds no fault in any version, no retained version names a missing object, every
// Committed operation landed once, in the version it reported, at or below the published
// version, every Rejected one landed nowhere, no key landed twice, drift is explained, and
// each table (at the published version, at HEAD, at every version a pinned reader scanned
// during the run, and after a last GC with no grace) equals the model replayed from the
// journals in version order, every row exactly once. Finally a fresh append must commit.
//
// It holds only tests; children are the test binary re-executed with
// SHALE_CHAOSTEST_CHILD set to their configuration. The CI size runs in the default
// `go test ./...`; SHALE_SLOW=1 runs a larger one; SHALE_SEED replays a run's choices.
// The two bugs the chaos run found are fixed and pinned by deterministic engine tests
// (TestKeyedRerunFailingBeforeCommitIsDuplicate, TestUnpublishedOverwriteDoesNotBlockAppends).
package chaostest
