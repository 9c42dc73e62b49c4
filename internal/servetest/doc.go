// Package servetest is issue 12's acceptance test of `shale serve` with OS processes, a
// real embedded etcd and a real local-disk store:
//
//   - TestServeBoundedRun: three serve processes (serve.New and Start in a child) and two
//     WAL writer processes on three tables for a bounded run, with per-table policies in
//     etcd low enough that merges, compactions and index builds really happen. An
//     executor is SIGKILLed mid-merge (engine.merge_planned) and one mid-compaction
//     (compaction.write_batch): their sidecars are recovered and the work placed again.
//     The leader is SIGKILLed: another leads within the lease TTL plus one pass.
//     Afterwards every acknowledged row is present exactly once, no WAL generation was
//     merged twice (the merged watermarks of every version only grow), no two executions
//     of one table's write turn overlapped (the children's logs of bind and end), the
//     backlog and fragments are within policy after a quiet period, and verify passes.
//   - TestPausedExecutorCannotCommitStale: an executor SIGSTOPped mid-merge (right before
//     its manifest version put) past its lease; another executor merges; SIGCONT: the
//     paused one commits and publishes nothing stale (rows exactly once, watermarks and the published pointer
//     never move back, verify passes).
//   - TestEtcdFaultsDuringPlacementAndRelease: replies lost after etcd applied placement,
//     bind, progress and release transactions, and etcd restarts mid-placement and
//     mid-release: no assignment bound twice, no slot worked twice at once, no work lost.
//   - TestMetricsAndEndpointsMatchWhatHappened: the admin endpoint of a serve process
//     scraped over HTTP, its numbers checked against the work the test made happen.
//   - TestNoRecoverForLiveSidecar: the sidecar of a table's own running compaction is not
//     recovery work: no pass places a recover unit for it.
//   - TestBadInput: unknown tables, bad options and config values, a second planner with
//     a different config: typed, clear errors and nothing changed in etcd.
//
// TestBadInput's CLI part builds the shale binary (skipped with -short).
// TestLostPlacementReplyIsDecidedByAssignmentID: a placement whose reply etcd lost is
// decided by the assignment id in the slot, and counted as placed.
//
// Children are the test binary re-executed with SHALE_SERVETEST_CHILD set to their
// configuration (JSON). Writers journal each append before it ("T") and each
// acknowledgement after it ("A", fsynced); serve children log as JSON lines (slog) to a
// file, so the parent knows which assignment ran where and when. The CI size runs in
// the default `go test ./...`; SHALE_SLOW=1 runs a longer bounded run; SHALE_SEED replays
// its choices. It holds only tests.
package servetest
