package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/gather"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// leadership is a won election: the key and revision placements are guarded by.
type leadership struct {
	key string
	rev int64
}

// plannerLoop campaigns for the election and, while it leads, plans a pass every
// PassInterval and whenever work is released or an executor joins or leaves. A
// placement refused with state.ErrNotLeader ends the leadership (resign, campaign
// again).
func (s *Server) plannerLoop(ctx context.Context) {
	for ctx.Err() == nil && !s.draining.Load() {
		s.mu.Lock()
		el := s.elect
		s.mu.Unlock()
		if err := el.Campaign(ctx, s.opts.ID); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("serve: campaign", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if s.draining.Load() {
			s.resign(el)
			return
		}
		lead := leadership{key: el.Key(), rev: el.Rev()}
		s.setLeading(true)
		s.log.Info("serve: leading", "key", lead.key)
		s.lead(ctx, el, lead)
		s.setLeading(false)
		s.resign(el)
	}
}

func (s *Server) resign(el *concurrency.Election) {
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = el.Resign(rctx)
}

func (s *Server) setLeading(b bool) {
	s.mu.Lock()
	s.leading = b
	s.mu.Unlock()
	s.m.SetLeader(b)
}

// lead plans passes until ctx ends, the server drains or leadership is lost.
func (s *Server) lead(ctx context.Context, el *concurrency.Election, lead leadership) {
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	// Releases (deletes of assignment keys) and executor changes wake the planner.
	wch := s.cli.Watch(clientv3.WithRequireLeader(wctx), s.keys.Root(), clientv3.WithPrefix())
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				k := string(ev.Kv.Key)
				if ev.Type == clientv3.EventTypeDelete && len(k) > len(s.keys.Assignments()) && k[:len(s.keys.Assignments())] == s.keys.Assignments() ||
					len(k) > len(s.keys.Executors()) && k[:len(s.keys.Executors())] == s.keys.Executors() ||
					k == lead.key && ev.Type == clientv3.EventTypeDelete {
					s.wakePlanner()
				}
			}
		}
	}()
	interval := s.cfg.PassInterval
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for ctx.Err() == nil && !s.draining.Load() {
		res, err := s.pass(ctx, lead)
		if errors.Is(err, state.ErrNotLeader) {
			s.log.Warn("serve: leadership lost", "err", err)
			return
		} else if err != nil && ctx.Err() == nil {
			s.log.Error("serve: planning pass", "err", err)
		}
		// The stored config is the planner's (a --replace-config by another process
		// changes it while this one leads): follow its pass interval.
		if d := res.PassInterval; d > 0 && d != interval {
			s.log.Info("serve: pass interval from the stored config", "was", interval, "now", d)
			interval = d
			ticker.Reset(d)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-s.wake:
		}
	}
}

// PassResult is what one planning pass decided and what became of its placements.
type PassResult struct {
	Input  plan.Input  // what the pass read
	Output plan.Output // what the planner decided
	// Placed are the assignments stored (placements refused at commit are left out).
	Placed []state.Assignment
	// Refused counts placements the transaction refused (slot taken, executor gone).
	Refused int
	// PassInterval is the stored config's pass interval when the pass read one (0: none
	// stored): the leader follows it.
	PassInterval time.Duration
}

// pass plans once and places the output. Errors: state.ErrNotLeader (the leadership is
// gone: nothing more was placed), gather and etcd read errors.
func (s *Server) pass(ctx context.Context, lead leadership) (PassResult, error) {
	start := time.Now()
	in, stats, snap, err := s.input(ctx)
	if err != nil {
		return PassResult{}, err
	}
	out := plan.Plan(in)
	res := PassResult{Input: in, Output: out}
	if snap.Config != nil {
		res.PassInterval = snap.Config.WithDefaults().PassInterval
	}
	s.mu.Lock()
	s.lastPass = passRecord{at: in.Now, in: in, out: out}
	s.mu.Unlock()
	execs := map[string]state.Executor{}
	for _, e := range snap.Executors {
		execs[e.ID] = e
	}
	for _, sk := range out.Skips {
		if sk.Reason != plan.SkipNoWork {
			s.m.Placement(string(sk.Reason))
		}
	}
	s.reconcile(ctx, in.Tables)
	for _, p := range out.Placements {
		a, err := s.place(ctx, lead, p, execs[p.Executor], in, snap)
		switch {
		case errors.Is(err, state.ErrNotLeader):
			s.m.Placement(admin.ResultConflict)
			return res, err
		case errors.Is(err, state.ErrSlotTaken), errors.Is(err, state.ErrExecutorGone):
			s.m.Placement(admin.ResultConflict)
			res.Refused++
			s.log.Info("serve: placement refused", "table", p.Unit.Table, "kind", p.Unit.Kind, "err", err)
		case err != nil:
			s.m.Placement(admin.ResultError)
			res.Refused++
			s.log.Warn("serve: placement failed", "table", p.Unit.Table, "kind", p.Unit.Kind, "err", err)
			if ctx.Err() != nil {
				return res, err
			}
		default:
			s.m.Placement(admin.ResultPlaced)
			if p.Unit.WaitKnown && plan.TakesWriteTurn(p.Unit.Kind) {
				s.m.ObserveTurnWait(string(p.Unit.Kind), p.Unit.Waited)
			}
			res.Placed = append(res.Placed, a)
			s.log.Info("serve: placed", "table", p.Unit.Table, "kind", p.Unit.Kind, "on", p.Executor, "class", p.Unit.Class,
				"reason", p.Unit.Reason, "bytes", p.Bytes, "assignment", a.ID)
			if p.Executor == s.opts.ID {
				s.pokeExecutor()
			}
		}
	}
	backlog := map[string]int{}
	for _, u := range out.Units {
		backlog[admin.ClassName(u.Class)]++
	}
	s.m.SetBacklog(backlog)
	pending := map[string]uint64{}
	for _, t := range in.Tables {
		if t.PendingGenerations > 0 {
			pending[t.Table] = t.PendingGenerations
		}
	}
	s.m.SetTopTables(pending)
	s.m.ObservePass(time.Since(start), stats.DemandBytes)
	return res, nil
}

// reconcilePerPass bounds the tables whose WAL demand one pass republishes from storage.
const reconcilePerPass = 8

// reconcile republishes the WAL demand of the next few tables (round robin over passes)
// from storage, so a lost demand event heals within len(tables)/reconcilePerPass passes.
// Errors are logged: demand is rebuildable and the next round tries again.
func (s *Server) reconcile(ctx context.Context, tables []plan.TableState) {
	if len(tables) == 0 {
		return
	}
	for i := 0; i < reconcilePerPass && i < len(tables); i++ {
		t := tables[(s.reconcileNext+i)%len(tables)]
		if t.Dropped || t.Unreadable != "" {
			continue
		}
		if err := reconcileDemand(ctx, s.db, t.Table); err != nil && ctx.Err() == nil {
			s.log.Warn("serve: reconcile WAL demand", "table", t.Table, "err", err)
		}
	}
	s.reconcileNext = (s.reconcileNext + reconcilePerPass) % len(tables)
}

// place stores one placement with the guarded transaction.
func (s *Server) place(ctx context.Context, lead leadership, p plan.Placement, ex state.Executor, in plan.Input, snap *state.Snapshot) (state.Assignment, error) {
	if ex.ID == "" {
		return state.Assignment{}, fmt.Errorf("place %s on table %q: executor %s: %w", p.Unit.Kind, p.Unit.Table, p.Executor, state.ErrExecutorGone)
	}
	if err := seamBeforePlace.Inject(ctx); err != nil {
		return state.Assignment{}, err
	}
	slots := p.Unit.Slots
	if slots <= 0 {
		slots = 1
	}
	a := state.Assignment{ID: newAssignmentID(in.Now), Table: p.Unit.Table, Kind: p.Unit.Kind, Executor: p.Executor, Bytes: p.Bytes,
		Slots: slots, PlacedAt: time.Now().UTC(), State: state.StateAssigned}
	var hist *plan.History
	if plan.TakesWriteTurn(p.Unit.Kind) {
		pol := policyOf(in, p.Unit.Table)
		turns := append(append([]plan.Kind(nil), snap.Histories[p.Unit.Table].Turns...), p.Unit.Kind)
		if keep := pol.MaxConsecutiveTurns + 1; len(turns) > keep {
			turns = turns[len(turns)-keep:]
		}
		hist = &plan.History{Turns: turns}
	}
	return s.st.Place(ctx, state.Guard{LeaderKey: lead.key, LeaderRevision: lead.rev, Executor: ex}, a, hist)
}

func policyOf(in plan.Input, table string) plan.Policy {
	if p, ok := in.Policies[table]; ok {
		return p.WithDefaults()
	}
	return plan.DefaultPolicy()
}

// input reads everything a pass needs: the serve state at one revision and the tables'
// picture.
func (s *Server) input(ctx context.Context) (plan.Input, gather.Stats, *state.Snapshot, error) {
	snap, err := s.st.Read(ctx)
	if err != nil {
		return plan.Input{}, gather.Stats{}, nil, err
	}
	tables, stats, err := gather.Tables(ctx, s.db, gather.Options{Compaction: s.opts.Compaction})
	if err != nil {
		return plan.Input{}, stats, nil, err
	}
	cfg := s.cfg
	if snap.Config != nil {
		cfg = snap.Config.WithDefaults()
	}
	return buildInput(time.Now(), tables, snap, cfg), stats, snap, nil
}

// buildInput is the planner's input from the tables' picture and the serve state. Pure.
// A table's stored policy names only the knobs it changes: the others come from the
// config's default policy.
func buildInput(now time.Time, tables []plan.TableState, snap *state.Snapshot, cfg state.Config) plan.Input {
	in := plan.Input{Now: now, Tables: tables, Policies: map[string]plan.Policy{}, Histories: snap.Histories,
		Failures: snap.Failures, MaxPlacements: cfg.MaxPlacements}
	for _, t := range tables {
		in.Policies[t.Table] = mergePolicy(snap.Policies[t.Table], cfg.Policy)
	}
	for _, e := range snap.Executors {
		in.Executors = append(in.Executors, e.Plan())
	}
	for _, a := range snap.Assignments {
		in.Assignments = append(in.Assignments, a.Plan())
	}
	return in
}

// mergePolicy fills p's zero knobs from base, then from the defaults (Paused is p's or
// base's).
func mergePolicy(p, base plan.Policy) plan.Policy {
	q := p.Over(base)
	q.Paused = p.Paused || base.Paused
	return q.WithDefaults()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
