package serve

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// Errors of the runtime.
var (
	// ErrNoCatalog: the DB was opened without etcd; serve needs it.
	ErrNoCatalog = errors.New("serve: the DB has no etcd catalog")
	// ErrLeaderRunning: Once found another process leading (it plans; a one-shot pass
	// beside it would only wait).
	ErrLeaderRunning = errors.New("serve: another serve process is the planner")
	// ErrClosed: the Server was closed.
	ErrClosed = errors.New("serve: server closed")
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// ID is the executor's id, unique among live processes (default host-pid-random).
	ID string
	// Addr is the admin endpoint the executor advertises (informational).
	Addr string
	// Slots per kind (default 1 of each kind).
	Slots map[plan.Kind]int
	// Bytes is the memory budget reservations are counted against (default 1 GiB).
	Bytes int64
	// Config is the planner-wide config; the one stored in etcd must equal it (with
	// defaults applied).
	Config state.Config
	// ReplaceConfig overwrites the stored config with Config instead.
	ReplaceConfig bool
	// Compaction tunes compaction runs and the compaction planning of the picture.
	Compaction compaction.Options
	// Recovery tunes recover units (MinAge: tests use a small one).
	Recovery recovery.Options
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Metrics (nil: none).
	Metrics Metrics
}

// Server is one `shale serve` process: an executor with a lease-backed heartbeat and,
// while it holds the election, the planner. Start it, then Close it (or use Run); or
// use Once for one pass.
type Server struct {
	db    *engine.DB // the caller's DB (gathering)
	wdb   *engine.DB // the same store wrapped to count progress (executions)
	st    *state.State
	opts  Options
	cfg   state.Config // effective (stored) config
	log   *slog.Logger
	m     Metrics
	keys  state.Keys
	cli   *clientv3.Client
	start time.Time

	mu       sync.Mutex
	sess     *concurrency.Session
	exec     state.Executor // our registration (with CreateRevision)
	running  map[string]*execution
	elect    *concurrency.Election
	leading  bool
	lastPass passRecord

	reconcileNext int // the planner's round-robin position (planner goroutine only)

	draining atomic.Bool
	closed   atomic.Bool
	wake     chan struct{} // wakes the planner
	poke     chan struct{} // wakes the executor loop
	cancel   context.CancelFunc
	loops    sync.WaitGroup
	execs    sync.WaitGroup
	done     chan struct{}
	runErr   error
}

// passRecord is the last planning pass (for status and why).
type passRecord struct {
	at  time.Time
	in  plan.Input
	out plan.Output
}

// New builds a Server over db (opened with an etcd catalog). It does no etcd I/O; it
// re-opens db's store wrapped so that executions count their completed storage
// requests (one GET of the store id).
func New(ctx context.Context, db *engine.DB, opts Options) (*Server, error) {
	dbo := db.Options()
	if db.Catalog() == nil || dbo.Etcd == nil {
		return nil, ErrNoCatalog
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("serve config: %w", err)
	}
	if opts.ID == "" {
		host, _ := os.Hostname()
		opts.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), strings.ToLower(ulid.MustNew(ulid.Now(), rand.Reader).String()[20:]))
	}
	if strings.ContainsAny(opts.ID, "/ \t\n") {
		return nil, fmt.Errorf("serve: executor id %q: no '/' or spaces", opts.ID)
	}
	if opts.Slots == nil {
		opts.Slots = map[plan.Kind]int{}
		for _, k := range plan.Kinds {
			opts.Slots[k] = 1
		}
	}
	for k, n := range opts.Slots {
		if !validKind(k) {
			return nil, fmt.Errorf("serve: slots: unknown kind %q (want %s)", k, plan.KindList())
		}
		if n < 0 {
			return nil, fmt.Errorf("serve: slots: %s=%d is negative", k, n)
		}
	}
	if opts.Bytes <= 0 {
		opts.Bytes = 1 << 30
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var m Metrics = nopMetrics{}
	if opts.Metrics != nil {
		m = opts.Metrics
	}
	wdb, err := engine.Open(ctx, progressStore{db.Store()}, dbo)
	if err != nil {
		return nil, err
	}
	st := state.New(dbo.Etcd, catalogPrefix(db))
	return &Server{db: db, wdb: wdb, st: st, opts: opts, log: opts.Logger.With("executor", opts.ID), m: m,
		keys: st.Keys(), cli: dbo.Etcd, running: map[string]*execution{},
		wake: make(chan struct{}, 1), poke: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

func validKind(k plan.Kind) bool {
	for _, x := range plan.Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// SetAddr sets the admin endpoint address the executor advertises (call before Start:
// the admin server's real address when it was started on port 0).
func (s *Server) SetAddr(addr string) { s.opts.Addr = addr }

// ID is the executor's id.
func (s *Server) ID() string { return s.opts.ID }

// State is the serve state in etcd the server uses.
func (s *Server) State() *state.State { return s.st }

// Config is the effective planner-wide config (after Start: the stored one).
func (s *Server) Config() state.Config { return s.cfg }

// IsLeader reports whether this process holds the election now.
func (s *Server) IsLeader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading
}

// setup stores or checks the config, opens a session and registers the executor.
func (s *Server) setup(ctx context.Context) error {
	cfg, err := s.st.EnsureConfig(ctx, s.opts.Config, s.opts.ReplaceConfig)
	if err != nil {
		return err
	}
	s.cfg = cfg.WithDefaults()
	s.start = time.Now().UTC()
	return s.register(ctx)
}

// register opens a new session and registers the executor with its lease.
func (s *Server) register(ctx context.Context) error {
	ttl := int(s.cfg.LeaseTTL / time.Second)
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return fmt.Errorf("serve: open etcd session: %w", err)
	}
	host, _ := os.Hostname()
	slots := map[string]int{}
	for k, n := range s.opts.Slots {
		slots[string(k)] = n
	}
	ex := state.Executor{ID: s.opts.ID, Addr: s.opts.Addr, PID: os.Getpid(), Host: host, Slots: slots, Bytes: s.opts.Bytes,
		Started: s.start, Lease: int64(sess.Lease())}
	rev, err := s.st.RegisterExecutor(ctx, ex, sess.Lease())
	if err != nil {
		sess.Close()
		return err
	}
	ex.CreateRevision = rev
	s.mu.Lock()
	s.sess, s.exec = sess, ex
	s.elect = concurrency.NewElection(sess, s.keys.Leader())
	s.mu.Unlock()
	s.log.Info("serve: executor registered", "lease", fmt.Sprintf("%x", sess.Lease()), "slots", slots, "bytes", s.opts.Bytes)
	return nil
}

// Start registers the executor and starts its loops (executor, planner campaign,
// session watch). It returns once registered. Errors: state.ErrConfigMismatch,
// state.ErrExecutorExists, etcd errors.
func (s *Server) Start(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.setup(ctx); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		defer close(s.done)
		s.runErr = s.generations(lctx)
	}()
	return nil
}

// generations runs the loops of one session at a time: when the session's lease is lost
// (etcd unreachable past the TTL, or the process was paused), every execution is
// cancelled (its assignments are gone with the lease) and the executor registers again
// with a new session.
func (s *Server) generations(ctx context.Context) error {
	for {
		s.mu.Lock()
		sess := s.sess
		s.mu.Unlock()
		gctx, gcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); s.executorLoop(gctx) }()
		go func() { defer wg.Done(); s.plannerLoop(gctx) }()
		select {
		case <-ctx.Done():
			gcancel()
			wg.Wait()
			return nil
		case <-sess.Done():
		}
		s.log.Warn("serve: session lease lost; cancelling executions and registering again")
		gcancel()
		wg.Wait()
		s.cancelExecutions(errLeaseLost)
		for {
			if ctx.Err() != nil {
				return nil
			}
			err := s.register(ctx)
			if err == nil {
				break
			}
			s.log.Error("serve: register again", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

var errLeaseLost = errors.New("serve: executor's lease lost")

// Run starts the server and runs it until ctx ends, then drains it (Close with
// drainTimeout). Errors: Start's.
func (s *Server) Run(ctx context.Context, drainTimeout time.Duration) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	return s.Close(dctx)
}

// Close drains the server: it stops taking work, resigns the election (another process
// plans within a pass), lets running executions finish until ctx ends, then cancels
// the rest and hands their assignments back (released without a failure entry), and
// revokes the session lease (the executor's key and anything still assigned to it go
// with it). Safe to call more than once.
func (s *Server) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.draining.Store(true)
	// The planner goroutine owns the election (its methods are not safe for concurrent
	// use): stopping the loops makes it resign on its way out, so another process plans
	// while this one drains.
	if s.cancel != nil {
		s.cancel()
	}
	finished := make(chan struct{})
	go func() { s.execs.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		s.cancelExecutions(errDrained)
		<-finished
	}
	s.loops.Wait()
	s.mu.Lock()
	sess := s.sess
	s.leading = false
	s.mu.Unlock()
	s.m.SetLeader(false)
	if sess != nil {
		sess.Close() // revokes the lease
	}
	s.log.Info("serve: drained")
	return nil
}

var errDrained = errors.New("serve: drained: handed back")

// wakePlanner asks for a planning pass soon.
func (s *Server) wakePlanner() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Server) pokeExecutor() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// newAssignmentID mints an assignment id.
func newAssignmentID(now time.Time) string {
	return ulid.MustNew(ulid.Timestamp(now), rand.Reader).String()
}

// runningByKind counts the running executions per kind (for metrics).
func (s *Server) runningByKind() map[plan.Kind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[plan.Kind]int{}
	for _, k := range plan.Kinds {
		n[k] = 0
	}
	for _, e := range s.running {
		n[e.a.Kind]++
	}
	return n
}

func (s *Server) reportRunning() {
	for k, n := range s.runningByKind() {
		s.m.SetRunning(string(k), n)
	}
}
