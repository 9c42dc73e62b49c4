package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var etcd *coord.Embedded

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shale-serve-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	etcd, err = coord.StartEmbedded(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start etcd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	etcd.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// openDB opens a DB on s with the embedded etcd under a catalog prefix of its own (one
// per test, so tests do not see each other's serve state), as the CLI opens it.
func openDB(t *testing.T, s store.Store) *engine.DB {
	t.Helper()
	ctx := context.Background()
	c, err := coord.Connect(ctx, coord.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	db, err := engine.Open(ctx, s, engine.Options{Etcd: c.Etcd(), CatalogPrefix: "/t/" + t.Name(),
		BeforeFirstWrite: recovery.Hook(recovery.Options{}), IndexSidecars: recovery.IndexSidecars{Store: s},
		MergeSidecars: recovery.MergeSidecars{Store: s}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

var schema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

func batch(from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
	}
	return b.NewRecordBatch()
}

// fragments creates table name with n fragments of 10 rows each.
func fragments(t *testing.T, db *engine.DB, name string, n int) {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.CreateTable(ctx, name, schema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec := batch(int64(i*10), int64(i*10+10))
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// walBacklog creates table name with a one-shard WAL and gens flushed generations of 5
// rows, and waits until demand shows them pending.
func walBacklog(t *testing.T, db *engine.DB, name string, gens int) {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.CreateTable(ctx, name, schema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.UpdateConfig(ctx, map[string]string{engine.ConfigWALShards: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = db.OpenTable(ctx, name); err != nil {
		t.Fatal(err)
	}
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	for g := range gens {
		rec := batch(int64(g*5), int64(g*5+5))
		_, err := w.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "demand to show the backlog", func() bool {
		snap, err := db.Demand().ReadTable(ctx, name)
		return err == nil && snap.Tables[name] != nil && snap.Tables[name].PendingGenerations() == uint64(gens)
	})
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func merged(t *testing.T, db *engine.DB, name string) uint64 {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Manifest().WALMerged[wal.ShardID(0)]
}

func count(t *testing.T, db *engine.DB, name string) int64 {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := tbl.Count(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// recorder is a Metrics that records what the runtime reports.
type recorder struct {
	mu         sync.Mutex
	placements map[string]int
	executions map[string]int // kind/phase
	stalls     int
	leader     bool
}

func newRecorder() *recorder {
	return &recorder{placements: map[string]int{}, executions: map[string]int{}}
}

func (r *recorder) ObserveScheduleToBind(string, time.Duration) {}
func (r *recorder) ObserveTurnWait(string, time.Duration)       {}
func (r *recorder) Placement(res string) {
	r.mu.Lock()
	r.placements[res]++
	r.mu.Unlock()
}
func (r *recorder) SetBacklog(map[string]int) {}
func (r *recorder) Execution(kind, phase string) {
	r.mu.Lock()
	r.executions[kind+"/"+phase]++
	r.mu.Unlock()
}
func (r *recorder) SetRunning(string, int) {}
func (r *recorder) Stall(string) {
	r.mu.Lock()
	r.stalls++
	r.mu.Unlock()
}
func (r *recorder) Recovery(string) {}
func (r *recorder) SetLeader(b bool) {
	r.mu.Lock()
	r.leader = b
	r.mu.Unlock()
}
func (r *recorder) ObservePass(time.Duration, int64) {}
func (r *recorder) SetTopTables(map[string]uint64)   {}
func (r *recorder) execs(kind, phase string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.executions[kind+"/"+phase]
}

// fastConfig plans often and treats a single pending generation as work.
func fastConfig() state.Config {
	return state.Config{PassInterval: 50 * time.Millisecond, LeaseTTL: 2 * time.Second, IdleTimeout: 500 * time.Millisecond,
		Policy: plan.Policy{MinGenerations: 1}}
}

func newServer(t *testing.T, db *engine.DB, id string, m serve.Metrics) *serve.Server {
	t.Helper()
	s, err := serve.New(context.Background(), db, serve.Options{ID: id, Config: fastConfig(), Logger: quietLog(), Metrics: m,
		Recovery: recovery.Options{MinAge: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func phases(rs []serve.ExecutionResult) map[plan.Kind]string {
	out := map[plan.Kind]string{}
	for _, r := range rs {
		out[r.Assignment.Kind] = r.Phase
	}
	return out
}

func TestOnceMergesWALBacklog(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	walBacklog(t, db, "w", 3)
	before := count(t, db, "w")
	res, err := newServer(t, db, "once-1", nil).Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := phases(res.Executions); p[plan.KindMergeWAL] != admin.PhaseSucceeded {
		t.Fatalf("executions %+v, placements %+v, skips %+v", res.Executions, res.Pass.Output.Placements, res.Pass.Output.Skips)
	}
	if m := merged(t, db, "w"); m != 3 {
		t.Fatalf("merged watermark %d, want 3", m)
	}
	if n := count(t, db, "w"); n != before || n != 15 {
		t.Fatalf("rows %d after the merge, %d before, want 15", n, before)
	}
	// Everything was released: no assignment, no failure, no executor left.
	snap, err := serve.StateOf(db).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Assignments) != 0 || len(snap.Failures) != 0 || len(snap.Executors) != 0 {
		t.Fatalf("left in etcd: %+v %+v %+v", snap.Assignments, snap.Failures, snap.Executors)
	}
	if h := snap.Histories["w"]; len(h.Turns) != 1 || h.Turns[0] != plan.KindMergeWAL {
		t.Fatalf("history %+v", h)
	}
	// A second pass finds no merge to do (it may compact the merged generations' fragments).
	waitFor(t, "demand to show the merge", func() bool {
		s, err := db.Demand().ReadTable(ctx, "w")
		return err == nil && s.Tables["w"].PendingGenerations() == 0
	})
	res, err = newServer(t, db, "once-2", nil).Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range res.Pass.Placed {
		if a.Kind == plan.KindMergeWAL {
			t.Fatalf("second pass placed a merge again: %+v", a)
		}
	}
}

func TestOnceCompactsSmallFragments(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	fragments(t, db, "c", 20)
	res, err := newServer(t, db, "once-1", nil).Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := phases(res.Executions); p[plan.KindCompact] != admin.PhaseSucceeded {
		t.Fatalf("executions %+v, skips %+v", res.Executions, res.Pass.Output.Skips)
	}
	tbl, err := db.OpenTable(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Manifest().Fragments); n >= 20 {
		t.Fatalf("%d fragments after compaction", n)
	}
	if n := count(t, db, "c"); n != 200 {
		t.Fatalf("%d rows after compaction, want 200", n)
	}
	if keys, err := recovery.Pending(ctx, db.Store(), "c"); err != nil || len(keys) != 0 {
		t.Fatalf("sidecars left: %v %v", keys, err)
	}
}

func TestOnceRecoversPendingSidecar(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	fragments(t, db, "r", 3)
	// A compaction that stops after its commit, before its publish, leaves its sidecar.
	disable := failpoint.Enable("compaction.before_publish", failpoint.Error(errors.New("crash")).Once())
	ex := compaction.New(db)
	recovery.Enable(ex)
	_, err := ex.Run(ctx, "r", compaction.Options{})
	disable()
	if err == nil {
		t.Fatal("compaction did not stop at the failpoint")
	}
	keys, err := recovery.Pending(ctx, db.Store(), "r")
	if err != nil || len(keys) != 1 {
		t.Fatalf("pending sidecars %v %v, want 1", keys, err)
	}
	rec := newRecorder()
	res, err := newServer(t, db, "once-1", rec).Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := phases(res.Executions); p[plan.KindRecover] != admin.PhaseSucceeded {
		t.Fatalf("executions %+v, skips %+v", res.Executions, res.Pass.Output.Skips)
	}
	if keys, err := recovery.Pending(ctx, db.Store(), "r"); err != nil || len(keys) != 0 {
		t.Fatalf("sidecars left after recovery: %v %v", keys, err)
	}
	if n := count(t, db, "r"); n != 30 {
		t.Fatalf("%d rows after recovery, want 30", n)
	}
}

func TestTwoServersOneLeadsAndFailover(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	a, b := newServer(t, db, "a", nil), newServer(t, db, "b", nil)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	waitFor(t, "a leader", func() bool { return a.IsLeader() != b.IsLeader() })
	// Only one leads, for a while (polling, not sleeping: every look sees exactly one).
	for range 20 {
		if a.IsLeader() == b.IsLeader() {
			t.Fatal("both or neither lead")
		}
		time.Sleep(10 * time.Millisecond)
	}
	leader, other := a, b
	if b.IsLeader() {
		leader, other = b, a
	}
	st, err := other.Status(ctx)
	if err != nil || st.Leader != leader.ID() || len(st.Executors) != 2 {
		t.Fatalf("status %+v %v", st, err)
	}
	if err := leader.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other to lead", other.IsLeader)
	// The new leader places work, and it is done.
	walBacklog(t, db, "w", 2)
	waitFor(t, "the backlog merged", func() bool { return merged(t, db, "w") == 2 })
	st, err = other.Status(ctx)
	if err != nil || st.Leader != other.ID() || !st.IsLeader || len(st.Executors) != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
}

func TestWatchdogCancelsStalledExecutionAndPlacesItAgain(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	walBacklog(t, db, "w", 2)
	release := make(chan struct{})
	defer close(release)
	// The first execution blocks before its first storage request: no progress.
	t.Cleanup(failpoint.Enable("serve.execute", failpoint.BlockUntilClosed(release).Once()))
	rec := newRecorder()
	s := newServer(t, db, "s", rec)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	waitFor(t, "the stall", func() bool { return rec.execs("merge_wal", admin.PhaseStalled) == 1 })
	// The release records a retryable failure: the back-off (2 s) keeps it until the
	// work is placed again.
	waitFor(t, "the failure entry", func() bool {
		f, ok, err := s.State().Failure(ctx, "w", plan.KindMergeWAL)
		return err == nil && ok && f.Class == plan.FailureRetryable && f.Attempts == 1
	})
	waitFor(t, "the work placed again and done", func() bool { return merged(t, db, "w") == 2 })
	waitFor(t, "the failure entry cleared", func() bool {
		_, ok, err := s.State().Failure(ctx, "w", plan.KindMergeWAL)
		return err == nil && !ok
	})
	if n := rec.execs("merge_wal", admin.PhaseSucceeded); n != 1 {
		t.Fatalf("%d successful merges", n)
	}
	if rec.stalls != 1 {
		t.Fatalf("%d stalls", rec.stalls)
	}
}

func TestCloseHandsBackRunningWork(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	walBacklog(t, db, "w", 2)
	release := make(chan struct{})
	defer close(release)
	t.Cleanup(failpoint.Enable("serve.execute", failpoint.BlockUntilClosed(release)))
	rec := newRecorder()
	cfg := fastConfig()
	cfg.IdleTimeout = time.Hour // only the drain ends the blocked execution
	s, err := serve.New(ctx, db, serve.Options{ID: "s", Config: cfg, Logger: quietLog(), Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	st := serve.StateOf(db)
	waitFor(t, "the merge to run", func() bool {
		snap, err := st.Read(ctx)
		return err == nil && len(snap.Assignments) == 1 && snap.Assignments[0].State == state.StateRunning
	})
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := s.Close(dctx); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Handed back: no assignment, no failure counted against the table, no executor.
	if len(snap.Assignments) != 0 || len(snap.Failures) != 0 || len(snap.Executors) != 0 {
		t.Fatalf("after drain: %+v %+v %+v", snap.Assignments, snap.Failures, snap.Executors)
	}
	if rec.execs("merge_wal", admin.PhaseCancelled) != 1 || merged(t, db, "w") != 0 {
		t.Fatalf("executions %v, merged %d", rec.executions, merged(t, db, "w"))
	}
	if id, _, err := st.Leader(ctx); err != nil || id != "" {
		t.Fatalf("leader after drain: %q %v", id, err)
	}
}

func TestLeaseLossReRegistersAndKeepsWorking(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	s := newServer(t, db, "s", nil)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	st := serve.StateOf(db)
	waitFor(t, "leadership", s.IsLeader)
	snap, err := st.Read(ctx)
	if err != nil || len(snap.Executors) != 1 {
		t.Fatalf("%+v %v", snap, err)
	}
	old := snap.Executors[0]
	// The lease expires (etcd unreachable past the TTL, a paused process): revoke it.
	if _, err := st.Client().Revoke(ctx, clientv3.LeaseID(old.Lease)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new registration", func() bool {
		snap, err := st.Read(ctx)
		return err == nil && len(snap.Executors) == 1 && snap.Executors[0].Lease != old.Lease
	})
	walBacklog(t, db, "w", 2)
	waitFor(t, "the backlog merged after re-registration", func() bool { return merged(t, db, "w") == 2 })
}

func TestOnceRefusesWhileAnotherLeads(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	s := newServer(t, db, "daemon", nil)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	waitFor(t, "leadership", s.IsLeader)
	_, err := newServer(t, db, "once", nil).Once(ctx)
	if !errors.Is(err, serve.ErrLeaderRunning) {
		t.Fatalf("once beside a leader: %v", err)
	}
	// A process with another config refuses to start.
	other, err := serve.New(ctx, db, serve.Options{ID: "other", Config: state.Config{PassInterval: time.Second}, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(ctx); !errors.Is(err, state.ErrConfigMismatch) {
		t.Fatalf("start with another config: %v", err)
	}
	// The same id twice is refused while the first lives.
	if err := newServer(t, db, "daemon", nil).Start(ctx); !errors.Is(err, state.ErrExecutorExists) {
		t.Fatalf("duplicate id: %v", err)
	}
}

func TestSlowButProgressingExecutionIsNotCancelled(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	fragments(t, db, "c", 20)
	// Every batch the compaction reads waits 150 ms: the run takes well over the idle
	// timeout (500 ms), but it completes a storage request between waits.
	t.Cleanup(failpoint.Enable("compaction.read_batch", failpoint.Sleep(150*time.Millisecond)))
	// Before the release, the heartbeat has recorded the progress in the assignment.
	var progress atomic.Int64
	st := serve.StateOf(db)
	t.Cleanup(failpoint.Enable("serve.before_release", failpoint.Call(func(ctx context.Context) error {
		snap, err := st.Read(ctx)
		if err == nil && len(snap.Assignments) == 1 {
			progress.Store(snap.Assignments[0].Progress)
		}
		return nil
	})))
	rec := newRecorder()
	start := time.Now()
	res, err := newServer(t, db, "once", rec).Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := phases(res.Executions); p[plan.KindCompact] != admin.PhaseSucceeded {
		t.Fatalf("executions %+v", res.Executions)
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("the compaction took %s: the failpoint did not slow it", el)
	}
	if rec.stalls != 0 {
		t.Fatalf("%d stalls", rec.stalls)
	}
	if progress.Load() < 1 {
		t.Fatalf("progress recorded %d, want the heartbeat to have recorded completed requests", progress.Load())
	}
}

func TestAdminEndpointReportsTheRuntime(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	m := admin.NewMetrics()
	s := newServer(t, db, "s", m)
	srv, err := admin.NewServer("127.0.0.1:0", s, m, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	s.SetAddr(srv.Addr())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	walBacklog(t, db, "w", 2)
	waitFor(t, "the backlog merged", func() bool { return merged(t, db, "w") == 2 })
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "the execution counted", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, `shale_serve_executions_total{kind="merge_wal",phase="succeeded"} 1`)
	})
	_, body := get("/metrics")
	for _, want := range []string{`shale_serve_executions_total{kind="merge_wal",phase="bound"} 1`, `shale_serve_leader 1`,
		`shale_serve_placements_total{result="placed"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	code, body := get("/v1/status")
	var st admin.Status
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Executor != "s" || !st.IsLeader || len(st.Executors) != 1 ||
		st.Executors[0].Addr != srv.Addr() {
		t.Fatalf("/v1/status %d %v: %s", code, err, body)
	}
	code, body = get("/v1/tables/w")
	var rep admin.TableReport
	if err := json.Unmarshal([]byte(body), &rep); code != 200 || err != nil || rep.Table != "w" || rep.State.PendingGenerations != 0 {
		t.Fatalf("/v1/tables/w %d %v: %s", code, err, body)
	}
	if code, body := get("/v1/tables/nosuch"); code != http.StatusNotFound {
		t.Fatalf("/v1/tables/nosuch %d: %s", code, body)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Fatalf("/healthz %d: %s", code, body)
	}
}
