// Package serve is the runtime of `shale serve`, the maintenance sidecar and publisher:
// every process is an executor with a lease-backed heartbeat in etcd; the one that
// holds the etcd election (concurrency.Election) is the planner. The planner's pass
// reads the serve state (package state) and the tables' picture at one revision,
// decides with the pure planner (package plan) and places each placement with one
// guarded transaction (leadership, the executor's lease, the table's slot). Executors
// bind their assignments, run them (merge_wal: engine.Table.MergeWAL; compact:
// package compaction with recovery sidecars; recover: recovery.Recover; publish:
// repair.Repair of maintenance-only drift, never logical drift; index:
// engine.Table.UpdateIndex), heartbeat their progress (completed storage requests,
// counted by wrapping the store) and release them, recording failures in the ledger
// by typed error (Classify). A watchdog cancels an execution with no progress for the
// idle timeout (ErrStalled, retryable); the planner places it again after its
// back-off. Close drains: stop taking work, resign, finish or hand back what runs,
// revoke the lease. Once runs one pass and the work it placed here.
//
// Safety never rests on the assignment lease: every commit goes through the manifest
// commit loop and publishes by fast-forward, so a paused executor whose lease expired
// can commit only what the commit point accepts.
//
// Seams (internal/failpoint): serve.after_bind, serve.execute, serve.before_release,
// serve.before_place.
package serve
