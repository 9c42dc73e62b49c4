package state_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

var etcd *coord.Embedded

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shale-serve-state-")
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

func client(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// env is one test's state under its own prefix, with a leader campaign won and one
// registered executor.
type env struct {
	st       *state.State
	cli      *clientv3.Client
	elect    *concurrency.Election
	leadSess *concurrency.Session
	exec     state.Executor
	execSess *concurrency.Session
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	cli := client(t)
	e := &env{cli: cli, st: state.New(cli, "/test/"+t.Name())}
	var err error
	e.leadSess, err = concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.leadSess.Close() })
	e.elect = concurrency.NewElection(e.leadSess, e.st.Keys().Leader())
	if err := e.elect.Campaign(ctx, "leader-1"); err != nil {
		t.Fatal(err)
	}
	e.exec, e.execSess = register(t, e.st, "exec-1")
	return e
}

func register(t *testing.T, st *state.State, id string) (state.Executor, *concurrency.Session) {
	t.Helper()
	sess, err := concurrency.NewSession(st.Client(), concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	ex := state.Executor{ID: id, Slots: map[string]int{"merge_wal": 2}, Bytes: 1 << 30, Started: time.Now().UTC(), Lease: int64(sess.Lease())}
	rev, err := st.RegisterExecutor(context.Background(), ex, sess.Lease())
	if err != nil {
		t.Fatal(err)
	}
	ex.CreateRevision = rev
	return ex, sess
}

func (e *env) guard() state.Guard {
	return state.Guard{LeaderKey: e.elect.Key(), LeaderRevision: e.elect.Rev(), Executor: e.exec}
}

func assignment(table string, kind plan.Kind) state.Assignment {
	return state.Assignment{ID: "a-" + table + "-" + string(kind), Table: table, Kind: kind, Bytes: 1 << 20, Slots: 1, PlacedAt: time.Now().UTC()}
}

func slotCount(t *testing.T, e *env) int {
	t.Helper()
	snap, err := e.st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Assignments)
}

func TestPlaceStoresAssignmentAndHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := &plan.History{Turns: []plan.Kind{plan.KindMergeWAL}}
	a, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindMergeWAL), h)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := e.st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Assignments) != 1 {
		t.Fatalf("assignments %+v", snap.Assignments)
	}
	got := snap.Assignments[0]
	if got.ID != a.ID || got.Executor != "exec-1" || got.State != state.StateAssigned || got.CreateRevision != a.CreateRevision ||
		got.Lease != e.execSess.Lease() {
		t.Fatalf("stored %+v, placed %+v (lease %x)", got, a, e.execSess.Lease())
	}
	if hs := snap.Histories["t1"]; len(hs.Turns) != 1 || hs.Turns[0] != plan.KindMergeWAL {
		t.Fatalf("history %+v", snap.Histories)
	}
	// A preparation runs beside the turn holder.
	if _, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindCompact), nil); err != nil {
		t.Fatal(err)
	}
	if n := slotCount(t, e); n != 2 {
		t.Fatalf("%d assignments, want 2", n)
	}
}

func TestPlaceRefusesWhenLeaderChanged(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := e.guard()
	if err := e.elect.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	// Another campaign wins: the old guard names a key that is gone.
	sess2, err := concurrency.NewSession(e.cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	el2 := concurrency.NewElection(sess2, e.st.Keys().Leader())
	if err := el2.Campaign(ctx, "leader-2"); err != nil {
		t.Fatal(err)
	}
	_, err = e.st.Place(ctx, g, assignment("t1", plan.KindMergeWAL), nil)
	if !errors.Is(err, state.ErrNotLeader) {
		t.Fatalf("placement by the old leader: %v, want ErrNotLeader", err)
	}
	if n := slotCount(t, e); n != 0 {
		t.Fatalf("%d assignments stored", n)
	}
	// The new leader places.
	g2 := state.Guard{LeaderKey: el2.Key(), LeaderRevision: el2.Rev(), Executor: e.exec}
	if _, err := e.st.Place(ctx, g2, assignment("t1", plan.KindMergeWAL), nil); err != nil {
		t.Fatal(err)
	}
	if id, _, err := e.st.Leader(ctx); err != nil || id != "leader-2" {
		t.Fatalf("leader %q, %v", id, err)
	}
}

func TestPlaceRefusesWhenExecutorLeaseGone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := e.guard()
	if _, err := e.cli.Revoke(ctx, e.execSess.Lease()); err != nil {
		t.Fatal(err)
	}
	_, err := e.st.Place(ctx, g, assignment("t1", plan.KindMergeWAL), nil)
	if !errors.Is(err, state.ErrExecutorGone) {
		t.Fatalf("placement on a dead executor: %v, want ErrExecutorGone", err)
	}
	// The same id registered again (a new process) is a different executor: the guard
	// read before still refuses.
	ex2, _ := register(t, e.st, "exec-1")
	if ex2.CreateRevision == g.Executor.CreateRevision {
		t.Fatal("re-registration kept its create revision")
	}
	if _, err := e.st.Place(ctx, g, assignment("t1", plan.KindMergeWAL), nil); !errors.Is(err, state.ErrExecutorGone) {
		t.Fatalf("placement on a stale registration: %v, want ErrExecutorGone", err)
	}
	if n := slotCount(t, e); n != 0 {
		t.Fatalf("%d assignments stored", n)
	}
}

func TestPlaceRefusesWhenSlotTaken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindMergeWAL), nil); err != nil {
		t.Fatal(err)
	}
	// Another write-turn kind on the same table: the turn is held.
	_, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindRecover), nil)
	if !errors.Is(err, state.ErrSlotTaken) {
		t.Fatalf("second write turn: %v, want ErrSlotTaken", err)
	}
	// The same placement again (a planner retrying after a lost reply): refused too.
	if _, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindMergeWAL), nil); !errors.Is(err, state.ErrSlotTaken) {
		t.Fatalf("repeated placement: %v, want ErrSlotTaken", err)
	}
	if _, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindIndex), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindCompact), nil); !errors.Is(err, state.ErrSlotTaken) {
		t.Fatalf("second preparation: %v, want ErrSlotTaken", err)
	}
	if n := slotCount(t, e); n != 2 {
		t.Fatalf("%d assignments, want 2", n)
	}
}

func TestReleaseOnlyRemovesOwnAssignment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a1, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindMergeWAL), nil)
	if err != nil {
		t.Fatal(err)
	}
	a1, err = e.st.Bind(ctx, a1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if a1, err = e.st.Progress(ctx, a1, 7, time.Now()); err != nil {
		t.Fatal(err)
	}
	// a1 is released and the slot placed again (a2): a late release of a1 must not touch a2.
	fail := &plan.Failure{Attempts: 1, Class: plan.FailureRetryable, LastFailure: time.Now().UTC(), LastError: "boom"}
	if err := e.st.Release(ctx, a1, fail, false); err != nil {
		t.Fatal(err)
	}
	if f, ok, err := e.st.Failure(ctx, "t1", plan.KindMergeWAL); err != nil || !ok || f.Attempts != 1 || f.Class != plan.FailureRetryable {
		t.Fatalf("failure %+v %v %v", f, ok, err)
	}
	a2, err := e.st.Place(ctx, e.guard(), assignment("t1", plan.KindMergeWAL), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Release(ctx, a1, nil, false); !errors.Is(err, state.ErrAssignmentLost) {
		t.Fatalf("stale release: %v, want ErrAssignmentLost", err)
	}
	if _, err := e.st.Bind(ctx, a1, time.Now()); !errors.Is(err, state.ErrAssignmentLost) {
		t.Fatalf("stale bind: %v, want ErrAssignmentLost", err)
	}
	if _, err := e.st.Progress(ctx, a1, 9, time.Now()); !errors.Is(err, state.ErrAssignmentLost) {
		t.Fatalf("stale progress: %v, want ErrAssignmentLost", err)
	}
	snap, err := e.st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Assignments) != 1 || snap.Assignments[0].CreateRevision != a2.CreateRevision || snap.Assignments[0].State != state.StateAssigned {
		t.Fatalf("assignments %+v, want a2 untouched", snap.Assignments)
	}
	// The stale release wrote no ledger change either.
	if f, ok, _ := e.st.Failure(ctx, "t1", plan.KindMergeWAL); !ok || f.Attempts != 1 {
		t.Fatalf("ledger changed by a stale release: %+v %v", f, ok)
	}
	// a2's success clears the ledger.
	if err := e.st.Release(ctx, a2, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := e.st.Failure(ctx, "t1", plan.KindMergeWAL); ok {
		t.Fatal("success left the failure entry")
	}
}

func TestExecutorDeathRemovesItsAssignments(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other, _ := register(t, e.st, "exec-2")
	for _, tb := range []string{"t1", "t2"} {
		if _, err := e.st.Place(ctx, e.guard(), assignment(tb, plan.KindMergeWAL), nil); err != nil {
			t.Fatal(err)
		}
	}
	g := e.guard()
	g.Executor = other
	if _, err := e.st.Place(ctx, g, assignment("t3", plan.KindMergeWAL), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.Revoke(ctx, e.execSess.Lease()); err != nil {
		t.Fatal(err)
	}
	snap, err := e.st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Executors) != 1 || snap.Executors[0].ID != "exec-2" {
		t.Fatalf("executors %+v", snap.Executors)
	}
	if len(snap.Assignments) != 1 || snap.Assignments[0].Table != "t3" {
		t.Fatalf("assignments %+v, want only t3's", snap.Assignments)
	}
	// The freed slots can be placed again on the live executor.
	if _, err := e.st.Place(ctx, g, assignment("t1", plan.KindMergeWAL), nil); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureConfig(t *testing.T) {
	cli := client(t)
	st := state.New(cli, "/test/"+t.Name())
	ctx := context.Background()
	c := state.Config{PassInterval: time.Second, LeaseTTL: 5 * time.Second}
	got, err := st.EnsureConfig(ctx, c, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.PassInterval != time.Second || got.IdleTimeout != state.DefaultIdleTimeout || got.Policy != plan.DefaultPolicy() {
		t.Fatalf("stored %+v", got)
	}
	// The same config spelled with its defaults agrees.
	c2 := c.WithDefaults()
	if _, err := st.EnsureConfig(ctx, c2, false); err != nil {
		t.Fatal(err)
	}
	c3 := c
	c3.PassInterval = 2 * time.Second
	_, err = st.EnsureConfig(ctx, c3, false)
	if !errors.Is(err, state.ErrConfigMismatch) {
		t.Fatalf("different config: %v, want ErrConfigMismatch", err)
	}
	if got, err := st.EnsureConfig(ctx, c3, true); err != nil || got.PassInterval != 2*time.Second {
		t.Fatalf("replace: %+v %v", got, err)
	}
	snap, err := st.Read(ctx)
	if err != nil || snap.Config == nil || snap.Config.PassInterval != 2*time.Second {
		t.Fatalf("read back %+v %v", snap.Config, err)
	}
}

func TestPolicyRoundTripAndTypo(t *testing.T) {
	p := plan.Policy{Paused: true, MinGenerations: 3, MaxAge: 90 * time.Second}
	got, err := state.DecodePolicy(state.EncodePolicy(p))
	if err != nil || got != p {
		t.Fatalf("round trip %+v %v", got, err)
	}
	if _, err := state.DecodePolicy([]byte(`{"min_generation": 3}`)); !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("typo: %v, want ErrCorrupt", err)
	}
}

func TestReadPagesAtOneRevision(t *testing.T) {
	cli := client(t)
	st := state.New(cli, "/test/"+t.Name())
	ctx := context.Background()
	const n = 2500
	for i := 0; i < n; i++ {
		if err := st.SetPolicy(ctx, fmt.Sprintf("t%05d", i), plan.Policy{MinGenerations: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Policies) != n || snap.Policies["t02499"].MinGenerations != n {
		t.Fatalf("%d policies read", len(snap.Policies))
	}
	if err := st.DeletePolicy(ctx, "t00000"); err != nil {
		t.Fatal(err)
	}
	if snap2, _ := st.Read(ctx); len(snap2.Policies) != n-1 || snap2.Revision <= snap.Revision {
		t.Fatalf("after delete: %d policies at %d", len(snap2.Policies), snap2.Revision)
	}
}

// TestLostRepliesLeaveNoDoubleAssignment: a placement whose reply is lost (applied by
// etcd, reported failed) is decided placed by reading its id back; a retry of it, or a
// release whose reply is lost and is retried, changes nothing twice: the
// slot holds exactly the first assignment, the ledger counts the failure once; a
// placement never sent is simply placed by the retry.
func TestLostRepliesLeaveNoDoubleAssignment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fcli := client(t)
	kv := faults.WrapKV(fcli, faults.NewSeed(t))
	fst := state.New(fcli, "/test/"+t.Name())
	writes := faults.EtcdRule{Ops: []faults.EtcdOp{faults.EtcdTxn}, Key: "*/serve/assign/*", WritesOnly: true, Times: 1}

	lost := writes
	lost.Kind = faults.DropResponse
	h := kv.Add(lost)
	first := assignment("t1", plan.KindMergeWAL)
	if got, err := fst.Place(ctx, e.guard(), first, nil); err != nil || h.Injected() != 1 || got.CreateRevision == 0 {
		t.Fatalf("placement with a lost reply: %+v %v (%d injected), want it decided placed by its id", got, err, h.Injected())
	}
	retry := assignment("t1", plan.KindMergeWAL)
	retry.ID = "retry"
	if _, err := fst.Place(ctx, e.guard(), retry, nil); !errors.Is(err, state.ErrSlotTaken) {
		t.Fatalf("retried placement: %v, want ErrSlotTaken", err)
	}
	snap, err := e.st.Read(ctx)
	if err != nil || len(snap.Assignments) != 1 || snap.Assignments[0].ID != first.ID {
		t.Fatalf("assignments %+v %v, want only the first", snap.Assignments, err)
	}
	a := snap.Assignments[0]

	h = kv.Add(lost)
	fail := &plan.Failure{Attempts: 1, Class: plan.FailureRetryable, LastFailure: time.Now().UTC(), LastError: "x"}
	if err := fst.Release(ctx, a, fail, false); err == nil || h.Injected() != 1 {
		t.Fatalf("release with a lost reply: %v", err)
	}
	if err := fst.Release(ctx, a, &plan.Failure{Attempts: 2, Class: plan.FailureRetryable}, false); !errors.Is(err, state.ErrAssignmentLost) {
		t.Fatalf("retried release: %v, want ErrAssignmentLost", err)
	}
	if f, ok, err := e.st.Failure(ctx, "t1", plan.KindMergeWAL); err != nil || !ok || f.Attempts != 1 {
		t.Fatalf("ledger %+v %v %v, want the failure counted once", f, ok, err)
	}

	dropped := writes
	dropped.Kind = faults.DropRequest
	h = kv.Add(dropped)
	if _, err := fst.Place(ctx, e.guard(), first, nil); err == nil || h.Injected() != 1 {
		t.Fatalf("placement never sent: %v", err)
	}
	if n := slotCount(t, e); n != 0 {
		t.Fatalf("%d assignments after a placement that was never sent", n)
	}
	if _, err := fst.Place(ctx, e.guard(), first, nil); err != nil {
		t.Fatal(err)
	}
	if n := slotCount(t, e); n != 1 {
		t.Fatalf("%d assignments, want 1", n)
	}
}
