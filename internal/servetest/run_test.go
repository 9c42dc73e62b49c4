package servetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
)

// The bounded run's planner-wide config: passes every 200 ms, a 2 s lease (etcd's
// least workable), an idle timeout long enough that a loaded machine does not stall
// executions (the watchdog has its own test in package serve).
const (
	runPass     = 200 * time.Millisecond
	runLeaseTTL = 2 * time.Second
	runIdle     = 30 * time.Second
)

// runPolicy is every run table's policy in etcd: one pending generation is merge work,
// four small fragments compaction work, one uncovered fragment index work.
var runPolicy = plan.Policy{MinGenerations: 1, MinSmallFragments: 4, MinUncovered: 1}

// createTable creates table name with shards WAL shards and one base row (id -1), and an
// index on id when index is set; it returns the ledger entry of the base row.
func createTable(t *testing.T, e *env, name string, shards int, index bool) {
	t.Helper()
	ctx := context.Background()
	tbl, err := e.db.CreateTable(ctx, name, schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch(-1, 1, "base")
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.UpdateConfig(ctx, map[string]string{engine.ConfigWALShards: strconv.Itoa(shards)}, nil); err != nil {
		t.Fatal(err)
	}
	if index {
		tbl, err = e.db.OpenTable(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"id"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := serve.StateOf(e.db).SetPolicy(ctx, name, runPolicy); err != nil {
		t.Fatal(err)
	}
}

// serveChild is the config of a serve child of the bounded run.
func (e *env) serveChild(name string, slots map[string]int) childConfig {
	return childConfig{Role: roleServe, Name: name, Dir: e.dir, Prefix: e.prefix, Stop: "stop-serve", ID: name, Slots: slots,
		PassInterval: runPass, LeaseTTL: runLeaseTTL, IdleTimeout: runIdle, MinGenerations: 1, RecoveryMinAge: time.Millisecond}
}

// leader is the current leader's executor id ("" none).
func (e *env) leader(t *testing.T) string {
	t.Helper()
	id, _, err := serve.StateOf(e.db).Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestServeBoundedRun: three serve processes and two WAL writers on three tables; an
// executor killed mid-merge, one mid-compaction, the leader killed; then every
// acknowledged row exactly once, no generation merged twice, no overlapping write turns,
// everything within policy after a quiet period, verify clean.
func TestServeBoundedRun(t *testing.T) {
	ctx := context.Background()
	rnd := newRand(seed(t))
	runFor := 20 * time.Second
	if slow() {
		runFor = 3 * time.Minute
	}
	e := newEnv(t)
	tables := []string{"a", "b", "c"}
	createTable(t, e, "a", 2, false)
	createTable(t, e, "b", 1, false)
	createTable(t, e, "c", 1, true)
	began := time.Now()

	// The first executor takes only recovery, publishing and index work, so the merges go
	// to s2 (killed at its first merge, its sidecar armed, before the commit) and the
	// compactions to s3 (killed at its first compaction, mid-rewrite).
	procs := map[string]*childProc{}
	startServe := func(name string, slots map[string]int, fp string) *childProc {
		p := start(t, e.s, e.serveChild(name, slots), fp)
		procs[name] = p
		return p
	}
	startServe("s1", map[string]int{"recover": 1, "publish": 1, "index": 1}, "")
	waitFor(t, 30*time.Second, "s1 to lead", func() bool { return e.leader(t) == "s1" })
	s2 := startServe("s2", map[string]int{"merge_wal": 1}, "engine.merge_planned=kill")
	s3 := startServe("s3", map[string]int{"compact": 1}, "compaction.write_batch=kill")

	pace := time.Duration(10+rnd.Intn(20)) * time.Millisecond
	writer := func(name string, from int64, targets []target, plain string) *childProc {
		return start(t, e.s, childConfig{Role: roleWriter, Name: name, Dir: e.dir, Prefix: e.prefix, Stop: "stop-writers",
			Targets: targets, Plain: plain, PlainEvery: 3, From: from, Rows: 1 + rnd.Intn(8), FlushEvery: 1 + rnd.Intn(3),
			Pace: pace}, "")
	}
	w1 := writer("w1", 1_000_000_000, []target{{"a", 0}, {"b", 0}}, "")
	w2 := writer("w2", 2_000_000_000, []target{{"a", 1}, {"c", 0}}, "c")
	t.Logf("writers pace %s", pace)

	// Both killers die at their first unit of work; each comes back without its failpoint.
	for _, p := range []*childProc{s2, s3} {
		if ex := p.wait(t, 60*time.Second); !ex.Killed {
			t.Fatalf("%s was not killed at its seam (%+v):\n%s", p.cfg.Name, ex, p.out)
		}
		t.Logf("%s killed at its seam after %s", p.cfg.Name, time.Since(began).Round(time.Millisecond))
	}
	startServe("s2b", nil, "")
	startServe("s3b", nil, "")

	// Kill the leader once the killed executors' leases expired (their election keys are
	// gone): another live process leads within the lease TTL plus one pass.
	waitFor(t, 30*time.Second, "the killed executors' leases to expire", func() bool {
		snap, err := serve.StateOf(e.db).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range snap.Executors {
			if x.ID == "s2" || x.ID == "s3" {
				return false
			}
		}
		return true
	})
	old := e.leader(t)
	if procs[old] == nil {
		t.Fatalf("leader %q is not one of the children", old)
	}
	procs[old].kill(t)
	killed := time.Now()
	var next string
	waitFor(t, 30*time.Second, "a new leader", func() bool { next = e.leader(t); return next != "" && next != old })
	if p := procs[next]; p == nil || !p.alive() {
		t.Fatalf("%q leads, not a live serve process", next)
	}
	took := time.Since(killed)
	t.Logf("leader %s killed; %s leads after %s", old, next, took.Round(time.Millisecond))
	// Slack for a loaded machine: the lease's expiry is checked by etcd every 500 ms.
	if limit := runLeaseTTL + runPass + time.Second; took > limit {
		t.Errorf("a new leader took %s after the leader's death, want at most %s (lease TTL + one pass + 1 s)", took, limit)
	}
	startServe(old+"r", nil, "")

	// Run, stop the writers, then a quiet period.
	for time.Since(began) < runFor {
		for _, p := range []*childProc{w1, w2} {
			if !p.alive() {
				t.Fatalf("writer %s ended early: %+v\n%s", p.cfg.Name, p.wait(t, 0), p.out)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	touch(t, e.dir+"/stop-writers")
	w1.waitOK(t, time.Minute)
	w2.waitOK(t, time.Minute)
	quietStart := time.Now()
	reps := map[string]admin.TableReport{}
	waitFor(t, 90*time.Second, "every table quiet", func() bool {
		for _, tb := range tables {
			rep, ok := quiet(ctx, e.db, tb)
			if !ok {
				return false
			}
			reps[tb] = rep
		}
		return true
	})
	t.Logf("quiet %s after the writers stopped", time.Since(quietStart).Round(time.Millisecond))
	touch(t, e.dir+"/stop-serve")
	for name, p := range procs {
		if name != "s2" && name != "s3" && name != old {
			p.waitOK(t, time.Minute)
		}
	}

	// Every acknowledged row exactly once; no generation merged twice; verify clean;
	// within policy.
	ledgers, err := readLedgers(e.dir, "w1", "w2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		l := ledgers[tb]
		if l == nil {
			t.Fatalf("no appends to %s", tb)
		}
		l.add(-1, 1)
		rows, unacked := checkOnce(t, e.db, tb, l)
		merges := checkWatermarks(t, e.db, tb)
		checkVerify(t, e.db, tb)
		checkWithinPolicy(t, reps[tb])
		t.Logf("table %s: %d rows (%d acknowledged, %d unacknowledged present), %d merge commits, %d fragments",
			tb, rows, len(l.acked), unacked, merges, reps[tb].State.Fragments)
	}

	// What ran: no overlapping write turns; the killed executors' work recovered and placed
	// again; every kind of work happened.
	var execs []execution
	for name, p := range procs {
		es, _, err := readExecutions(e.dir, name, p.endedAt())
		if err != nil {
			t.Fatal(err)
		}
		execs = append(execs, es...)
	}
	checkNoOverlap(t, execs)
	done := map[plan.Kind]int{}
	phases := map[string]int{}
	errs := map[string]int{}
	for _, x := range execs {
		phases[string(x.Kind)+"/"+x.Phase]++
		if x.Phase == admin.PhaseSucceeded {
			done[x.Kind]++
		} else if x.Err != "" {
			errs[string(x.Kind)+": "+x.Err]++
		}
	}
	t.Logf("executions by kind/phase: %v", phases)
	for msg, n := range errs {
		t.Logf("%d× %s", n, msg)
	}
	for _, k := range []plan.Kind{plan.KindMergeWAL, plan.KindCompact, plan.KindIndex, plan.KindRecover} {
		if done[k] == 0 {
			t.Errorf("no %s execution succeeded", k)
		}
	}
	for _, victim := range []string{"s2", "s3"} {
		checkRecoveredAfter(t, execs, victim, procs[victim].endedAt())
	}
}

// checkRecoveredAfter checks that the unit victim died in was recovered and placed again:
// a recover execution of its table succeeded after the death, and then the same kind of
// work succeeded on the table.
func checkRecoveredAfter(t *testing.T, execs []execution, victim string, died time.Time) {
	t.Helper()
	var dead *execution
	for i := range execs {
		if execs[i].Proc == victim && execs[i].Phase == "" {
			dead = &execs[i]
		}
	}
	if dead == nil {
		t.Fatalf("%s's log shows no execution it died in", victim)
	}
	var recovered, again time.Time
	for _, x := range execs {
		if x.Table != dead.Table || x.Phase != admin.PhaseSucceeded || !x.Start.After(died) {
			continue
		}
		if x.Kind == plan.KindRecover && (recovered.IsZero() || x.End.Before(recovered)) {
			recovered = x.End
		}
	}
	for _, x := range execs {
		if x.Table == dead.Table && x.Kind == dead.Kind && x.Phase == admin.PhaseSucceeded && !recovered.IsZero() && x.Start.After(recovered) {
			again = x.Start
			break
		}
	}
	if recovered.IsZero() || again.IsZero() {
		t.Fatalf("%s died in %s of %s: recovered at %v, placed again at %v", victim, dead.Kind, dead.Table, recovered, again)
	}
	t.Logf("%s died in %s of %s; recovered %s later, done again %s later", victim, dead.Kind, dead.Table,
		recovered.Sub(died).Round(time.Millisecond), again.Sub(died).Round(time.Millisecond))
}
