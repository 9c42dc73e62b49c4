package admin

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/shale-db/shale/serve/plan"
)

// The JSON of the admin endpoint follows the CLI's --json conventions (docs/json.md):
// snake_case members, lists are [] when empty and never null, members that do not apply
// (zero times, empty strings marked "omitted when empty") are left out, times are RFC 3339
// in UTC, durations are *_ms integers (milliseconds), sizes are bytes. Every type here
// marshals that way whoever encodes it (the HTTP handlers, `shale serve status --json`),
// and unmarshals from it.

// Status is one process's view of the sidecar: itself, the leader, the live executors and
// the assignments in etcd (GET /v1/status, `shale serve status`).
type Status struct {
	Executor    string           `json:"executor"`    // this process's executor id
	Leader      string           `json:"leader"`      // the elected planner's executor id ("" while there is none)
	IsLeader    bool             `json:"is_leader"`   // this process is the planner
	Executors   []ExecutorInfo   `json:"executors"`   // the live executors (heartbeat lease held), by id
	Assignments []AssignmentInfo `json:"assignments"` // every assignment in etcd, by table then kind
	Draining    bool             `json:"draining"`    // this process is draining (SIGTERM): it takes no new work
}

// MarshalJSON encodes s with [] for nil lists.
func (s Status) MarshalJSON() ([]byte, error) {
	type plain Status
	p := plain(s)
	p.Executors = nonNilSlice(p.Executors)
	p.Assignments = nonNilSlice(p.Assignments)
	return json.Marshal(p)
}

// ExecutorInfo is one live executor as its heartbeat key advertises it.
type ExecutorInfo struct {
	ID       string         `json:"id"`                // the executor id (unique among live executors)
	Addr     string         `json:"addr,omitempty"`    // its admin endpoint's address, host:port (omitted when it has none)
	Slots    map[string]int `json:"slots"`             // slots per kind (plan.Kind names); a kind left out has none
	Bytes    int64          `json:"bytes"`             // its memory budget for reservations, bytes
	Started  time.Time      `json:"started,omitzero"`  // when the process started (omitted when unknown)
	Running  int            `json:"running"`           // assignments placed on it now (assigned or running)
	Reserved int64          `json:"reserved,omitzero"` // bytes those assignments reserve (omitted when 0)
}

// MarshalJSON encodes e with its time in UTC and {} for nil Slots.
func (e ExecutorInfo) MarshalJSON() ([]byte, error) {
	type plain ExecutorInfo
	p := plain(e)
	p.Started = utc(p.Started)
	if p.Slots == nil {
		p.Slots = map[string]int{}
	}
	return json.Marshal(p)
}

// Assignment states (AssignmentInfo.State).
const (
	StateAssigned = "assigned" // placed, not yet bound by its executor
	StateRunning  = "running"  // bound: the executor runs it
)

// AssignmentInfo is one assignment in etcd: work of one kind on one table placed on an
// executor.
type AssignmentInfo struct {
	ID         string    `json:"id"`                   // the assignment id (a ULID)
	Table      string    `json:"table"`                // the table worked on
	Kind       string    `json:"kind"`                 // the kind of work (a plan.Kind)
	Executor   string    `json:"executor"`             // the executor it is placed on
	State      string    `json:"state"`                // StateAssigned or StateRunning
	PlacedAt   time.Time `json:"placed_at,omitzero"`   // when the planner placed it
	BoundAt    time.Time `json:"bound_at,omitzero"`    // when the executor bound it (omitted while assigned)
	Progress   int64     `json:"progress"`             // completed storage requests so far (grows while the work progresses)
	ProgressAt time.Time `json:"progress_at,omitzero"` // when Progress last grew (omitted before any progress)
	Bytes      int64     `json:"bytes"`                // bytes reserved on the executor
}

// MarshalJSON encodes a with its times in UTC.
func (a AssignmentInfo) MarshalJSON() ([]byte, error) {
	type plain AssignmentInfo
	p := plain(a)
	p.PlacedAt, p.BoundAt, p.ProgressAt = utc(p.PlacedAt), utc(p.BoundAt), utc(p.ProgressAt)
	return json.Marshal(p)
}

// TableReport is what the sidecar knows and decides about one table (GET
// /v1/tables/{name}, `shale serve status TABLE`, `shale why TABLE`): its demand and shape,
// the policy in force, the scored units and the skips of a planning pass, what would run
// next or the named reason nothing will, its assignments and its failure ledger.
//
// Its JSON (MarshalJSON) has snake_case members; the plan types in it have none of their
// own, so TableReport spells them out: state (pending_generations, pending_bytes,
// oldest_pending, age_known, age_exact, fragments, small_fragments, deleted_ratio_high,
// uncovered_by_index, drift, pending_sidecars, largest_generation_bytes, compact_bytes,
// index_bytes, dropped, unreadable), policy (paused, min_generations,
// critical_generations, max_age_ms, max_turn_wait_ms, min_small_fragments, min_uncovered,
// max_consecutive_turns, max_attempts_before_hold), units[] (kind, class as a ClassName,
// score — left out for a recovery unit, whose score is infinite: infinite_score is true
// instead —, reason, waited_ms, wait_known, bytes, slots, promoted), skips[] (kind,
// reason, detail, retry_at, unit), failures (by kind: attempts, class, last_failure,
// last_error), no_executors (only when true).
type TableReport struct {
	Table       string                  // the table's name
	State       plan.TableState         // the planner's picture of the table
	Policy      plan.Policy             // the policy in force (defaults applied)
	Units       []plan.Unit             // the table's scored units, in planning order
	Skips       []plan.Skip             // why each kind is not placed (no_work included)
	Next        string                  // the kind a planning pass made now would place on the table (a plan.Kind); "" when none
	Reason      string                  // when Next is "": the named reason (a plan.SkipReason: its first unit's skip in planning order, no_work when it has none); else ""
	Assignments []AssignmentInfo        // the table's assignments in etcd
	Failures    map[string]plan.Failure // the failure ledger, by kind
	NoExecutors bool                    // no executor is live (no shale serve process is running): nothing is placed until one starts
}

// tableReportJSON is TableReport's JSON.
type tableReportJSON struct {
	Table       string                 `json:"table"`
	State       tableStateJSON         `json:"state"`
	Policy      PolicyJSON             `json:"policy"`
	Units       []unitJSON             `json:"units"`
	Skips       []skipJSON             `json:"skips"`
	Next        string                 `json:"next,omitempty"`
	Reason      string                 `json:"reason,omitempty"`
	Assignments []AssignmentInfo       `json:"assignments"`
	Failures    map[string]failureJSON `json:"failures"`
	NoExecutors bool                   `json:"no_executors,omitempty"`
}

// tableStateJSON is plan.TableState's JSON.
type tableStateJSON struct {
	Table                  string    `json:"table"`
	PendingGenerations     uint64    `json:"pending_generations"`
	PendingBytes           uint64    `json:"pending_bytes"`
	OldestPending          time.Time `json:"oldest_pending,omitzero"`
	AgeKnown               bool      `json:"age_known"`
	AgeExact               bool      `json:"age_exact"`
	Fragments              int       `json:"fragments"`
	SmallFragments         int       `json:"small_fragments"`
	DeletedRatioHigh       int       `json:"deleted_ratio_high"`
	UncoveredByIndex       int       `json:"uncovered_by_index"`
	Drift                  int       `json:"drift"`
	PendingSidecars        int       `json:"pending_sidecars"`
	LargestGenerationBytes int64     `json:"largest_generation_bytes"`
	CompactBytes           int64     `json:"compact_bytes"`
	IndexBytes             int64     `json:"index_bytes"`
	Dropped                bool      `json:"dropped"`
	Unreadable             string    `json:"unreadable,omitempty"`
}

// PolicyJSON is plan.Policy's JSON, as /v1/tables/{name}, `shale why --json` and
// `shale serve policy --json` print it: snake_case knobs, durations in whole
// milliseconds (*_ms). Build one with NewPolicyJSON.
type PolicyJSON struct {
	Paused                bool   `json:"paused"`                   // no work is placed on the table
	MinGenerations        uint64 `json:"min_generations"`          // pending WAL generations for merge score 1
	CriticalGenerations   uint64 `json:"critical_generations"`     // pending generations that make a merge critical
	MaxAgeMS              int64  `json:"max_age_ms"`               // merge score age boost period, milliseconds
	MaxTurnWaitMS         int64  `json:"max_turn_wait_ms"`         // waits longer than this are promoted, milliseconds
	MinSmallFragments     int    `json:"min_small_fragments"`      // small fragments for compaction score 1
	MinUncovered          int    `json:"min_uncovered"`            // uncovered fragments for index score 1
	MaxConsecutiveTurns   int    `json:"max_consecutive_turns"`    // write turns one kind may take in a row while another waits
	MaxAttemptsBeforeHold int    `json:"max_attempts_before_hold"` // retryable failures before needs_attention
}

// NewPolicyJSON is p's JSON form (durations truncated to milliseconds).
func NewPolicyJSON(p plan.Policy) PolicyJSON {
	return PolicyJSON{p.Paused, p.MinGenerations, p.CriticalGenerations, p.MaxAge.Milliseconds(), p.MaxTurnWait.Milliseconds(),
		p.MinSmallFragments, p.MinUncovered, p.MaxConsecutiveTurns, p.MaxAttemptsBeforeHold}
}

// unitJSON is plan.Unit's JSON (Table is the report's).
type unitJSON struct {
	Kind          string   `json:"kind"`
	Class         string   `json:"class"`
	Score         *float64 `json:"score,omitempty"`
	InfiniteScore bool     `json:"infinite_score,omitempty"`
	Reason        string   `json:"reason,omitempty"`
	WaitedMS      int64    `json:"waited_ms"`
	WaitKnown     bool     `json:"wait_known"`
	Bytes         int64    `json:"bytes"`
	Slots         int      `json:"slots"`
	Promoted      bool     `json:"promoted"`
}

// skipJSON is plan.Skip's JSON (Table is the report's).
type skipJSON struct {
	Kind    string    `json:"kind"`
	Reason  string    `json:"reason"`
	Detail  string    `json:"detail,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	Unit    *unitJSON `json:"unit,omitempty"`
}

// failureJSON is plan.Failure's JSON.
type failureJSON struct {
	Attempts    int       `json:"attempts"`
	Class       string    `json:"class"`
	LastFailure time.Time `json:"last_failure,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
}

// MarshalJSON encodes r as documented on TableReport.
func (r TableReport) MarshalJSON() ([]byte, error) {
	st := r.State
	w := tableReportJSON{
		Table: r.Table,
		State: tableStateJSON{
			Table: st.Table, PendingGenerations: st.PendingGenerations, PendingBytes: st.PendingBytes,
			OldestPending: utc(st.OldestPending), AgeKnown: st.AgeKnown, AgeExact: st.AgeExact,
			Fragments: st.Fragments, SmallFragments: st.SmallFragments, DeletedRatioHigh: st.DeletedRatioHigh,
			UncoveredByIndex: st.UncoveredByIndex, Drift: st.Drift, PendingSidecars: st.PendingSidecars,
			LargestGenerationBytes: st.LargestGeneration, CompactBytes: st.CompactBytes, IndexBytes: st.IndexBytes,
			Dropped: st.Dropped, Unreadable: st.Unreadable,
		},
		Policy:      NewPolicyJSON(r.Policy),
		Units:       make([]unitJSON, 0, len(r.Units)),
		Skips:       make([]skipJSON, 0, len(r.Skips)),
		Next:        r.Next,
		Reason:      r.Reason,
		Assignments: nonNilSlice(r.Assignments),
		Failures:    make(map[string]failureJSON, len(r.Failures)),
		NoExecutors: r.NoExecutors,
	}
	for _, u := range r.Units {
		w.Units = append(w.Units, toUnitJSON(u))
	}
	for _, s := range r.Skips {
		sj := skipJSON{Kind: string(s.Kind), Reason: string(s.Reason), Detail: s.Detail, RetryAt: utc(s.RetryAt)}
		if s.Unit != nil {
			u := toUnitJSON(*s.Unit)
			sj.Unit = &u
		}
		w.Skips = append(w.Skips, sj)
	}
	for k, f := range r.Failures {
		w.Failures[k] = failureJSON{Attempts: f.Attempts, Class: string(f.Class), LastFailure: utc(f.LastFailure),
			LastError: f.LastError}
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes r from MarshalJSON's encoding (for clients of /v1/tables/{name}).
// Errors: malformed JSON, or a unit class that is not a ClassName.
func (r *TableReport) UnmarshalJSON(b []byte) error {
	var w tableReportJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	s := w.State
	out := TableReport{
		Table: w.Table,
		State: plan.TableState{
			Table: s.Table, PendingGenerations: s.PendingGenerations, PendingBytes: s.PendingBytes,
			OldestPending: s.OldestPending, AgeKnown: s.AgeKnown, AgeExact: s.AgeExact, Fragments: s.Fragments,
			SmallFragments: s.SmallFragments, DeletedRatioHigh: s.DeletedRatioHigh,
			UncoveredByIndex: s.UncoveredByIndex, Drift: s.Drift, PendingSidecars: s.PendingSidecars,
			LargestGeneration: s.LargestGenerationBytes, CompactBytes: s.CompactBytes, IndexBytes: s.IndexBytes,
			Dropped: s.Dropped, Unreadable: s.Unreadable,
		},
		Policy: plan.Policy{
			Paused: w.Policy.Paused, MinGenerations: w.Policy.MinGenerations,
			CriticalGenerations: w.Policy.CriticalGenerations,
			MaxAge:              time.Duration(w.Policy.MaxAgeMS) * time.Millisecond,
			MaxTurnWait:         time.Duration(w.Policy.MaxTurnWaitMS) * time.Millisecond,
			MinSmallFragments:   w.Policy.MinSmallFragments, MinUncovered: w.Policy.MinUncovered,
			MaxConsecutiveTurns: w.Policy.MaxConsecutiveTurns, MaxAttemptsBeforeHold: w.Policy.MaxAttemptsBeforeHold,
		},
		Next: w.Next, Reason: w.Reason, Assignments: w.Assignments, NoExecutors: w.NoExecutors,
	}
	for _, uj := range w.Units {
		u, err := fromUnitJSON(uj, w.Table)
		if err != nil {
			return err
		}
		out.Units = append(out.Units, u)
	}
	for _, sj := range w.Skips {
		sk := plan.Skip{Table: w.Table, Kind: plan.Kind(sj.Kind), Reason: plan.SkipReason(sj.Reason),
			Detail: sj.Detail, RetryAt: sj.RetryAt}
		if sj.Unit != nil {
			u, err := fromUnitJSON(*sj.Unit, w.Table)
			if err != nil {
				return err
			}
			sk.Unit = &u
		}
		out.Skips = append(out.Skips, sk)
	}
	if len(w.Failures) > 0 {
		out.Failures = make(map[string]plan.Failure, len(w.Failures))
		for k, f := range w.Failures {
			out.Failures[k] = plan.Failure{Attempts: f.Attempts, Class: plan.FailureClass(f.Class),
				LastFailure: f.LastFailure, LastError: f.LastError}
		}
	}
	*r = out
	return nil
}

// toUnitJSON encodes u; an infinite or NaN score is left out (infinite_score for +Inf).
func toUnitJSON(u plan.Unit) unitJSON {
	j := unitJSON{Kind: string(u.Kind), Class: ClassName(u.Class), Reason: u.Reason,
		WaitedMS: u.Waited.Milliseconds(), WaitKnown: u.WaitKnown, Bytes: u.Bytes, Slots: u.Slots,
		Promoted: u.Promote}
	switch {
	case math.IsInf(u.Score, 1):
		j.InfiniteScore = true
	case math.IsInf(u.Score, -1), math.IsNaN(u.Score):
	default:
		s := u.Score
		j.Score = &s
	}
	return j
}

// fromUnitJSON decodes a unit of table.
func fromUnitJSON(j unitJSON, table string) (plan.Unit, error) {
	c, ok := classFromName(j.Class)
	if !ok {
		return plan.Unit{}, fmt.Errorf("admin: table %q: unit %s: unknown class %q", table, j.Kind, j.Class)
	}
	u := plan.Unit{Table: table, Kind: plan.Kind(j.Kind), Class: c, Reason: j.Reason,
		Waited: time.Duration(j.WaitedMS) * time.Millisecond, WaitKnown: j.WaitKnown, Bytes: j.Bytes,
		Slots: j.Slots, Promote: j.Promoted}
	switch {
	case j.InfiniteScore:
		u.Score = math.Inf(1)
	case j.Score != nil:
		u.Score = *j.Score
	}
	return u, nil
}

// utc is t in UTC (the zero time stays zero, so omitzero still leaves it out).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// nonNilSlice is s, or an empty slice for nil (encoded [] rather than null).
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
