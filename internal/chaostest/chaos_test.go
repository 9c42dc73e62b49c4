package chaostest

// TestChaos is issue 8's acceptance test. The CI size (about 30 s of chaos, 4 writers, one
// compactor, one recoverer, one GC loop; 10 s with -short) runs in the default
// `go test ./...`; SHALE_SLOW=1 runs the larger size (5 minutes, 8 writers, two
// compactors and two GC loops). SHALE_SEED=<n> replays a run's random choices (which
// process is paused, killed or armed with which seam, and every child's operations); the
// OS schedule is not replayed, so a replay explores the same plan, not the same
// interleaving. SHALE_CHAOS_DURATION=<Go duration> overrides the length of the chaos
// phase.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// size is how big a run is.
type size struct {
	name                             string
	workers, compactors, recoverers  int
	gcs                              int
	ops                              int           // per worker, across its incarnations
	chaos                            time.Duration // length of the chaos phase
	maxStopped                       int           // processes paused at once
	tick                             time.Duration // mean time between controller actions
	pStop, pKill, pArm, pLossy, pCut float64
	pSlow                            float64
	// pLong: of the pauses, those that outlast the hold lease for real
	// (catalog.DefaultHoldTTL and a few seconds more), with nothing revoked.
	pLong float64
}

func runSize(t *testing.T) size {
	sz := size{name: "ci", workers: 4, compactors: 1, recoverers: 1, gcs: 1, ops: 300, chaos: 30 * time.Second,
		maxStopped: 2, tick: 150 * time.Millisecond, pStop: 0.25, pKill: 0.04, pArm: 0.6, pLossy: 0.4, pCut: 0.6, pSlow: 0.4, pLong: 0.06}
	if testing.Short() {
		sz.name, sz.chaos = "short", 10*time.Second
	}
	if os.Getenv("SHALE_SLOW") == "1" {
		sz = size{name: "slow", workers: 8, compactors: 2, recoverers: 1, gcs: 2, ops: 2000, chaos: 5 * time.Minute,
			maxStopped: 3, tick: 100 * time.Millisecond, pStop: 0.25, pKill: 0.04, pArm: 0.6, pLossy: 0.4, pCut: 0.6, pSlow: 0.4, pLong: 0.06}
	}
	if d := os.Getenv("SHALE_CHAOS_DURATION"); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil {
			t.Fatalf("SHALE_CHAOS_DURATION=%q: %v", d, err)
		}
		sz.chaos = v
	}
	return sz
}

// seed returns the run's seed: SHALE_SEED, or a fresh one. It is logged either way.
func seed(t *testing.T) int64 {
	s := time.Now().UnixNano()
	if v := os.Getenv("SHALE_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("SHALE_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", s, s)
	return s
}

// proc is one child process (a role and a name) across its incarnations.
type proc struct {
	role  string
	name  string
	index int // workers: from 0
	inc   int

	// The current incarnation.
	cfg        childConfig
	spec       string // its failpoint spec ("" = none)
	seam       string // the seam armed to kill
	cmd        *exec.Cmd
	log        string
	done       chan struct{}
	err        error // Wait's, set before done closes
	running    bool
	stopped    bool // SIGSTOPped
	contAt     time.Time
	expireAt   time.Time // when stopped: revoke its holds' leases then (zero: do not)
	expired    bool
	killedByUs bool
	finished   bool // a worker that spent its budget
}

// runStats are the run's numbers.
type runStats struct {
	incarnations   int
	seamKills      map[string]int // SIGKILL at an armed seam, by seam
	armed          int            // incarnations armed with a seam
	ctlKills       int            // SIGKILL by the controller, anywhere
	stops          int
	longStops      int // pauses past the real hold lease (nothing revoked)
	leaseExpiries  int // stopped processes whose holds' leases were revoked
	holdsExpired   int // leases revoked (of paused and of dead processes)
	lossy          int // worker incarnations with a lossy store and etcd
	slowed         int // incarnations that sleep at a seam
	stopping       time.Duration
	cleanExits     int
	failedChildren []string
}

// controller runs the chaos phase.
type controller struct {
	t     *testing.T
	sz    size
	rng   *rand.Rand
	s     store.Store
	db    *engine.DB
	dir   string
	etcd  *clientv3.Client
	procs []*proc
	rd    *reader
	st    runStats
	seams map[string][]string // by role: the seams an incarnation may be armed with
	// slowSeams are, by role, seams an incarnation may sleep at.
	slowSeams map[string][]string
}

func TestChaos(t *testing.T) {
	sz := runSize(t)
	rng := rand.New(rand.NewSource(seed(t)))
	began := time.Now()
	ctx := context.Background()
	// The journals, the children's output and the store are kept when the test fails.
	dir, err := os.MkdirTemp("", "shale-chaostest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("journals, logs (<proc>.<incarnation>.log) and the store kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	s := storetest.LocalAt(t, filepath.Join(dir, "store"))
	db := enginetest.OpenDB(t, s, engine.Options{})
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: enginetest.Etcd().Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	for _, tc := range []struct {
		name string
		ids  []int64
	}{{mainTable, seqIDs(0, 50)}, {owTable, seqIDs(100, 120)}} {
		tbl, err := db.CreateTable(ctx, tc.name, schema)
		if err != nil {
			t.Fatal(err)
		}
		rec := batch(tc.ids, initKey(tc.name))
		_, err = tbl.AppendRecord(ctx, rec, engine.WithIdempotencyKey(initKey(tc.name)))
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	c := &controller{t: t, sz: sz, rng: rng, s: s, db: db, dir: filepath.Join(dir, "run"), etcd: cli.Etcd(),
		st: runStats{seamKills: map[string]int{}}, seams: seamsByRole(), slowSeams: map[string][]string{
			roleWorker:    {"manifest.before_txn_put", "manifest.before_version_put", "engine.update_planned", "engine.before_publish", "fragment.encode_batch"},
			roleCompactor: {"compaction.after_sidecar", "compaction.write_batch", "manifest.before_version_put", "compaction.before_publish"},
		}}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("size %s: %d writers (%d ops each at most), %d compactor(s), %d recoverer(s), %d gc loop(s), %s of chaos",
		sz.name, sz.workers, sz.ops, sz.compactors, sz.recoverers, sz.gcs, sz.chaos)
	c.run()
	chaosEnd := time.Now()
	h := check(t, s, db, c.dir, c.workerNames(), c.rd)
	c.report(h, chaosEnd.Sub(began), time.Since(chaosEnd))
}

// initKey is the idempotency key of the controller's first append to table.
func initKey(table string) string { return "ctl-init-" + table }

func seqIDs(from, to int64) []int64 {
	var out []int64
	for id := from; id < to; id++ {
		out = append(out, id)
	}
	return out
}

// seamsByRole lists, per role, every registered seam (failpoint.Names) a process of that
// role can reach.
func seamsByRole() map[string][]string {
	prefixes := map[string][]string{
		roleWorker:    {"manifest.", "engine.", "fragment."},
		roleCompactor: {"compaction.", "manifest.", "fragment."},
		roleRecoverer: {"recovery.", "manifest."},
		roleGC:        {"gc.", "recovery.", "manifest."},
	}
	out := map[string][]string{}
	for role, ps := range prefixes {
		for _, n := range failpoint.Names() {
			if n == "engine.schema_change_planned" { // no schema change here
				continue
			}
			if slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(n, p) }) {
				out[role] = append(out[role], n)
			}
		}
		slices.Sort(out[role])
	}
	return out
}

func (c *controller) workerNames() []string {
	var out []string
	for _, p := range c.procs {
		if p.role == roleWorker {
			out = append(out, p.name)
		}
	}
	return out
}

// run starts the processes, runs the chaos phase, then resumes everything, tells every
// process to stop and waits for them.
func (c *controller) run() {
	t := c.t
	add := func(role, prefix string, n int) {
		for i := 0; i < n; i++ {
			c.procs = append(c.procs, &proc{role: role, name: fmt.Sprintf("%s%d", prefix, i), index: i})
		}
	}
	add(roleWorker, "w", c.sz.workers)
	add(roleCompactor, "c", c.sz.compactors)
	add(roleRecoverer, "r", c.sz.recoverers)
	add(roleGC, "g", c.sz.gcs)
	t.Cleanup(func() {
		if c.rd != nil {
			select {
			case <-c.rd.stop:
			default:
				c.rd.halt()
			}
		}
		// A failed test: nothing of ours stays paused or running.
		for _, p := range c.procs {
			if p.running {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
	})
	for _, p := range c.procs {
		c.start(p)
	}
	c.rd = startReader(c.db, c.rng.Int63())
	deadline := time.Now().Add(c.sz.chaos)
	for time.Now().Before(deadline) && len(c.st.failedChildren) == 0 {
		time.Sleep(time.Duration(c.rng.Int63n(int64(2 * c.sz.tick))))
		now := time.Now()
		for _, p := range c.procs {
			c.tend(p, now)
		}
		if c.allWorkersFinished() {
			break
		}
		switch r := c.rng.Float64(); {
		case r < c.sz.pStop:
			c.stopOne(now)
		case r < c.sz.pStop+c.sz.pKill:
			c.killOne()
		}
	}
	c.finish()
}

func (c *controller) allWorkersFinished() bool {
	for _, p := range c.procs {
		if p.role == roleWorker && !p.finished {
			return false
		}
	}
	return true
}

// start starts p's next incarnation, armed with a seam to kill at with probability pArm.
func (c *controller) start(p *proc) {
	t := c.t
	p.inc++
	c.st.incarnations++
	p.cfg = childConfig{Role: p.role, Name: p.name, Index: p.index, Inc: p.inc, Dir: c.dir, Seed: c.rng.Int63()}
	if p.role == roleWorker {
		p.cfg.Ops = c.sz.ops
		p.cfg.Lossy = c.rng.Float64() < c.sz.pLossy
		if p.cfg.Lossy {
			c.st.lossy++
		}
		p.cfg.HoldAfter = []time.Duration{time.Millisecond, 20 * time.Millisecond, 0, -1, 0, -1}[c.rng.Intn(6)]
		p.cfg.Pace = c.sz.chaos / time.Duration(c.sz.ops)
		p.cfg.Hook = c.rng.Intn(2) == 0
		p.cfg.Forget = c.rng.Float64() < 0.5
	}
	p.spec, p.seam = "", ""
	if seams := c.seams[p.role]; len(seams) > 0 && c.rng.Float64() < c.sz.pArm {
		p.seam = seams[c.rng.Intn(len(seams))]
		n := c.rng.Intn(12)
		if strings.HasSuffix(p.seam, "_batch") {
			n = c.rng.Intn(60)
		}
		p.spec = fmt.Sprintf("%s=after(%d)->kill", p.seam, n)
		c.st.armed++
	}
	// Some incarnations are slow at one seam of their writes: a longer window in which
	// a pause, GC and recovery meet the write in flight.
	if slow := c.slowSeams[p.role]; len(slow) > 0 && c.rng.Float64() < c.sz.pSlow {
		if seam := slow[c.rng.Intn(len(slow))]; seam != p.seam {
			if p.spec != "" {
				p.spec += ";"
			}
			ms := 20 + c.rng.Intn(400)
			switch {
			case strings.HasSuffix(seam, "_batch"): // hit once per batch
				ms = 5 + c.rng.Intn(50)
			case seam == "manifest.before_txn_put" && c.rng.Intn(2) == 0:
				// Its objects are written, its commit not begun: with no hold (or one
				// whose lease a pause ends) GC with no grace fences it meanwhile.
				ms = 300 + c.rng.Intn(1500)
			}
			p.spec += fmt.Sprintf("%s=sleep(%dms)", seam, ms)
			c.st.slowed++
		}
	}
	raw, err := json.Marshal(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	env := slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, failpoint.EnvVar+"=") || strings.HasPrefix(e, envChild+"=")
	})
	env = append(env, envChild+"="+string(raw))
	env = append(env, enginetest.ChildEnv(c.s)...)
	if p.spec != "" {
		env = append(env, failpoint.EnvVar+"="+p.spec)
	}
	// A race-enabled child otherwise sleeps 1 s on exit (the race runtime's default).
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		env = append(env, "GORACE="+strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	cmd.Env = env
	p.log = filepath.Join(c.dir, fmt.Sprintf("%s.%d.log", p.name, p.inc))
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s.%d: %v", p.name, p.inc, err)
	}
	out.Close()
	p.cmd, p.done, p.err = cmd, make(chan struct{}), nil
	p.running, p.stopped, p.expired, p.killedByUs = true, false, false, false
	p.expireAt = time.Time{}
	done := p.done
	go func() {
		p.err = cmd.Wait()
		close(done)
	}()
}

// tend resumes p when its pause is over, expires its holds' leases when due, and reaps
// and restarts it when it has exited.
func (c *controller) tend(p *proc, now time.Time) {
	if !p.running {
		return
	}
	if p.stopped && !p.expireAt.IsZero() && !p.expired && !now.Before(p.expireAt) {
		p.expired = true
		c.st.leaseExpiries++
		c.st.holdsExpired += c.expireHoldsOf(p.cmd.Process.Pid)
	}
	if p.stopped && !now.Before(p.contAt) {
		c.cont(p)
	}
	select {
	case <-p.done:
	default:
		return
	}
	pid := p.cmd.Process.Pid
	if !c.reap(p) {
		return
	}
	// Its holds' leases expire one TTL after its death; mostly, that is now.
	if c.rng.Float64() < 0.7 {
		c.st.holdsExpired += c.expireHoldsOf(pid)
	}
	if p.role == roleWorker && p.finished {
		return
	}
	c.start(p)
}

// reap records how p's incarnation ended; false means it failed (the run stops).
func (c *controller) reap(p *proc) bool {
	p.running, p.stopped = false, false
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		c.st.cleanExits++
		p.finished = true
		return true
	case errors.As(p.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			if p.killedByUs {
				c.st.ctlKills++
			} else {
				c.st.seamKills[p.seam]++
			}
			return true
		}
	}
	c.st.failedChildren = append(c.st.failedChildren,
		fmt.Sprintf("%s.%d (spec %q) ended with %v:\n%s", p.name, p.inc, p.spec, p.err, tail(p.log, 4000)))
	return false
}

// stopOne pauses a random running process for 0.2-3 s; for most pauses its holds' leases
// are revoked while it is paused, as etcd does one TTL after its last keep-alive, so GC
// and recovery act as if it were dead. A few pauses (pLong) last past the hold lease for
// real (catalog.DefaultHoldTTL plus 1-4 s) and revoke nothing: etcd expires the leases.
func (c *controller) stopOne(now time.Time) {
	var cand []*proc
	n := 0
	for _, p := range c.procs {
		if p.stopped {
			n++
		} else if p.running {
			cand = append(cand, p)
		}
	}
	if n >= c.sz.maxStopped || len(cand) == 0 {
		return
	}
	// Half the pauses go to a process that holds a catalog hold, if any does: pausing
	// it past its lease is what lets GC and recovery act on its work while it runs.
	if c.rng.Intn(2) == 0 {
		holders := c.holders()
		if h := slices.DeleteFunc(slices.Clone(cand), func(p *proc) bool { return holders[p.cmd.Process.Pid] == 0 }); len(h) > 0 {
			cand = h
		}
	}
	p := cand[c.rng.Intn(len(cand))]
	pause := time.Duration(200+c.rng.Intn(2800)) * time.Millisecond
	expire := c.rng.Float64() < c.sz.pCut
	if c.rng.Float64() < c.sz.pLong {
		pause, expire = catalog.DefaultHoldTTL+time.Duration(1000+c.rng.Intn(3000))*time.Millisecond, false
		c.st.longStops++
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return // it just exited
	}
	c.st.stops++
	p.stopped, p.contAt, p.expired = true, now.Add(pause), false
	p.expireAt = time.Time{}
	if expire {
		p.expireAt = now.Add(time.Duration(c.rng.Int63n(int64(pause))))
	}
}

func (c *controller) cont(p *proc) {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	p.stopped = false
}

// killOne SIGKILLs a random running process, wherever it is.
func (c *controller) killOne() {
	var cand []*proc
	for _, p := range c.procs {
		if p.running {
			cand = append(cand, p)
		}
	}
	if len(cand) == 0 {
		return
	}
	p := cand[c.rng.Intn(len(cand))]
	p.killedByUs = true
	_ = p.cmd.Process.Kill()
}

// holders returns how many holds each process (by pid) has on the two tables.
func (c *controller) holders() map[int]int {
	out := map[int]int{}
	for _, table := range []string{mainTable, owTable} {
		hs, err := c.db.Catalog().Holds(context.Background(), table)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, h := range hs {
			if i := strings.LastIndexByte(h.Holder, ':'); i >= 0 {
				if pid, err := strconv.Atoi(h.Holder[i+1:]); err == nil {
					out[pid]++
				}
			}
		}
	}
	return out
}

// expireHoldsOf revokes the leases of every hold pid holds on the two tables and returns
// how many it revoked.
func (c *controller) expireHoldsOf(pid int) int {
	ctx := context.Background()
	n := 0
	for _, table := range []string{mainTable, owTable} {
		r, err := c.etcd.Get(ctx, c.db.Catalog().HoldKey(table, ""), clientv3.WithPrefix())
		if err != nil {
			c.t.Fatal(err)
		}
		for _, kv := range r.Kvs {
			var h struct {
				Holder string `json:"holder"`
			}
			if json.Unmarshal(kv.Value, &h) != nil || !strings.HasSuffix(h.Holder, ":"+strconv.Itoa(pid)) || kv.Lease == 0 {
				continue
			}
			if _, err := c.etcd.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err == nil {
				n++
			}
		}
	}
	return n
}

// finish resumes every paused process, creates the stop file and waits for every
// process to end (a process killed at a seam on its way out is not restarted).
func (c *controller) finish() {
	t := c.t
	for _, p := range c.procs {
		if p.stopped {
			c.cont(p)
		}
	}
	if err := os.WriteFile(stopFile(c.dir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(2 * time.Minute)
	stopAt := time.Now()
	for _, p := range c.procs {
		if !p.running {
			continue
		}
		select {
		case <-p.done:
			if d := time.Since(stopAt); d > 3*time.Second {
				t.Logf("%s.%d took %s to stop (spec %q)", p.name, p.inc, d.Round(time.Millisecond), p.spec)
			}
		case <-deadline:
			_ = p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines go to its log
			time.Sleep(2 * time.Second)
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Fatalf("%s.%d did not stop within 2 minutes of the stop file:\n%s", p.name, p.inc, tail(p.log, 20000))
		}
		c.reap(p)
	}
	c.st.stopping = time.Since(stopAt)
	c.rd.halt()
	if len(c.st.failedChildren) > 0 {
		t.Fatalf("child process failed:\n%s", strings.Join(c.st.failedChildren, "\n"))
	}
}

// tail returns the last n bytes of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// report logs the run's numbers.
func (c *controller) report(ck *checker, chaosWall, checkWall time.Duration) {
	t := c.t
	type key struct{ kind, outcome string }
	counts := map[key]int{}
	decided := map[key]int{} // unknown or killed operations that landed
	var aborted, conflicts, dups, retries, again, total int
	rejected, rejectedExample := map[string]int{}, map[string]string{}
	for _, o := range ck.ops {
		if o.Proc == "ctl" {
			continue
		}
		total++
		k := key{o.Kind, o.outcome()}
		counts[k]++
		if _, ok := ck.landed[o.Key]; ok && (k.outcome == "unknown" || k.outcome == "killed") {
			decided[k]++
		}
		if o.Begins > 1 {
			again++
		}
		if e := o.End; e != nil {
			if e.Outcome == engine.Rejected.String() {
				k := errClass(e.Err)
				rejected[k]++
				if rejectedExample[k] == "" {
					rejectedExample[k] = e.Err
				}
			}
			if e.Aborted {
				aborted++
			}
			if e.Conflict {
				conflicts++
			}
			if e.Dup {
				dups++
			}
			retries += e.Retries
		}
	}
	t.Logf("wall time: %s of setup and chaos (%s of it stopping the processes), %s of checks",
		chaosWall.Round(time.Millisecond), c.st.stopping.Round(time.Millisecond), checkWall.Round(time.Millisecond))
	t.Logf("processes: %d incarnations (%d armed with a seam to kill at, %d slow at a seam, %d worker incarnations lossy); SIGKILL at a seam %d %v; SIGKILL by the controller %d; SIGSTOP %d (%d of them past the lease by revoking it, %d past the real lease); holds' leases revoked %d; clean exits %d",
		c.st.incarnations, c.st.armed, c.st.slowed, c.st.lossy, sum(c.st.seamKills), c.st.seamKills, c.st.ctlKills, c.st.stops, c.st.leaseExpiries, c.st.longStops, c.st.holdsExpired, c.st.cleanExits)
	t.Logf("writer operations: %d (run again under the same key: %d; Table.Retry calls: %d; duplicates found by key: %d; rejected as fenced (ErrTxnAborted): %d; conflicts: %d)",
		total, again, retries, dups, aborted, conflicts)
	for _, kind := range []string{kindAppend, kindDelete, kindUpdate, kindOverwrite} {
		t.Logf("  %-9s committed %4d  rejected %4d  unknown %3d (landed %3d)  killed %3d (landed %3d)", kind,
			counts[key{kind, "committed"}], counts[key{kind, "rejected"}],
			counts[key{kind, "unknown"}], decided[key{kind, "unknown"}], counts[key{kind, "killed"}], decided[key{kind, "killed"}])
	}
	for _, k := range slices.Sorted(maps.Keys(rejected)) {
		t.Logf("  rejected: %s x%d, e.g. %s", k, rejected[k], rejectedExample[k])
	}
	maint := map[string]*[4]int{} // runs, errors, deleted, fenced
	errKinds := map[string]int{}
	errExample := map[string]string{}
	for _, p := range c.procs {
		if p.role == roleWorker {
			continue
		}
		entries, err := readJournal(journalPath(c.dir, p.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			what := e.What
			if e.What == "compact" && e.Err == "" && e.Version != 0 {
				what = "compact(committed)"
			}
			if maint[what] == nil {
				maint[what] = &[4]int{}
			}
			m := maint[what]
			m[0]++
			m[2] += e.Deleted
			m[3] += e.Fenced
			if e.Err != "" {
				m[1]++
				k := e.What + ": " + errClass(e.Err)
				errKinds[k]++
				if errExample[k] == "" {
					errExample[k] = e.Err
				}
			}
		}
	}
	for _, what := range slices.Sorted(maps.Keys(maint)) {
		m := maint[what]
		t.Logf("  %-18s runs %4d  errors %3d  files deleted %4d  fenced %3d", what, m[0], m[1], m[2], m[3])
	}
	for _, k := range slices.Sorted(maps.Keys(errKinds)) {
		t.Logf("  maintenance error %s x%d, e.g. %s", k, errKinds[k], errExample[k])
	}
	for _, table := range []string{mainTable, owTable} {
		h := ck.hist[table]
		t.Logf("table %s: HEAD %d, published %d, %d versions expired; versions by kind %v", table, h.head, h.published, h.expired, h.kinds)
	}
	for _, n := range ck.notes {
		t.Log(n)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// errClass shortens an error message to a class for the report.
func errClass(msg string) string {
	for _, c := range []string{"transaction aborted", "hold lease lost", "retry budget exhausted", "conflict", "not found", "no such file", "injected", "context deadline", "corrupt"} {
		if strings.Contains(msg, c) {
			return c
		}
	}
	return "other"
}
