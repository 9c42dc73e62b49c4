package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/repair"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// ErrStalled is the cause of an execution the watchdog cancelled: it completed no
// storage request for the idle timeout. Its failure class is retryable.
var ErrStalled = errors.New("serve: execution stalled: no storage progress within the idle timeout")

// ErrRecoveryDeferred ends a recover execution that resolved nothing because every
// pending sidecar was skipped (too young, its operation still holds a live hold, or
// another recovery claims it). It is retryable, so the failure ledger backs the unit
// off (2 s, 2 s, then 30 s doubling) instead of the planner placing it again at once
// for as long as the sidecar stays young.
var ErrRecoveryDeferred = errors.New("serve: recovery deferred: every pending sidecar was skipped (young, live or claimed)")

// recoveryDeferred reports whether rep resolved nothing and skipped something: every
// outcome is a skip.
func recoveryDeferred(rep recovery.Report) bool {
	for _, o := range rep.Outcomes {
		switch o.Action {
		case recovery.SkippedYoung, recovery.SkippedLive, recovery.SkippedClaimed:
		default:
			return false
		}
	}
	return len(rep.Outcomes) > 0
}

// execution is one assignment running on this executor.
type execution struct {
	a      state.Assignment
	cancel context.CancelCauseFunc
	prog   *progress
}

// ExecutionResult is what became of one assignment this executor ran.
type ExecutionResult struct {
	Assignment state.Assignment // the assignment as placed
	Phase      string           // admin.PhaseSucceeded, admin.PhaseFailed, admin.PhaseStalled, admin.PhaseCancelled; "" when it was lost before binding
	Err        error            // why it failed (nil on success)
	Elapsed    time.Duration    // from bind to the end of the work
	// Released: the release transaction removed the assignment (false when it was lost
	// first: released by the lease's expiry).
	Released bool
}

// executorLoop runs the assignments placed on this executor: it watches the assignment
// keys and re-lists them every pass interval (a lost watch event costs one interval).
func (s *Server) executorLoop(ctx context.Context) {
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := s.cli.Watch(clientv3.WithRequireLeader(wctx), s.keys.Assignments(), clientv3.WithPrefix(), clientv3.WithFilterDelete())
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				if a, err := state.DecodeAssignment(ev.Kv.Value); err == nil && a.Executor == s.opts.ID && a.State == state.StateAssigned {
					s.pokeExecutor()
				}
			}
		}
	}()
	ticker := time.NewTicker(s.cfg.PassInterval)
	defer ticker.Stop()
	for {
		if !s.draining.Load() {
			if err := s.takeAssigned(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("serve: list assignments", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-s.poke:
		}
	}
}

// takeAssigned starts every assignment placed on this executor's current registration
// that is not running here yet.
func (s *Server) takeAssigned(ctx context.Context) error {
	resp, err := s.cli.Get(ctx, s.keys.Assignments(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	s.mu.Lock()
	lease := s.sess.Lease()
	s.mu.Unlock()
	for _, kv := range resp.Kvs {
		a, err := state.DecodeAssignment(kv.Value)
		if err != nil || a.Executor != s.opts.ID || clientv3.LeaseID(kv.Lease) != lease {
			continue
		}
		a.CreateRevision, a.ModRevision, a.Lease = kv.CreateRevision, kv.ModRevision, clientv3.LeaseID(kv.Lease)
		s.startExecution(ctx, a, nil)
	}
	return nil
}

// startExecution runs a in a goroutine unless it already runs here; done (when not nil)
// receives its result.
func (s *Server) startExecution(ctx context.Context, a state.Assignment, done chan<- ExecutionResult) bool {
	s.mu.Lock()
	if _, ok := s.running[a.ID]; ok || s.draining.Load() && done == nil {
		s.mu.Unlock()
		return false
	}
	ectx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	e := &execution{a: a, cancel: cancel, prog: newProgress(time.Now())}
	s.running[a.ID] = e
	s.execs.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.execs.Done()
		r := s.execute(ectx, e)
		cancel(nil)
		s.mu.Lock()
		delete(s.running, a.ID)
		s.mu.Unlock()
		s.reportRunning()
		if done != nil {
			done <- r
		}
	}()
	return true
}

// cancelExecutions cancels every running execution with cause.
func (s *Server) cancelExecutions(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.running {
		e.cancel(cause)
	}
}

// execute binds, runs and releases one assignment.
func (s *Server) execute(ctx context.Context, e *execution) ExecutionResult {
	a := e.a
	r := ExecutionResult{Assignment: a}
	start := time.Now()
	log := s.log.With("table", a.Table, "kind", a.Kind, "assignment", a.ID)
	a, err := s.st.Bind(ctx, a, start.UTC())
	if err != nil {
		log.Info("serve: assignment gone before bind", "err", err)
		r.Err = err
		return r
	}
	s.m.Execution(string(a.Kind), admin.PhaseBound)
	s.m.ObserveScheduleToBind(string(a.Kind), start.Sub(a.PlacedAt))
	s.reportRunning()
	log.Info("serve: bound")

	// The watchdog cancels an execution with no completed storage request for the idle
	// timeout; the heartbeat records progress in the assignment.
	wdone := make(chan struct{})
	cur := a
	go func() {
		defer close(wdone)
		check := min(s.cfg.IdleTimeout/4, time.Second)
		beat := max(s.cfg.LeaseTTL/3, check)
		tick := time.NewTicker(check)
		defer tick.Stop()
		lastBeat, lastN := time.Now(), int64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if e.prog.idle(now) >= s.cfg.IdleTimeout {
					e.cancel(ErrStalled)
					return
				}
				if n := e.prog.n.Load(); n != lastN && now.Sub(lastBeat) >= beat {
					na, err := s.st.Progress(ctx, cur, n, now.UTC())
					if errors.Is(err, state.ErrAssignmentLost) {
						e.cancel(err)
						return
					}
					if err == nil {
						cur, lastN, lastBeat = na, n, now
					}
				}
			}
		}
	}()
	err = seamAfterBind.Inject(ctx)
	if err == nil {
		err = s.run(withProgress(ctx, e.prog), a)
	}
	cause := context.Cause(ctx)
	e.cancel(nil) // stop the watchdog
	<-wdone
	r.Elapsed = time.Since(start)
	if err != nil && cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", cause, err)
	}
	handBack := errors.Is(cause, errDrained)
	switch {
	case err == nil:
		r.Phase = admin.PhaseSucceeded
	case errors.Is(cause, ErrStalled):
		r.Phase = admin.PhaseStalled
		s.m.Stall(string(a.Kind))
	case cause != nil:
		r.Phase = admin.PhaseCancelled
	default:
		r.Phase = admin.PhaseFailed
	}
	r.Err = err
	s.m.Execution(string(a.Kind), r.Phase)
	if err != nil {
		log.Warn("serve: execution ended", "phase", r.Phase, "err", err, "elapsed", r.Elapsed)
	} else {
		log.Info("serve: execution succeeded", "elapsed", r.Elapsed)
	}
	if errors.Is(cause, errLeaseLost) || errors.Is(cause, state.ErrAssignmentLost) {
		return r // the assignment went with the lease: nothing to release
	}
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := seamBeforeRelease.Inject(rctx); err != nil {
		r.Err = errors.Join(r.Err, err)
		return r
	}
	var f *plan.Failure
	if err != nil && !handBack {
		prev, _, _ := s.st.Failure(rctx, a.Table, a.Kind)
		f = &plan.Failure{Attempts: prev.Attempts + 1, Class: Classify(err), LastFailure: time.Now().UTC(), LastError: capText(err.Error(), 1024)}
		if r.Phase == admin.PhaseStalled {
			f.Class = plan.FailureRetryable
		}
	}
	// A release whose reply is lost is retried (it is guarded by the assignment's
	// identity, so a retry after a landed release finds it lost and changes nothing). One
	// that still fails leaves the assignment; the executor loop finds it not running here
	// and runs it again (the work is idempotent at its commit points).
	var rerr error
	for attempt := range 3 {
		if attempt > 0 {
			sleep(rctx, time.Duration(attempt)*200*time.Millisecond)
		}
		if rerr = s.st.Release(rctx, cur, f, handBack); rerr == nil || errors.Is(rerr, state.ErrAssignmentLost) {
			break
		}
	}
	if rerr != nil {
		log.Warn("serve: release", "err", rerr)
		return r
	}
	r.Released = true
	return r
}

func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Classify is the failure class of an execution's error, by typed errors only (never
// the text): data or configuration for corrupt or unreadable data, a newer format,
// permanent store errors, drift serve must not publish, a table without a WAL;
// ownership for losing to another writer or owner (commit conflicts, fenced WAL
// writers, aborted transactions, a busy or dropped table, a lost assignment);
// retryable for everything else (transient store and etcd errors, unknown outcomes,
// stalls, cancellations).
func Classify(err error) plan.FailureClass {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, manifest.ErrCorrupt), errors.Is(err, wal.ErrCorrupt), errors.Is(err, recovery.ErrCorrupt),
		errors.Is(err, manifest.ErrFormatTooNew), errors.Is(err, wal.ErrFormatTooNew), errors.Is(err, recovery.ErrNewerFormat),
		errors.Is(err, recovery.ErrUnknownKind), errors.Is(err, catalog.ErrCorrupt),
		errors.Is(err, store.ErrPermanent), errors.Is(err, engine.ErrNoWAL), errors.Is(err, engine.ErrDrift),
		errors.Is(err, repair.ErrLogicalDrift), errors.Is(err, repair.ErrPublishedAhead), errors.Is(err, manifest.ErrTableNotFound):
		return plan.FailureData
	case errors.Is(err, manifest.ErrConflict), errors.Is(err, catalog.ErrConflict), errors.Is(err, catalog.ErrContended),
		errors.Is(err, manifest.ErrTxnAborted), errors.Is(err, manifest.ErrWatermarkMoved), errors.Is(err, wal.ErrFenced),
		errors.Is(err, engine.ErrTableBusy), errors.Is(err, engine.ErrTableDropped), errors.Is(err, state.ErrAssignmentLost),
		errors.Is(err, repair.ErrSidecarPending), errors.Is(err, repair.ErrGroupPending), errors.Is(err, compaction.ErrAttemptsExhausted):
		return plan.FailureOwnership
	}
	return plan.FailureRetryable
}

// run does one unit of work against the progress-counting DB.
func (s *Server) run(ctx context.Context, a state.Assignment) error {
	if err := seamExecute.Inject(ctx); err != nil {
		return err
	}
	db := s.wdb
	switch a.Kind {
	case plan.KindMergeWAL:
		t, err := db.OpenTable(ctx, a.Table)
		if err != nil {
			return err
		}
		if _, err = t.MergeWAL(ctx, engine.MergeWALOptions{}); err != nil {
			return err
		}
		// The merge publishes its watermarks into demand in the background; republish
		// them from storage now, so the next pass sees the merge (also when there was
		// nothing left to merge: demand that lost a merged event is corrected here).
		return reconcileDemand(ctx, db, a.Table)
	case plan.KindCompact:
		ex := compaction.New(db)
		recovery.Enable(ex)
		_, err := ex.Run(ctx, a.Table, s.opts.Compaction)
		return err
	case plan.KindRecover:
		rep, err := recovery.Recover(ctx, db.Store(), db.Catalog(), a.Table, s.opts.Recovery)
		for _, o := range rep.Outcomes {
			s.m.Recovery(o.Action)
		}
		if err == nil && recoveryDeferred(rep) {
			return fmt.Errorf("table %q: %d sidecars: %w", a.Table, len(rep.Outcomes), ErrRecoveryDeferred)
		}
		return err
	case plan.KindPublish:
		// Repair without Force publishes maintenance-only drift and refuses logical drift
		// (repair.ErrLogicalDrift: data or configuration, an operator's call).
		_, err := repair.Repair(ctx, db.Store(), db.Catalog(), a.Table, repair.Options{Confirm: true})
		return err
	case plan.KindIndex:
		t, err := db.OpenTable(ctx, a.Table)
		if err != nil {
			return err
		}
		for _, ix := range t.Indexes() {
			if ix.FragmentsCovered >= ix.Fragments {
				continue
			}
			// Each update commits a version: build the next one on a fresh handle.
			cur, err := db.OpenTable(ctx, a.Table)
			if err != nil {
				return err
			}
			if _, err := cur.UpdateIndex(ctx, ix.Name); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("serve: table %q: unknown kind %q", a.Table, a.Kind)
}
