package serve

import (
	"context"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/serve/gather"
)

// Metrics is what the runtime reports to the admin endpoint's Prometheus metrics:
// *admin.Metrics implements it (label values: admin's Phase and Result constants, a
// plan.SkipReason, admin.ClassName). Nil in Options reports nothing.
type Metrics interface {
	// ObserveScheduleToBind: an assignment of kind was bound d after it was placed.
	ObserveScheduleToBind(kind string, d time.Duration)
	// ObserveTurnWait: a write-turn unit of kind was placed after waiting d (exact ages only).
	ObserveTurnWait(kind string, d time.Duration)
	// Placement counts one placement result: admin.ResultPlaced, admin.ResultConflict, admin.ResultError or a
	// plan.SkipReason.
	Placement(result string)
	// SetBacklog sets the scored units of the last pass by class name.
	SetBacklog(byClass map[string]int)
	// Execution counts an execution phase of kind (admin.PhaseBound, admin.PhaseSucceeded, …).
	Execution(kind, phase string)
	// SetRunning sets the executions of kind running in this process.
	SetRunning(kind string, n int)
	// Stall counts an execution of kind the watchdog cancelled.
	Stall(kind string)
	// Recovery counts a recovery outcome by its action (recovery.Outcome.Action).
	Recovery(action string)
	// SetLeader sets whether this process plans.
	SetLeader(bool)
	// ObservePass records a planning pass's duration and the etcd bytes it read for demand.
	ObservePass(d time.Duration, etcdBytes int64)
	// SetTopTables sets the pending generations by table (the metric keeps the top N).
	SetTopTables(pending map[string]uint64)
}

// nopMetrics reports nothing.
type nopMetrics struct{}

func (nopMetrics) ObserveScheduleToBind(string, time.Duration) {}
func (nopMetrics) ObserveTurnWait(string, time.Duration)       {}
func (nopMetrics) Placement(string)                            {}
func (nopMetrics) SetBacklog(map[string]int)                   {}
func (nopMetrics) Execution(string, string)                    {}
func (nopMetrics) SetRunning(string, int)                      {}
func (nopMetrics) Stall(string)                                {}
func (nopMetrics) Recovery(string)                             {}
func (nopMetrics) SetLeader(bool)                              {}
func (nopMetrics) ObservePass(time.Duration, int64)            {}
func (nopMetrics) SetTopTables(map[string]uint64)              {}

// reconcileDemand republishes table's WAL demand from storage (gather.Reconcile).
func reconcileDemand(ctx context.Context, db *engine.DB, table string) error {
	_, err := gather.Reconcile(ctx, db, table)
	return err
}
