package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// Multi-process transaction tests: children are this test binary re-executed with
// linChildEnv set to a JSON linChildConfig. They are dispatched from init, before TestMain,
// so a child neither starts an embedded etcd of its own nor needs the package's other child
// dispatcher; it joins the parent's etcd, waits for a start file, runs its role, writes its
// history and exits.

const linChildEnv = "SHALE_ENGINE_LIN_CHILD"

func init() {
	if cfg := os.Getenv(linChildEnv); cfg != "" {
		if err := runLinChild(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "linearizability child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// Child roles.
const (
	roleSingle = "single" // mixed appends, deletes and updates of one table
	roleGroup  = "group"  // multi-table commits over both tables
	roleAppend = "append" // appends only
)

type linChildConfig struct {
	Role    string
	Proc    int
	Procs   []int // the single-table processes (whose rows a single-table process may find)
	Ops     int
	Seed    uint64
	Store   string
	Etcd    []string
	Dir     string // start file, ready files and logs
	Tables  []string
	Timeout time.Duration
	// Faults injects store and etcd faults into this process's commits (injectFaults).
	Faults bool
}

func (c linChildConfig) logPath() string {
	return filepath.Join(c.Dir, fmt.Sprintf("p%d.jsonl", c.Proc))
}
func (c linChildConfig) readyPath() string {
	return filepath.Join(c.Dir, fmt.Sprintf("ready-%d", c.Proc))
}
func linStartPath(dir string) string { return filepath.Join(dir, "start") }

// waitFor polls cond until it holds or the deadline passes (a condition with a deadline,
// not a fixed sleep).
func linWaitFor(deadline time.Time, what string, cond func() bool) error {
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(wait)
	}
	return nil
}

func linFileExists(p string) func() bool {
	return func() bool { _, err := os.Stat(p); return err == nil }
}

func runLinChild(cfgJSON string) error {
	var cfg linChildConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	var s store.Store
	s, err := store.Open(ctx, cfg.Store, store.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: cfg.Etcd})
	if err != nil {
		return err
	}
	defer cli.Close()
	var report func() error
	if cfg.Faults {
		s, report = linInjectFaults(s, cli, cfg)
	}
	db, err := Open(ctx, s, Options{Etcd: cli.Etcd()})
	if err != nil {
		return err
	}
	log, err := createLinLog(cfg.logPath())
	if err != nil {
		return err
	}
	c := &linChild{cfg: cfg, db: db, log: log, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Proc)))}
	// Open the tables before the start so every process begins with its first operation.
	for _, n := range cfg.Tables {
		if _, err := db.OpenTable(ctx, n); err != nil {
			return err
		}
	}
	if err := os.WriteFile(cfg.readyPath(), nil, 0o644); err != nil {
		return err
	}
	if err := linWaitFor(time.Now().Add(cfg.Timeout), "the start file", linFileExists(linStartPath(cfg.Dir))); err != nil {
		return err
	}
	c.clk = newLinClock()
	switch cfg.Role {
	case roleSingle:
		err = c.runSingle(ctx)
	case roleGroup:
		err = c.runGroup(ctx)
	case roleAppend:
		err = c.runAppends(ctx)
	default:
		err = fmt.Errorf("unknown role %q", cfg.Role)
	}
	err = errors.Join(err, log.close())
	if report != nil {
		err = errors.Join(err, report())
	}
	return err
}

// injectFaults wraps the process's store and etcd client (before the DB uses them) with
// faults drawn from a stream seeded by the run's seed and the process:
//
//   - manifest put-if-absent: 10% applied but the answer lost (ErrOutcomeUnknown; the
//     commit loop must read the version back to decide), 5% lost before reaching the store
//     (ErrOutcomeUnknown with nothing written);
//   - data file puts: 3% fail with a transient error (the write is rejected, nothing
//     commits);
//   - etcd writes (the publish): 10% applied but the answer lost, 5% never sent (both
//     retried inside the catalog, as Unavailable errors), and the first 2 plus 5% never
//     sent with an error the catalog does not retry: the write's outcome is then Unknown
//     (committed, publish undecided) and the process finishes it with Table.Retry.
//
// It returns the wrapped store and a function writing the injection counts to
// faults-p<N>.json in the run's directory.
func linInjectFaults(s store.Store, cli *coord.Client, cfg linChildConfig) (store.Store, func() error) {
	seed := cfg.Seed ^ uint64(cfg.Proc+1)*0x9e3779b97f4a7c15
	fs := faults.NewStore(s, seed)
	ops := []store.Op{store.OpPutIfAbsent}
	fs.Add(faults.Rule{Name: "manifest-answer-lost", Ops: ops, Key: "*/_versions/*", Kind: faults.DropResponse, Probability: 0.10})
	fs.Add(faults.Rule{Name: "manifest-request-lost", Ops: ops, Key: "*/_versions/*", Kind: faults.DropRequest, Class: store.ErrOutcomeUnknown, Probability: 0.05})
	fs.Add(faults.Rule{Name: "data-put-failed", Ops: []store.Op{store.OpPut}, Key: "*/data/*", Kind: faults.DropRequest, Probability: 0.03})
	kv := faults.WrapKV(cli.Etcd(), seed+1)
	hard := status.Error(codes.Unknown, "injected: not retryable")
	kv.Add(faults.EtcdRule{Name: "publish-failed", WritesOnly: true, Kind: faults.DropRequest, Times: 2, Err: hard})
	kv.Add(faults.EtcdRule{Name: "publish-answer-lost", WritesOnly: true, Kind: faults.DropResponse, Probability: 0.10})
	kv.Add(faults.EtcdRule{Name: "publish-request-lost", WritesOnly: true, Kind: faults.DropRequest, Probability: 0.05})
	kv.Add(faults.EtcdRule{Name: "publish-failed-random", WritesOnly: true, Kind: faults.DropRequest, Probability: 0.05, Err: hard})
	return fs, func() error {
		counts := map[string]int{}
		for _, in := range append(fs.Injections(), kv.Injections()...) {
			counts[in.Rule]++
		}
		b, err := json.Marshal(counts)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(cfg.Dir, fmt.Sprintf("faults-p%d.json", cfg.Proc)), b, 0o644)
	}
}

type linChild struct {
	cfg linChildConfig
	db  *DB
	log *linLog
	rng *rand.Rand
	clk linClock
	seq int
}

func (c *linChild) begin(kind string, effects ...linEffect) *linOp {
	c.seq++
	return &linOp{Proc: c.cfg.Proc, Seq: c.seq, Kind: kind, Effects: effects, Call: c.clk.now()}
}

// finish records a single-table write's outcome and logs it. An unknown outcome is
// retried with Table.Retry (same transaction: it commits at most once) up to 3 times; the
// operation then spans from its first invocation to the last answer.
func (c *linChild) finish(ctx context.Context, tbl *Table, op *linOp, res CommitResult, err error) error {
	for try := 0; try < 3 && OutcomeOf(err) == Unknown; try++ {
		var ue *UnknownError
		if !errors.As(err, &ue) {
			break
		}
		op.Retries++
		op.Txn = ue.Txn.ID
		op.FirstErr = append(op.FirstErr, err.Error())
		rows := res.Rows
		res, err = tbl.Retry(ctx, ue.Txn)
		res.Rows = rows
	}
	op.Return = c.clk.now()
	op.Injected = errors.Is(err, faults.ErrInjected)
	op.Outcome = OutcomeOf(err).String()
	switch OutcomeOf(err) {
	case Committed:
		op.Effects[0].Version, op.Attempts, op.Rebased, op.Rows = res.Version, res.Attempts, len(res.Rebased), res.Rows
	case Rejected:
		op.Err, op.Conflict = err.Error(), errors.Is(err, manifest.ErrConflict)
	case Unknown:
		op.Err = err.Error()
		var ue *UnknownError
		if errors.As(err, &ue) {
			op.Txn = ue.Txn.ID
		}
	}
	return c.log.add(op)
}

// read logs a Refresh of tbl: the published version it found.
func (c *linChild) read(ctx context.Context, tbl *Table) error {
	op := c.begin(linKindRead)
	if err := tbl.Refresh(ctx); err != nil {
		return err
	}
	op.Return = c.clk.now()
	op.Effects = []linEffect{{Table: tbl.Name(), Version: tbl.Version()}}
	return c.log.add(op)
}

func (c *linChild) appendRows(ctx context.Context, tbl *Table, kind string, rows []linRow) (*linOp, error) {
	rec := linBatch(rows)
	defer rec.Release()
	op := c.begin(kind, linEffect{Table: tbl.Name(), Put: rows})
	res, err := tbl.AppendRecord(ctx, rec)
	return op, c.finish(ctx, tbl, op, res, err)
}

func (c *linChild) deleteRow(ctx context.Context, tbl *Table, kind string, id int64) (*linOp, error) {
	op := c.begin(kind, linEffect{Table: tbl.Name(), Del: []int64{id}})
	res, err := tbl.Delete(ctx, fmt.Sprintf("id = %d", id))
	return op, c.finish(ctx, tbl, op, res, err)
}

// updateRow sets the val of row r.ID to r.Val with Table.Update (one version).
func (c *linChild) updateRow(ctx context.Context, tbl *Table, r linRow) (*linOp, error) {
	op := c.begin(linKindUpdate, linEffect{Table: tbl.Name(), Upd: []linRow{r}})
	res, err := tbl.Update(ctx, map[string]string{"val": fmt.Sprintf("'%s'", r.Val)}, fmt.Sprintf("id = %d", r.ID))
	return op, c.finish(ctx, tbl, op, res, err)
}

// runSingle: Ops rounds of (Refresh, then an append of 4 rows, a delete of one row or an
// update of one row). Row k of an append belongs to the process in slot k: only it deletes
// or updates the row, after finding it, so effects are attributable and deletes of
// different processes meet in the same fragments (their deletion vectors must merge).
func (c *linChild) runSingle(ctx context.Context) error {
	tbl, err := c.db.OpenTable(ctx, c.cfg.Tables[0])
	if err != nil {
		return err
	}
	p := c.cfg.Proc
	mine := map[int64]bool{} // live rows of my slot that I know of
	gone := map[int64]bool{} // rows I deleted
	for i := 0; i < c.cfg.Ops; i++ {
		if err := c.read(ctx, tbl); err != nil {
			return err
		}
		kind := linKindAppend
		if i > 0 {
			switch x := c.rng.IntN(4); {
			case x == 2:
				kind = linKindDelete
			case x == 3:
				kind = linKindUpdate
			}
		}
		var target int64 = -1
		if kind != linKindAppend {
			target, err = c.findTarget(ctx, tbl, i, mine, gone)
			if err != nil {
				return err
			}
			if target < 0 {
				kind = linKindAppend
			}
		}
		switch kind {
		case linKindAppend:
			rows := make([]linRow, len(c.cfg.Procs))
			for k, q := range c.cfg.Procs {
				rows[k] = linRow{ID: linRowID(p, i, q), Slot: int64(q), Val: fmt.Sprintf("a%d.%d.%d", p, i, q)}
			}
			op, err := c.appendRows(ctx, tbl, linKindAppend, rows)
			if err != nil {
				return err
			}
			if op.Outcome == linCommitted {
				mine[linRowID(p, i, p)] = true
			}
		case linKindDelete:
			op, err := c.deleteRow(ctx, tbl, linKindDelete, target)
			if err != nil {
				return err
			}
			if op.Outcome != linRejected { // committed, or unknown: leave the row alone
				delete(mine, target)
				gone[target] = true
			}
		case linKindUpdate:
			op, err := c.updateRow(ctx, tbl, linRow{ID: target, Slot: int64(p), Val: fmt.Sprintf("u%d.%d", p, i)})
			if err != nil {
				return err
			}
			if op.Outcome == linUnknown { // its value is undecided: leave the row alone
				delete(mine, target)
				gone[target] = true
			}
		}
	}
	return nil
}

// findTarget picks a live row of this process's slot: half the time one appended by
// another process (found with a point count at the refreshed version; up to 3 guesses),
// else one it already knows. -1 when there is none.
func (c *linChild) findTarget(ctx context.Context, tbl *Table, i int, mine, gone map[int64]bool) (int64, error) {
	p := c.cfg.Proc
	if c.rng.IntN(2) == 0 {
		for try := 0; try < 3; try++ {
			q := c.cfg.Procs[c.rng.IntN(len(c.cfg.Procs))]
			if q == p {
				continue
			}
			id := linRowID(q, c.rng.IntN(i+1), p)
			if mine[id] || gone[id] {
				continue
			}
			n, err := tbl.Count(ctx, fmt.Sprintf("id = %d", id))
			if err != nil {
				return -1, err
			}
			if n == 1 {
				mine[id] = true
				return id, nil
			}
		}
	}
	if len(mine) == 0 {
		return -1, nil
	}
	ids := make([]int64, 0, len(mine))
	for id := range mine {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids[c.rng.IntN(len(ids))], nil
}

// runGroup: Ops rounds of (Snapshot of both tables, then one multi-table commit): append a
// row to both tables (half the time), delete a row from both, or move it (delete it from
// the second table and append a marker row to the first). Members are always prepared in
// table order.
func (c *linChild) runGroup(ctx context.Context) error {
	p := c.cfg.Proc
	t1, t2 := c.cfg.Tables[0], c.cfg.Tables[1]
	var both []int64         // my rows live in both tables
	inT2 := map[int64]bool{} // my rows live in the second table
	for i := 0; i < c.cfg.Ops; i++ {
		rd := c.begin(linKindRead)
		snap, err := c.db.Snapshot(ctx, t1, t2)
		if err != nil {
			return err
		}
		rd.Return = c.clk.now()
		rd.Effects = []linEffect{{Table: t1, Version: snap.Tables[t1].Version()}, {Table: t2, Version: snap.Tables[t2].Version()}}
		if err := c.log.add(rd); err != nil {
			return err
		}
		kind := linKindGroupPut
		switch x := c.rng.IntN(4); {
		case x == 2 && len(both) > 0:
			kind = linKindGroupDel
		case x == 3 && len(inT2) > 0:
			kind = linKindGroupMove
		}
		var e1, e2 linEffect
		var g int64
		switch kind {
		case linKindGroupPut:
			r := linRow{ID: linRowID(p, i, 0), Slot: int64(p), Val: fmt.Sprintf("g%d.%d", p, i)}
			e1, e2 = linEffect{Table: t1, Put: []linRow{r}}, linEffect{Table: t2, Put: []linRow{r}}
		case linKindGroupDel:
			g = both[c.rng.IntN(len(both))]
			e1, e2 = linEffect{Table: t1, Del: []int64{g}}, linEffect{Table: t2, Del: []int64{g}}
		case linKindGroupMove:
			keys := make([]int64, 0, len(inT2))
			for id := range inT2 {
				keys = append(keys, id)
			}
			slices.Sort(keys)
			g = keys[c.rng.IntN(len(keys))]
			e1 = linEffect{Table: t1, Put: []linRow{{ID: linRowID(p, i, 5), Slot: int64(p), Val: fmt.Sprintf("moved %d", g)}}}
			e2 = linEffect{Table: t2, Del: []int64{g}}
		}
		var writes []*Write
		for _, e := range []linEffect{e1, e2} {
			w, err := linPrepare(ctx, snap.Tables[e.Table], e)
			if err != nil {
				return err
			}
			writes = append(writes, w)
		}
		op := c.begin(kind, e1, e2)
		res, err := c.db.Commit(ctx, writes...)
		op.Return = c.clk.now()
		op.Outcome = OutcomeOf(err).String()
		for _, w := range writes {
			op.Rows += w.rows
		}
		if err != nil {
			op.Err, op.Conflict = err.Error(), errors.Is(err, manifest.ErrConflict)
		} else {
			for k := range res {
				op.Effects[k].Version = res[k].Version
			}
		}
		if err := c.log.add(op); err != nil {
			return err
		}
		if op.Outcome != linCommitted {
			continue
		}
		switch kind {
		case linKindGroupPut:
			both = append(both, e1.Put[0].ID)
			inT2[e1.Put[0].ID] = true
		case linKindGroupDel:
			both = slices.DeleteFunc(both, func(id int64) bool { return id == g })
			delete(inT2, g)
		case linKindGroupMove:
			both = slices.DeleteFunc(both, func(id int64) bool { return id == g })
			delete(inT2, g)
		}
	}
	return nil
}

// prepare plans e on tbl for a multi-table commit.
func linPrepare(ctx context.Context, tbl *Table, e linEffect) (*Write, error) {
	if len(e.Put) > 0 {
		rec := linBatch(e.Put)
		defer rec.Release()
		rdr := recordReader(rec)
		defer rdr.Release()
		return tbl.PrepareAppend(ctx, rdr)
	}
	return tbl.PrepareDelete(ctx, fmt.Sprintf("id = %d", e.Del[0]))
}

// runAppends: Ops appends of 2 rows each on a handle opened once.
func (c *linChild) runAppends(ctx context.Context) error {
	tbl, err := c.db.OpenTable(ctx, c.cfg.Tables[0])
	if err != nil {
		return err
	}
	for i := 0; i < c.cfg.Ops; i++ {
		rows := []linRow{{ID: linRowID(c.cfg.Proc, i, 0), Val: "x"}, {ID: linRowID(c.cfg.Proc, i, 1), Val: "y"}}
		if _, err := c.appendRows(ctx, tbl, linKindAppend, rows); err != nil {
			return err
		}
	}
	return nil
}

// linRun starts one child per config, releases them together and waits for all of them.
func linRun(t *testing.T, dir string, cfgs []linChildConfig) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	type proc struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	procs := make([]*proc, len(cfgs))
	for i := range cfgs {
		cfgs[i].Dir, cfgs[i].Timeout = dir, time.Until(deadline)
		b, err := json.Marshal(cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), linChildEnv+"="+string(b))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = p
	}
	stopAll := func() {
		for _, p := range procs {
			p.cmd.Process.Kill() // our own children, by pid
			p.cmd.Wait()
		}
	}
	allReady := func() bool {
		for _, cfg := range cfgs {
			if !linFileExists(cfg.readyPath())() {
				return false
			}
		}
		return true
	}
	if err := linWaitFor(time.Now().Add(time.Minute), "every child to be ready", allReady); err != nil {
		stopAll()
		for i, p := range procs {
			t.Logf("process %d output:\n%s", cfgs[i].Proc, p.out.String())
		}
		t.Fatal(err)
	}
	if err := os.WriteFile(linStartPath(dir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var failed []string
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("process %d (%s): %v\n%s", cfgs[i].Proc, cfgs[i].Role, err, p.out.String()))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("children failed:\n%s", strings.Join(failed, "\n"))
	}
}

func linSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SHALE_LIN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SHALE_LIN_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with SHALE_LIN_SEED=%d)", seed, seed)
	return seed
}

// TestLinearizability: 4 processes × 50 rounds of (Refresh; append, delete or update) on
// one table and 2 processes × 25 rounds of (Snapshot; multi-table commit) over it and a
// second table, all released together on local disk with the package's real etcd. From
// the processes' histories it checks (a) every acknowledged operation is visible exactly
// once in the final state, (b) the final state (and the state at sampled versions) equals
// a replay of the acknowledged transactions in version order, each version acknowledged
// to exactly one operation and aborted groups' prepared versions empty, and (c) the history
// of commits, publishes and snapshot reads is linearizable (porcupine). Invariants 1, 2,
// 4, 5, 6.
func TestLinearizability(t *testing.T) {
	// The last `faulty` single-table processes run with injected faults (injectFaults).
	const singles, singleOps, groups, groupOps, faulty = 4, 50, 2, 25, 2
	ctx := context.Background()
	seed := linSeed(t)
	dir := t.TempDir()
	storeURL := "file://" + filepath.Join(dir, "store")
	db := openDB(t, storeURL)
	tables := []string{"lin", "lin2"}
	for _, n := range tables {
		if _, err := db.CreateTable(ctx, n, linSchema); err != nil {
			t.Fatal(err)
		}
	}
	var procs []int
	for p := 0; p < singles; p++ {
		procs = append(procs, p)
	}
	var cfgs []linChildConfig
	base := linChildConfig{Seed: seed, Store: storeURL, Etcd: testEtcd.Endpoints(), Tables: tables, Procs: procs}
	for p := 0; p < singles+groups; p++ {
		cfg := base
		cfg.Proc, cfg.Role, cfg.Ops = p, roleSingle, singleOps
		if p >= singles {
			cfg.Role, cfg.Ops = roleGroup, groupOps
		}
		cfg.Faults = p >= singles-faulty && p < singles
		cfgs = append(cfgs, cfg)
	}
	started := time.Now()
	linRun(t, dir, cfgs)
	t.Logf("%d processes ran in %v", len(cfgs), time.Since(started).Round(time.Millisecond))

	ops, err := readLinLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	linSummarize(t, ops)
	linCheckShape(t, ops, cfgs)
	linCheckFaults(t, dir, faulty)

	handles := map[string]*Table{}
	versions := map[string][]VersionInfo{}
	for _, n := range tables {
		tbl, err := db.OpenTable(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		handles[n] = tbl
		if versions[n], err = tbl.Versions(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := linResolveUnknown(ops, versions); err != nil {
		t.Fatal(err)
	}

	// (a) Every acknowledged operation, exactly once, in the final published state.
	want, err := linExpected(ops, tables)
	if err != nil {
		t.Fatalf("the acknowledged operations contradict each other: %v", err)
	}
	final := map[string]linRows{}
	for _, n := range tables {
		got, err := linScanRows(ctx, handles[n])
		if err != nil {
			t.Fatal(err)
		}
		final[n] = got
		if d := want[n].diff(got); d != "" {
			t.Errorf("(a) table %q at version %d vs the acknowledged operations: %s", n, handles[n].Version(), d)
		}
	}

	// (b) A sequential replay in version order gives the same states.
	for _, n := range tables {
		vs := versions[n]
		sample := map[uint64]bool{}
		for i := 1; i <= 5; i++ {
			sample[vs[len(vs)*i/6].Version] = true
		}
		checked := 0
		model, err := linReplay(n, vs, ops, func(v uint64, model linRows) error {
			if !sample[v] {
				return nil
			}
			old, err := handles[n].Checkout(ctx, v)
			if err != nil {
				return err
			}
			got, err := linScanRows(ctx, old)
			if err != nil {
				return err
			}
			checked++
			if d := model.diff(got); d != "" {
				return fmt.Errorf("table %q version %d vs the replay: %s", n, v, d)
			}
			return nil
		})
		if err != nil {
			t.Errorf("(b) %v", err)
			continue
		}
		if d := model.diff(final[n]); d != "" {
			t.Errorf("(b) table %q: final state vs the replay of %d versions: %s", n, len(vs), d)
		}
		// The published version is the last version that counts.
		last := vs[len(vs)-1]
		for i := len(vs) - 1; vs[i].Aborted; i-- {
			last = vs[i-1]
		}
		if handles[n].Version() != last.Version {
			t.Errorf("table %q: published version %d, last committed version %d (HEAD %d)", n, handles[n].Version(), last.Version, vs[len(vs)-1].Version)
		}
		t.Logf("table %q: %d versions replayed, %d sampled versions compared, %d live rows", n, len(vs), checked, len(final[n]))
	}

	// (c) Commits, publishes and snapshot reads are linearizable.
	linCheck(t, ops, tables, linState{1, 1})
}

// TestConcurrentAppendProcesses: 5 processes × 3 appends released together give 15
// committed versions with distinct numbers 2..16, ascending within each process, every row
// once, and a linearizable history (invariants 1, 6).
func TestConcurrentAppendProcesses(t *testing.T) {
	const procs, appends = 5, 3
	ctx := context.Background()
	dir := t.TempDir()
	storeURL := "file://" + filepath.Join(dir, "store")
	db := openDB(t, storeURL)
	tables := []string{"race5", "unused"}
	if _, err := db.CreateTable(ctx, tables[0], linSchema); err != nil {
		t.Fatal(err)
	}
	var cfgs []linChildConfig
	for p := 0; p < procs; p++ {
		cfgs = append(cfgs, linChildConfig{Role: roleAppend, Proc: p, Ops: appends, Store: storeURL, Etcd: testEtcd.Endpoints(), Tables: tables[:1]})
	}
	linRun(t, dir, cfgs)
	ops, err := readLinLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	last := map[int]uint64{}
	for _, o := range ops {
		if o.Outcome != linCommitted {
			t.Fatalf("%s", o)
		}
		v := o.Effects[0].Version
		if v <= last[o.Proc] {
			t.Errorf("process %d committed version %d after %d", o.Proc, v, last[o.Proc])
		}
		last[o.Proc] = v
		got = append(got, v)
	}
	slices.Sort(got)
	var want []uint64
	for v := uint64(2); v < 2+procs*appends; v++ {
		want = append(want, v)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("committed versions %v, want %v", got, want)
	}
	tbl, err := db.OpenTable(ctx, tables[0])
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Version() != want[len(want)-1] {
		t.Errorf("published version %d, want %d", tbl.Version(), want[len(want)-1])
	}
	exp, err := linExpected(ops, tables)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := linScanRows(ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if d := exp[tables[0]].diff(rows); d != "" {
		t.Errorf("rows: %s", d)
	}
	linCheck(t, ops, tables, linState{1, 0})
}
