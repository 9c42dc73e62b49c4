package admin

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shale-db/shale/serve/plan"
)

// TopTables is how many tables the top-N gauge shale_serve_table_pending_generations
// carries (see Metrics.SetTopTables): the only metric with table names as labels.
const TopTables = 10

// Other is the label value that stands for any value outside a label's known set (an
// unknown kind, result, phase, class or recovery action), so a caller's bug cannot
// grow a metric's label set without bound.
const Other = "other"

// Placement results other than a plan.SkipReason (Metrics.Placement).
const (
	ResultPlaced   = "placed"   // the placement transaction committed
	ResultConflict = "conflict" // the placement transaction's guards failed (leadership, executor lease or the table's assignment key changed)
	ResultError    = "error"    // the placement transaction failed (etcd unreachable, outcome unknown)
)

// Execution phases (Metrics.Execution).
const (
	PhaseBound     = "bound"     // an executor bound the assignment (state running)
	PhaseSucceeded = "succeeded" // the unit finished and was released
	PhaseFailed    = "failed"    // the unit failed and was released with a failure ledger entry
	PhaseCancelled = "cancelled" // the unit was cancelled (drain, lost lease) and handed back
	PhaseStalled   = "stalled"   // the watchdog cancelled it: no progress for its idle timeout
)

// Recovery actions (Metrics.Recovery): recovery.Outcome.Action's values. A test checks
// that this list matches package recovery's constants.
var recoveryActions = []string{
	"rolled-forward", "already-published", "rolled-back", "skipped-young", "skipped-live",
	"not-landed", "skipped-claimed", "gone", "failed",
}

// executionPhases lists the known execution phases.
var executionPhases = []string{PhaseBound, PhaseSucceeded, PhaseFailed, PhaseCancelled, PhaseStalled}

// classNames are the label values of the classes, by plan.Class.
var classNames = []string{
	plan.ClassRecovery:    "recovery",
	plan.ClassCritical:    "critical",
	plan.ClassCommitReady: "commit_ready",
	plan.ClassNormal:      "normal",
	plan.ClassMaintenance: "maintenance",
	plan.ClassTail:        "tail",
}

// ClassName is the name of planner class c, as the class label of
// shale_serve_backlog_units, as Metrics.SetBacklog's keys, and as the "class" member of
// a unit in /v1/tables/{name}: recovery, critical, commit_ready, normal, maintenance,
// tail. A class this version does not know is "other".
func ClassName(c plan.Class) string {
	if c < 0 || int(c) >= len(classNames) {
		return Other
	}
	return classNames[c]
}

// classFromName is ClassName's inverse (ok false for a name it does not know).
func classFromName(s string) (plan.Class, bool) {
	i := slices.Index(classNames, s)
	return plan.Class(i), i >= 0
}

// The known label values of kind (plan.Kinds) and result (placed, conflict, error and
// every skip reason but SkipNone).
var (
	kindLabels   = kindNames()
	resultLabels = placementResults()
)

// placementResults lists the known placement results.
func placementResults() []string {
	r := []string{ResultPlaced, ResultConflict, ResultError}
	for _, s := range []plan.SkipReason{plan.SkipNoWork, plan.SkipPaused, plan.SkipDropped, plan.SkipUnreadable,
		plan.SkipBelowThreshold, plan.SkipTurnHeld, plan.SkipAlreadyAssigned, plan.SkipPreparationSlot,
		plan.SkipFairnessYield, plan.SkipBackoff, plan.SkipNeedsAttention, plan.SkipNoCapacity,
		plan.SkipPlacementsCapped} {
		r = append(r, string(s))
	}
	return r
}

// kindNames lists the known kinds (plan.Kinds).
func kindNames() []string {
	r := make([]string, len(plan.Kinds))
	for i, k := range plan.Kinds {
		r[i] = string(k)
	}
	return r
}

// known returns v when it is in set, else Other.
func known(v string, set []string) string {
	if slices.Contains(set, v) {
		return v
	}
	return Other
}

// Metrics are the Prometheus metrics of one `shale serve` process, in a registry of their
// own (never the global one), served by Handler and by Server's /metrics. Every method is
// safe for concurrent use, and a nil *Metrics is valid: its methods record nothing (a
// runtime without metrics need not test for nil).
//
// Label values are bounded: kind is one of plan.Kinds, result a plan.SkipReason or one of
// ResultPlaced, ResultConflict and ResultError, phase one of the Phase constants, class a
// ClassName, action a recovery.Outcome action; any other value is recorded as Other.
// Table names appear only in shale_serve_table_pending_generations, at most TopTables of
// them at a time. Every known label combination is exported from the start (at zero), so
// rates and absent series need no special case.
//
// The metrics (durations in seconds, sizes in bytes):
//
//	shale_serve_schedule_to_bind_seconds{kind}      histogram: placement to bind
//	shale_serve_turn_wait_seconds{kind}             histogram: how long placed work had waited for its turn
//	shale_serve_placements_total{result}            counter: placement attempts and skips by result
//	shale_serve_backlog_units{class}                gauge: units of work found by the last planning pass
//	shale_serve_executions_total{kind,phase}        counter: execution phase transitions
//	shale_serve_executions_running{kind}            gauge: executions running on this process
//	shale_serve_stalls_total{kind}                  counter: executions the watchdog cancelled
//	shale_serve_recoveries_total{action}            counter: recovery sidecars resolved, by action
//	shale_serve_leader                              gauge: 1 while this process is the planner
//	shale_serve_plan_pass_seconds                   histogram: planning pass duration
//	shale_serve_plan_etcd_bytes_total               counter: etcd bytes read by planning passes
//	shale_serve_table_pending_generations{table}    gauge: WAL generations pending, top TopTables tables
//
// plus the Go runtime's and the process's standard collectors (go_*, process_*).
type Metrics struct {
	reg *prometheus.Registry

	scheduleToBind *prometheus.HistogramVec
	turnWait       *prometheus.HistogramVec
	placements     *prometheus.CounterVec
	backlog        *prometheus.GaugeVec
	executions     *prometheus.CounterVec
	running        *prometheus.GaugeVec
	stalls         *prometheus.CounterVec
	recoveries     *prometheus.CounterVec
	leader         prometheus.Gauge
	passSeconds    prometheus.Histogram
	passEtcdBytes  prometheus.Counter
	topPending     *prometheus.GaugeVec

	mu  sync.Mutex          // guards top
	top map[string]struct{} // the table labels shale_serve_table_pending_generations has now
}

// NewMetrics returns a Metrics with every metric registered in a new registry of its
// own, every known label combination at zero.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		scheduleToBind: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shale_serve_schedule_to_bind_seconds",
			Help:    "Time from a unit's placement to an executor binding it, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16), // 5 ms .. 164 s
		}, []string{"kind"}),
		turnWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shale_serve_turn_wait_seconds",
			Help:    "How long work had waited when it was placed (from its oldest exact evidence), by kind.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 17), // 100 ms .. 1.8 h
		}, []string{"kind"}),
		placements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shale_serve_placements_total",
			Help: "Placement decisions by result: placed, conflict, error, or the planner's skip reason.",
		}, []string{"result"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shale_serve_backlog_units",
			Help: "Units of work the last planning pass found, by class (set by the leader).",
		}, []string{"class"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shale_serve_executions_total",
			Help: "Executions on this process by kind and phase (bound, succeeded, failed, cancelled, stalled).",
		}, []string{"kind", "phase"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shale_serve_executions_running",
			Help: "Executions running on this process, by kind.",
		}, []string{"kind"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shale_serve_stalls_total",
			Help: "Executions the watchdog cancelled for making no progress for their idle timeout, by kind.",
		}, []string{"kind"}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shale_serve_recoveries_total",
			Help: "Recovery sidecars resolved by this process, by recovery action.",
		}, []string{"action"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shale_serve_leader",
			Help: "1 while this process is the elected planner, else 0.",
		}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shale_serve_plan_pass_seconds",
			Help:    "Duration of a planning pass (gather, plan, place).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1 ms .. 16 s
		}),
		passEtcdBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_serve_plan_etcd_bytes_total",
			Help: "Bytes read from etcd by planning passes.",
		}),
		topPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shale_serve_table_pending_generations",
			Help: "Unmerged WAL generations of the tables with the most (at most 10 tables; set by the leader).",
		}, []string{"table"}),
		top: map[string]struct{}{},
	}
	m.reg.MustRegister(m.scheduleToBind, m.turnWait, m.placements, m.backlog, m.executions, m.running,
		m.stalls, m.recoveries, m.leader, m.passSeconds, m.passEtcdBytes, m.topPending,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, k := range kindLabels {
		m.scheduleToBind.WithLabelValues(k)
		m.turnWait.WithLabelValues(k)
		m.running.WithLabelValues(k)
		m.stalls.WithLabelValues(k)
		for _, p := range executionPhases {
			m.executions.WithLabelValues(k, p)
		}
	}
	for _, r := range resultLabels {
		m.placements.WithLabelValues(r)
	}
	for _, c := range classNames {
		m.backlog.WithLabelValues(c)
	}
	for _, a := range recoveryActions {
		m.recoveries.WithLabelValues(a)
	}
	return m
}

// seconds is d in seconds, never negative (a clock step cannot record a negative time).
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}

// ObserveScheduleToBind records d, the time from a unit's placement to its binding by
// an executor, in shale_serve_schedule_to_bind_seconds{kind}. A negative d counts as 0.
func (m *Metrics) ObserveScheduleToBind(kind string, d time.Duration) {
	if m == nil {
		return
	}
	m.scheduleToBind.WithLabelValues(known(kind, kindLabels)).Observe(seconds(d))
}

// ObserveTurnWait records d, how long a unit had waited for its turn when it was placed
// (plan.Unit.Waited; only exact waits should be recorded), in
// shale_serve_turn_wait_seconds{kind}. A negative d counts as 0.
func (m *Metrics) ObserveTurnWait(kind string, d time.Duration) {
	if m == nil {
		return
	}
	m.turnWait.WithLabelValues(known(kind, kindLabels)).Observe(seconds(d))
}

// Placement counts one placement decision in shale_serve_placements_total{result}:
// ResultPlaced, ResultConflict, ResultError, or the plan.SkipReason of a unit not placed
// (as a string).
func (m *Metrics) Placement(result string) {
	if m == nil {
		return
	}
	m.placements.WithLabelValues(known(result, resultLabels)).Inc()
}

// SetBacklog sets shale_serve_backlog_units{class} to byClass's counts, keyed by
// ClassName; a class byClass does not name is set to 0 (so SetBacklog(nil) zeroes the
// gauge, as a process that stops being the leader should). Counts of unknown names are
// summed under Other.
func (m *Metrics) SetBacklog(byClass map[string]int) {
	if m == nil {
		return
	}
	sums := map[string]int{}
	for c, n := range byClass {
		sums[known(c, classNames)] += n
	}
	for _, c := range classNames {
		m.backlog.WithLabelValues(c).Set(float64(sums[c]))
	}
	if n, ok := sums[Other]; ok {
		m.backlog.WithLabelValues(Other).Set(float64(n))
	} else {
		m.backlog.DeleteLabelValues(Other)
	}
}

// Execution counts one phase transition of an execution of kind in
// shale_serve_executions_total{kind,phase}; phase is one of PhaseBound, PhaseSucceeded,
// PhaseFailed, PhaseCancelled and PhaseStalled. It does not count stalls in
// shale_serve_stalls_total (Stall does).
func (m *Metrics) Execution(kind, phase string) {
	if m == nil {
		return
	}
	m.executions.WithLabelValues(known(kind, kindLabels), known(phase, executionPhases)).Inc()
}

// SetRunning sets shale_serve_executions_running{kind} to n, the executions of kind
// running on this process now.
func (m *Metrics) SetRunning(kind string, n int) {
	if m == nil {
		return
	}
	m.running.WithLabelValues(known(kind, kindLabels)).Set(float64(n))
}

// Stall counts one execution of kind the watchdog cancelled for making no progress for
// its idle timeout, in shale_serve_stalls_total{kind}.
func (m *Metrics) Stall(kind string) {
	if m == nil {
		return
	}
	m.stalls.WithLabelValues(known(kind, kindLabels)).Inc()
}

// Recovery counts one recovery sidecar resolved with action (recovery.Outcome.Action:
// rolled-forward, rolled-back, failed, …) in shale_serve_recoveries_total{action}.
func (m *Metrics) Recovery(action string) {
	if m == nil {
		return
	}
	m.recoveries.WithLabelValues(known(action, recoveryActions)).Inc()
}

// SetLeader sets shale_serve_leader to 1 (this process is the elected planner) or 0.
func (m *Metrics) SetLeader(leader bool) {
	if m == nil {
		return
	}
	v := 0.0
	if leader {
		v = 1
	}
	m.leader.Set(v)
}

// ObservePass records one planning pass: its duration d in shale_serve_plan_pass_seconds
// (negative counts as 0) and the etcd bytes it read in shale_serve_plan_etcd_bytes_total
// (a negative count adds nothing).
func (m *Metrics) ObservePass(d time.Duration, etcdBytes int64) {
	if m == nil {
		return
	}
	m.passSeconds.Observe(seconds(d))
	if etcdBytes > 0 {
		m.passEtcdBytes.Add(float64(etcdBytes))
	}
}

// SetTopTables sets shale_serve_table_pending_generations{table} for the TopTables tables
// of pending (table name -> unmerged WAL generations) with the most pending generations,
// ties broken by name; tables with none pending are left out. Labels of tables no longer
// among them are deleted, so the metric never has more than TopTables series.
// SetTopTables(nil) removes them all (as a process that stops being the leader should).
func (m *Metrics) SetTopTables(pending map[string]uint64) {
	if m == nil {
		return
	}
	type tp struct {
		table string
		n     uint64
	}
	all := make([]tp, 0, len(pending))
	for t, n := range pending {
		if n > 0 {
			all = append(all, tp{t, n})
		}
	}
	slices.SortFunc(all, func(a, b tp) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return strings.Compare(a.table, b.table)
	})
	all = all[:min(len(all), TopTables)]

	m.mu.Lock()
	defer m.mu.Unlock()
	keep := make(map[string]struct{}, len(all))
	for _, e := range all {
		keep[e.table] = struct{}{}
		m.topPending.WithLabelValues(e.table).Set(float64(e.n))
	}
	for t := range m.top {
		if _, ok := keep[t]; !ok {
			m.topPending.DeleteLabelValues(t)
		}
	}
	m.top = keep
}

// Handler returns the HTTP handler that serves the metrics in the Prometheus exposition
// formats (text, or OpenMetrics when the scraper asks for it). Errors gathering a metric
// are reported with HTTP 500. Safe for concurrent use; a nil *Metrics serves an empty
// registry.
func (m *Metrics) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	if m != nil {
		reg = m.reg
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true})
}
