package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/gather"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// ErrTableNotFound: Explain was asked about a table the store does not have. The error
// returned also matches plan.ErrUnknownTable, manifest.ErrTableNotFound and
// admin.ErrNotFound (the admin endpoint answers 404).
var ErrTableNotFound = errors.New("serve: table not found")

type tableNotFound struct{ table string }

func (e tableNotFound) Error() string {
	return fmt.Sprintf("table not found: %q is not a table of this store", e.table)
}

func (e tableNotFound) Is(t error) bool {
	return t == ErrTableNotFound || t == plan.ErrUnknownTable || t == manifest.ErrTableNotFound || t == admin.ErrNotFound
}

func assignmentInfo(a state.Assignment) admin.AssignmentInfo {
	return admin.AssignmentInfo{ID: a.ID, Table: a.Table, Kind: string(a.Kind), Executor: a.Executor, State: a.State, PlacedAt: a.PlacedAt,
		BoundAt: a.BoundAt, Progress: a.Progress, ProgressAt: a.ProgressAt, Bytes: a.Bytes}
}

// ReadStatus reads the executors, assignments and leader from etcd (no Server needed:
// `shale serve status`).
func ReadStatus(ctx context.Context, st *state.State) (admin.Status, error) {
	snap, err := st.Read(ctx)
	if err != nil {
		return admin.Status{}, err
	}
	leader, _, err := st.Leader(ctx)
	if err != nil {
		return admin.Status{}, err
	}
	return statusOf(snap, leader), nil
}

func statusOf(snap *state.Snapshot, leader string) admin.Status {
	out := admin.Status{Leader: leader, Executors: []admin.ExecutorInfo{}, Assignments: []admin.AssignmentInfo{}}
	count, reserved := map[string]int{}, map[string]int64{}
	for _, a := range snap.Assignments {
		out.Assignments = append(out.Assignments, assignmentInfo(a))
		count[a.Executor]++
		reserved[a.Executor] += a.Bytes
	}
	for _, e := range snap.Executors {
		slots := e.Slots
		if slots == nil {
			slots = map[string]int{}
		}
		out.Executors = append(out.Executors, admin.ExecutorInfo{ID: e.ID, Addr: e.Addr, Slots: slots, Bytes: e.Bytes, Started: e.Started, Running: count[e.ID],
			Reserved: reserved[e.ID]})
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
func Explain(ctx context.Context, db *engine.DB, table string) (admin.TableReport, error) {
	st := StateOf(db)
	if st == nil {
		return admin.TableReport{}, ErrNoCatalog
	}
	return explain(ctx, db, st, table, gather.Options{})
}

func explain(ctx context.Context, db *engine.DB, st *state.State, table string, gopts gather.Options) (admin.TableReport, error) {
	names, err := db.Tables(ctx)
	if err != nil {
		return admin.TableReport{}, err
	}
	if !slices.Contains(names, table) {
		return admin.TableReport{}, tableNotFound{table}
	}
	snap, err := st.Read(ctx)
	if err != nil {
		return admin.TableReport{}, err
	}
	gopts.Tables = names
	tables, _, err := gather.Tables(ctx, db, gopts)
	if err != nil {
		return admin.TableReport{}, err
	}
	cfg := state.Config{}.WithDefaults()
	if snap.Config != nil {
		cfg = snap.Config.WithDefaults()
	}
	in := buildInput(time.Now(), tables, snap, cfg)
	return report(in, plan.Plan(in), snap, table), nil
}

// report folds one table's part of a pass. Pure.
func report(in plan.Input, out plan.Output, snap *state.Snapshot, table string) admin.TableReport {
	r := admin.TableReport{Table: table, Policy: policyOf(in, table), Units: []plan.Unit{}, Skips: []plan.Skip{}, Assignments: []admin.AssignmentInfo{},
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
	skipOf := map[plan.Kind]plan.Skip{}
	for _, ex := range plan.Explain(out, table) {
		switch {
		case ex.Placement != nil && r.Next == "":
			r.Next = string(ex.Kind)
		case ex.Skip != nil:
			r.Skips = append(r.Skips, *ex.Skip)
			skipOf[ex.Kind] = *ex.Skip
		}
	}
	if r.Next == "" {
		// The named reason: the skip of the table's first unit in planning order; without
		// units, the first skip that is not no_work (dropped, unreadable, paused); else
		// no_work.
		r.Reason = string(plan.SkipNoWork)
		found := false
		for _, u := range r.Units {
			if sk, ok := skipOf[u.Kind]; ok {
				r.Reason, found = string(sk.Reason), true
				break
			}
		}
		for _, sk := range r.Skips {
			if !found && sk.Reason != plan.SkipNoWork {
				r.Reason, found = string(sk.Reason), true
			}
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
	r.NoExecutors = len(in.Executors) == 0
	return r
}

// Status is this process's view (admin.Source).
func (s *Server) Status(ctx context.Context) (admin.Status, error) {
	out, err := ReadStatus(ctx, s.st)
	if err != nil {
		return admin.Status{}, err
	}
	out.Executor, out.IsLeader, out.Draining = s.opts.ID, s.IsLeader(), s.draining.Load()
	return out, nil
}

// Table explains one table (admin.Source); unknown tables match ErrTableNotFound.
func (s *Server) Table(ctx context.Context, name string) (admin.TableReport, error) {
	return explain(ctx, s.db, s.st, name, gather.Options{Compaction: s.opts.Compaction})
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
