// Package plan is the maintenance sidecar's planner as pure functions: from one planning
// pass's Input (per-table state folded from demand records and manifests, policies,
// executors with their capacity, assignments, turn histories and the failure ledger) it
// decides the Output: which units of work to place on which executor, and a named
// SkipReason for everything it does not place. No I/O, no clock (Input.Now), no
// randomness: the same input gives the same output. Eligibility, classes, scores and the
// fairness bounds follow shared/reference/lance-context.md §5 with the defects of §5.3
// fixed (DESIGN §10, invariants 10-12). Package serve runs it under etcd leadership.
//
// Where to start: Plan(Input) is one pass; Why(Input, table) explains one table (for
// `shale why` and /v1/tables/{name}). The rules live in Score (scores and classes), Less
// (order), RetryAfter (the failure ledger's back-off) and Reservation (bytes per unit);
// Plan's doc lists eligibility, fairness and placement.
package plan
