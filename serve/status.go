package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// These types mirror package admin's JSON types (admin.Status, admin.TableReport, …)
// field for field; the Server implements admin.Source with them.

// Status is a process's view of the serve processes: executors, assignments, leader.
type Status struct {
	Executor    string           `json:"executor"`    // this process's executor id ("" from the CLI)
	Leader      string           `json:"leader"`      // the planner's executor id ("" none)
	IsLeader    bool             `json:"is_leader"`   // this process plans
	Executors   []ExecutorInfo   `json:"executors"`   // the live executors, by id
	Assignments []AssignmentInfo `json:"assignments"` // every assignment, by table and kind
	Draining    bool             `json:"draining"`    // this process is draining
}

// ExecutorInfo is one live executor.
type ExecutorInfo struct {
	ID      string         `json:"id"`             // the executor id
	Addr    string         `json:"addr,omitempty"` // its admin endpoint
	Slots   map[string]int `json:"slots"`          // slots per kind
	Bytes   int64          `json:"bytes"`          // memory budget
	Started time.Time      `json:"started"`        // when the process started
	Running int            `json:"running"`        // assignments placed on it (assigned or running)
}

// AssignmentInfo is one assignment.
type AssignmentInfo struct {
	ID         string    `json:"id"`                   // the assignment id (a ULID)
	Table      string    `json:"table"`                // the table worked on
	Kind       string    `json:"kind"`                 // the kind of work
	Executor   string    `json:"executor"`             // the executor it is placed on
	State      string    `json:"state"`                // assigned or running
	PlacedAt   time.Time `json:"placed_at"`            // when the planner placed it
	BoundAt    time.Time `json:"bound_at,omitzero"`    // when its executor bound it
	Progress   int64     `json:"progress"`             // completed storage requests, as last recorded
	ProgressAt time.Time `json:"progress_at,omitzero"` // when Progress was recorded
	Bytes      int64     `json:"bytes"`                // bytes reserved on the executor
}

// TableReport explains one table: its picture, policy, scored units, skips, what
// would run next or the named reason it will not.
type TableReport struct {
	Table       string                  `json:"table"`            // the table
	State       plan.TableState         `json:"state"`            // its picture
	Policy      plan.Policy             `json:"policy"`           // its effective policy
	Units       []plan.Unit             `json:"units"`            // its scored units (a recovery unit's Score is +Inf: not JSON-encodable as is)
	Skips       []plan.Skip             `json:"skips"`            // its skips, Kinds order
	Next        string                  `json:"next,omitempty"`   // the kind a pass would place now
	Reason      string                  `json:"reason,omitempty"` // when Next is "": the named reason
	Assignments []AssignmentInfo        `json:"assignments"`      // its assignments
	Failures    map[string]plan.Failure `json:"failures"`         // its failure ledger by kind
}

// ErrTableNotFound: Explain was asked about a table the store does not have. The error
// returned also matches plan.ErrUnknownTable and manifest.ErrTableNotFound.
var ErrTableNotFound = errors.New("serve: table not found")

type tableNotFound struct{ table string }

func (e tableNotFound) Error() string {
	return fmt.Sprintf("table not found: %q is not a table of this store", e.table)
}

func (e tableNotFound) Is(t error) bool {
	return t == ErrTableNotFound || t == plan.ErrUnknownTable || t == manifest.ErrTableNotFound
}

func assignmentInfo(a state.Assignment) AssignmentInfo {
	return AssignmentInfo{ID: a.ID, Table: a.Table, Kind: string(a.Kind), Executor: a.Executor, State: a.State, PlacedAt: a.PlacedAt,
		BoundAt: a.BoundAt, Progress: a.Progress, ProgressAt: a.ProgressAt, Bytes: a.Bytes}
}

// ReadStatus reads the executors, assignments and leader from etcd (no Server needed:
// `shale serve status`).
func ReadStatus(ctx context.Context, st *state.State) (Status, error) {
	snap, err := st.Read(ctx)
	if err != nil {
		return Status{}, err
	}
	leader, _, err := st.Leader(ctx)
	if err != nil {
		return Status{}, err
	}
	return statusOf(snap, leader), nil
}

func statusOf(snap *state.Snapshot, leader string) Status {
	out := Status{Leader: leader, Executors: []ExecutorInfo{}, Assignments: []AssignmentInfo{}}
	count := map[string]int{}
	for _, a := range snap.Assignments {
		out.Assignments = append(out.Assignments, assignmentInfo(a))
		count[a.Executor]++
	}
	for _, e := range snap.Executors {
		slots := e.Slots
		if slots == nil {
			slots = map[string]int{}
		}
		out.Executors = append(out.Executors, ExecutorInfo{ID: e.ID, Addr: e.Addr, Slots: slots, Bytes: e.Bytes, Started: e.Started, Running: count[e.ID]})
	}
	return out
}

// StateOf is the serve state of db's catalog (nil without one).
func StateOf(db *engine.DB) *state.State {
	if db.Catalog() == nil || db.Options().Etcd == nil {
		return nil
	}
	return state.New(db.Options().Etcd, catalogPrefix(db))
}

// Explain reports table as a planning pass made now would decide it (the whole pass is
// planned: capacity and ordering depend on every table). Errors: an error matching
// ErrTableNotFound (and manifest.ErrTableNotFound) for a table the store does not have,
// ErrNoCatalog, gather and etcd errors.
func Explain(ctx context.Context, db *engine.DB, table string) (TableReport, error) {
	st := StateOf(db)
	if st == nil {
		return TableReport{}, ErrNoCatalog
	}
	return explain(ctx, db, st, table, gatherOptions{})
}

func explain(ctx context.Context, db *engine.DB, st *state.State, table string, gopts gatherOptions) (TableReport, error) {
	names, err := db.Tables(ctx)
	if err != nil {
		return TableReport{}, err
	}
	if !slices.Contains(names, table) {
		return TableReport{}, tableNotFound{table}
	}
	snap, err := st.Read(ctx)
	if err != nil {
		return TableReport{}, err
	}
	gopts.Tables = names
	tables, _, err := gatherTables(ctx, db, gopts)
	if err != nil {
		return TableReport{}, err
	}
	cfg := state.Config{}.WithDefaults()
	if snap.Config != nil {
		cfg = snap.Config.WithDefaults()
	}
	in := buildInput(time.Now(), tables, snap, cfg)
	return report(in, plan.Plan(in), snap, table), nil
}

// report folds one table's part of a pass. Pure.
func report(in plan.Input, out plan.Output, snap *state.Snapshot, table string) TableReport {
	r := TableReport{Table: table, Policy: policyOf(in, table), Units: []plan.Unit{}, Skips: []plan.Skip{}, Assignments: []AssignmentInfo{},
		Failures: map[string]plan.Failure{}}
	for _, t := range in.Tables {
		if t.Table == table {
			r.State = t
		}
	}
	for _, u := range out.Units {
		if u.Table == table {
			r.Units = append(r.Units, u)
		}
	}
	var best *plan.Skip
	for _, ex := range plan.Explain(out, table) {
		switch {
		case ex.Placement != nil && r.Next == "":
			r.Next = string(ex.Kind)
		case ex.Skip != nil:
			sk := *ex.Skip
			r.Skips = append(r.Skips, sk)
			if sk.Reason != plan.SkipNoWork && (best == nil || best.Unit == nil || sk.Unit != nil && plan.Less(*sk.Unit, *best.Unit)) {
				best = &sk
			}
		}
	}
	if r.Next == "" {
		if best != nil {
			r.Reason = string(best.Reason)
		} else {
			r.Reason = string(plan.SkipNoWork)
		}
	}
	for _, a := range snap.Assignments {
		if a.Table == table {
			r.Assignments = append(r.Assignments, assignmentInfo(a))
		}
	}
	for k, f := range snap.Failures[table] {
		r.Failures[string(k)] = f
	}
	return r
}

// Status is this process's view (admin.Source).
func (s *Server) Status(ctx context.Context) (Status, error) {
	out, err := ReadStatus(ctx, s.st)
	if err != nil {
		return Status{}, err
	}
	out.Executor, out.IsLeader, out.Draining = s.opts.ID, s.IsLeader(), s.draining.Load()
	return out, nil
}

// Table explains one table (admin.Source); unknown tables match ErrTableNotFound.
func (s *Server) Table(ctx context.Context, name string) (TableReport, error) {
	return explain(ctx, s.db, s.st, name, gatherOptions{Compaction: s.opts.Compaction})
}

// Healthy is nil while the executor's session is alive, etcd answers and the server
// is not draining (admin.Source).
func (s *Server) Healthy(ctx context.Context) error {
	if s.draining.Load() {
		return errors.New("draining")
	}
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	if sess == nil {
		return errors.New("not started")
	}
	select {
	case <-sess.Done():
		return errors.New("etcd session lost (registering again)")
	default:
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := s.cli.Get(cctx, s.keys.Executor(s.opts.ID)); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

func catalogPrefix(db *engine.DB) string {
	k := db.Catalog().Key("")
	return k[:len(k)-len("/tables/")]
}
