package serve

import (
	"time"
)

// Metrics is what the runtime reports to the admin endpoint's Prometheus metrics (the
// methods of admin.Metrics; package admin implements it). Nil in Options reports
// nothing.
type Metrics interface {
	ObserveScheduleToBind(kind string, d time.Duration)
	ObserveTurnWait(kind string, d time.Duration)
	Placement(result string)
	SetBacklog(byClass map[string]int)
	Execution(kind, phase string)
	SetRunning(kind string, n int)
	Stall(kind string)
	Recovery(action string)
	SetLeader(bool)
	ObservePass(d time.Duration, etcdBytes int64)
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

// The execution phases reported to Metrics.Execution.
const (
	PhaseBound     = "bound"
	PhaseSucceeded = "succeeded"
	PhaseFailed    = "failed"
	PhaseCancelled = "cancelled"
	PhaseStalled   = "stalled"
)

// The placement results reported to Metrics.Placement besides the skip reasons.
const (
	ResultPlaced   = "placed"
	ResultConflict = "conflict"
	ResultError    = "error"
)
