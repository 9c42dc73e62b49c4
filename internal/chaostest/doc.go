// Package chaostest is issue 8's acceptance test: a bounded, seeded chaos run with
// several OS processes on two tables (writers appending, deleting, updating and
// overwriting; a compaction; recovery; garbage collection at the smallest grace the CLI
// allows and at zero), random SIGSTOP/SIGCONT past the lease, SIGKILL at failpoint seams
// and anywhere, and lost store and etcd replies. Afterwards every version verifies, every
// acknowledged row is present exactly once, every Committed outcome is visible and every
// Rejected one is not, and the tables equal a model replayed from the writers' journals.
//
// It holds only tests; children are the test binary re-executed with
// SHALE_CHAOSTEST_CHILD set to their configuration. The CI size runs in the default
// `go test ./...`; SHALE_SLOW=1 runs a larger one; SHALE_SEED replays a run's choices.
package chaostest
