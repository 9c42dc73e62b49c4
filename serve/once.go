package serve

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// OnceResult is what Once did: its planning pass and the executions of the work the pass
// placed on this process.
type OnceResult struct {
	Pass       PassResult        // the pass
	Executions []ExecutionResult // the work it placed here, in completion order
}

// Once registers the executor, wins the election, plans one pass, gives up the
// leadership and runs the work the pass placed on this process until it ends, then
// releases its lease (for cron and tests). Work placed on other live executors is
// theirs to run. With another process leading it returns ErrLeaderRunning at once:
// that planner already places the work. The server cannot be started afterwards.
// Errors: state.ErrConfigMismatch, ErrLeaderRunning, gather and etcd errors; failed
// executions are in the result, not the error.
func (s *Server) Once(ctx context.Context) (OnceResult, error) {
	if !s.closed.CompareAndSwap(false, true) {
		return OnceResult{}, ErrClosed
	}
	if err := s.setup(ctx); err != nil {
		return OnceResult{}, err
	}
	s.mu.Lock()
	sess, el := s.sess, s.elect
	s.mu.Unlock()
	defer sess.Close()
	if id, _, err := s.st.Leader(ctx); err != nil {
		return OnceResult{}, err
	} else if id != "" {
		return OnceResult{}, fmt.Errorf("%w (%s); stop it or let it work", ErrLeaderRunning, id)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL)
	err := el.Campaign(cctx, s.opts.ID)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return OnceResult{}, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			id, _, _ := s.st.Leader(ctx)
			return OnceResult{}, fmt.Errorf("%w (%s)", ErrLeaderRunning, id)
		}
		return OnceResult{}, fmt.Errorf("serve: campaign: %w", err)
	}
	s.setLeading(true)
	pass, err := s.pass(ctx, leadership{key: el.Key(), rev: el.Rev()})
	s.setLeading(false)
	s.resign(el)
	res := OnceResult{Pass: pass}
	if err != nil {
		return res, err
	}
	done := make(chan ExecutionResult, len(pass.Placed))
	n := 0
	for _, a := range pass.Placed {
		if a.Executor == s.opts.ID && s.startExecution(ctx, a, done) {
			n++
		}
	}
	// ctx ending (SIGTERM) hands the running work back.
	stop := context.AfterFunc(ctx, func() { s.cancelExecutions(errDrained) })
	defer stop()
	for range n {
		res.Executions = append(res.Executions, <-done)
	}
	s.log.Info("serve: once done", "placed", len(pass.Placed), "ran", n, "elapsed", time.Since(s.start).Round(time.Millisecond))
	return res, nil
}
