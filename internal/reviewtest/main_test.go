package reviewtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
)

// Environment of a child process (the re-executed test binary).
const (
	envMode  = "SHALE_REVIEWTEST_CHILD" // compact | append | delete
	envTable = "SHALE_REVIEWTEST_TABLE"
	envFirst = "SHALE_REVIEWTEST_FIRST" // append: first id
	envRows  = "SHALE_REVIEWTEST_ROWS"  // append: number of rows
	envWhere = "SHALE_REVIEWTEST_WHERE" // delete: the WHERE expression
)

// resultPrefix starts the stdout line on which a child reports what it did.
const resultPrefix = "REVIEWTEST-RESULT "

// exitOpFailed is a child's exit status when its operation returned an error (the result
// line is printed first).
const exitOpFailed = 3

// targetRows is the compaction's target: the test tables are a few hundred rows, so every
// fragment is small and one group takes them all.
const targetRows = 1000

func TestMain(m *testing.M) {
	if mode := os.Getenv(envMode); mode != "" {
		os.Exit(child(mode))
	}
	enginetest.Main(m)
}

// result is what a child reports on its result line.
type result struct {
	Mode         string   `json:"mode"`
	Version      uint64   `json:"version"` // committed version (0: none)
	ReadVersion  uint64   `json:"read_version,omitempty"`
	TxnID        string   `json:"txn_id,omitempty"`
	Attempts     int      `json:"attempts,omitempty"`
	Rebased      []uint64 `json:"rebased,omitempty"`
	Published    bool     `json:"published"`
	Rows         int64    `json:"rows,omitempty"`
	Err          string   `json:"err,omitempty"`
	NotPublished bool     `json:"not_published,omitempty"` // err wraps compaction.ErrNotPublished
}

// child runs one operation of the given mode and returns the process exit status.
func child(mode string) int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "reviewtest child:", err)
		return 1
	}
	db, closeDB, err := enginetest.OpenChildDB(ctx, engine.Options{})
	if err != nil {
		return fail(err)
	}
	defer closeDB()
	table := os.Getenv(envTable)
	res := result{Mode: mode}
	var opErr error
	switch mode {
	case "compact":
		st, err := recovery.Enable(compaction.New(db)).Run(ctx, table, compaction.Options{TargetRows: targetRows})
		res.Version, res.ReadVersion, res.TxnID, res.Attempts = st.Version, st.ReadVersion, st.TxnID, st.Attempts
		res.Rebased, res.Published, res.Rows = st.Rebased, st.Published, st.RowsRewritten
		opErr = err
		if err == nil && st.Version == 0 {
			opErr = errors.New("nothing compacted")
		}
	case "append", "delete":
		tbl, err := db.OpenTable(ctx, table)
		if err != nil {
			return fail(err)
		}
		var cr engine.CommitResult
		if mode == "append" {
			first, err1 := strconv.ParseInt(os.Getenv(envFirst), 10, 64)
			n, err2 := strconv.Atoi(os.Getenv(envRows))
			if err := errors.Join(err1, err2); err != nil {
				return fail(err)
			}
			rec := batch(first, n)
			cr, opErr = tbl.AppendRecord(ctx, rec)
			rec.Release()
		} else {
			cr, opErr = tbl.Delete(ctx, os.Getenv(envWhere))
		}
		res.Version, res.Rebased, res.Published, res.Rows = cr.Version, cr.Rebased, cr.Published, cr.Rows
	default:
		return fail(fmt.Errorf("unknown mode %q", mode))
	}
	if opErr != nil {
		res.Err = opErr.Error()
		res.NotPublished = errors.Is(opErr, compaction.ErrNotPublished)
	}
	b, _ := json.Marshal(res)
	fmt.Printf("%s%s\n", resultPrefix, b)
	if opErr != nil {
		return exitOpFailed
	}
	return 0
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// batch returns rows ids first..first+n-1, s = "row-<id>".
func batch(first int64, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := first; id < first+int64(n); id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row-%d", id))
	}
	return b.NewRecordBatch()
}

// fixture is one test's store, DB (with the shared etcd as its catalog) and table.
type fixture struct {
	t     *testing.T
	s     store.Store
	db    *engine.DB
	table string
	dir   string // for release files
	cli   *coord.Client
}

// etcd returns a raw client of the shared etcd (for what the catalog does not offer:
// expiring a dead process's lease).
func (f *fixture) etcd() *clientv3.Client {
	f.t.Helper()
	if f.cli == nil {
		cli, err := coord.Connect(context.Background(), coord.Config{Endpoints: enginetest.Etcd().Endpoints()})
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { cli.Close() })
		f.cli = cli
	}
	return f.cli.Etcd()
}

// newFixture creates table "t" with frags appends of rows rows each (ids 0..frags*rows-1,
// one small fragment per append, all published).
func newFixture(t *testing.T, s store.Store, frags, rows int) *fixture {
	t.Helper()
	sizes := make([]int, frags)
	for i := range sizes {
		sizes[i] = rows
	}
	return newFixtureSizes(t, s, sizes...)
}

// newFixtureSizes creates table "t" with one append per size (ids numbered from 0 across
// them), all published.
func newFixtureSizes(t *testing.T, s store.Store, sizes ...int) *fixture {
	t.Helper()
	f := &fixture{t: t, s: s, db: enginetest.OpenDB(t, s, engine.Options{}), table: "t", dir: t.TempDir()}
	ctx := context.Background()
	tbl, err := f.db.CreateTable(ctx, f.table, schema)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for _, n := range sizes {
		rec := batch(next, n)
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		next += int64(n)
	}
	return f
}

// ids returns the ids lo..hi-1 as rows ("id|row-id", the form rowsAt returns), in id
// order (not sorted as strings: pass them through merged to compare).
func ids(lo, hi int64) []string {
	var out []string
	for id := lo; id < hi; id++ {
		out = append(out, fmt.Sprintf("%d|row-%d", id, id))
	}
	return out
}

// merged returns the sorted union of row lists.
func merged(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

// rows scans the table at its published version; rowsAt at version v (0 = published).
// Rows come back sorted ("id|s"), so content compares regardless of fragment order.
func (f *fixture) rows() []string { return f.rowsAt(0) }

func (f *fixture) rowsAt(v uint64) []string {
	f.t.Helper()
	ctx := context.Background()
	var tbl *engine.Table
	var err error
	if v == 0 {
		tbl, err = f.db.OpenTable(ctx, f.table)
	} else {
		tbl, err = f.db.OpenTableAt(ctx, f.table, v)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	sc, err := tbl.Scan(ctx, engine.ScanOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, rec.Column(0).ValueStr(i)+"|"+rec.Column(1).ValueStr(i))
		}
	}
	if err := sc.Err(); err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// equalRows fails the test unless got and want (sorted) are equal, naming the first
// difference.
func equalRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	missing, extra := diff(want, got), diff(got, want)
	t.Fatalf("%s: %d rows, want %d; missing %d (first %q), extra %d (first %q)",
		what, len(got), len(want), len(missing), first(missing), len(extra), first(extra))
}

// diff returns the rows of a not in b, in a's order.
func diff(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

func first(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return l[0]
}

// published returns the table's published version.
func (f *fixture) published() uint64 {
	f.t.Helper()
	p, _, err := f.db.Catalog().Get(context.Background(), f.table)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Version
}

// head returns the table's HEAD manifest.
func (f *fixture) head() *manifest.Manifest {
	f.t.Helper()
	m, err := manifest.LoadHead(context.Background(), f.s, f.table)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// load returns version v's manifest.
func (f *fixture) load(v uint64) *manifest.Manifest {
	f.t.Helper()
	m, err := manifest.Load(context.Background(), f.s, f.table, v)
	if err != nil {
		f.t.Fatalf("load version %d: %v", v, err)
	}
	return m
}

// sidecars returns the pending sidecars of the table (decoded), oldest first.
func (f *fixture) sidecars() []recovery.Sidecar {
	f.t.Helper()
	ctx := context.Background()
	keys, err := recovery.Pending(ctx, f.s, f.table)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []recovery.Sidecar
	for _, k := range keys {
		b, err := f.s.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			f.t.Fatal(err)
		}
		sc, err := recovery.Decode(b)
		if err != nil {
			f.t.Fatalf("sidecar %s: %v", k, err)
		}
		out = append(out, sc)
	}
	return out
}

// verifyOK runs verify over every version of the table and fails on any fault.
func (f *fixture) verifyOK() {
	f.t.Helper()
	rep, err := verify.Table(context.Background(), f.s, f.db.Catalog(), f.table, verify.Options{AllVersions: true})
	if err != nil {
		f.t.Fatal(err)
	}
	if !rep.OK() {
		f.t.Fatalf("verify: %v", rep.Err())
	}
}

// referencedFiles returns every data file key some version 1..HEAD references.
func (f *fixture) referencedFiles() map[string]bool {
	f.t.Helper()
	refs := map[string]bool{}
	for v := uint64(1); v <= f.head().Version; v++ {
		for _, fr := range f.load(v).Fragments {
			for _, df := range fr.Files {
				refs[df.Key] = true
			}
		}
	}
	return refs
}

// noOrphanFiles fails if a data file of the table is referenced by no version (a
// compaction attempt's leftovers that its Phase D or Recover should have deleted).
func (f *fixture) noOrphanFiles() {
	f.t.Helper()
	refs := f.referencedFiles()
	objs, err := f.s.List(context.Background(), manifest.DataDir(f.table)+"/", 0)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, o := range objs {
		if !refs[o.Key] {
			f.t.Fatalf("data file %s is referenced by no version", o.Key)
		}
	}
}

// recover runs recovery.Recover on the table acting on every sidecar (MinAge < 0).
func (f *fixture) recover() recovery.Report {
	f.t.Helper()
	rep, err := recovery.Recover(context.Background(), f.s, f.db.Catalog(), f.table, recovery.Options{MinAge: -1})
	if err != nil {
		f.t.Fatalf("recover: %v (%+v)", err, rep)
	}
	return rep
}

// releaseFile returns a fresh path under the test's directory for a block(path) action;
// create it with release.
func (f *fixture) releaseFile(name string) string { return filepath.Join(f.dir, name) }

func (f *fixture) release(path string) {
	f.t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// proc is a running child process.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	err    error // Wait's error, set before done closes
}

// start runs the test binary as a child in mode with the given failpoint spec ("" =
// none) and extra environment (NAME=value).
func (f *fixture) start(name, mode, failpoints string, env ...string) *proc {
	f.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envMode+"="+mode, envTable+"="+f.table), enginetest.ChildEnv(f.s)...)
	cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, failpoint.EnvVar+"=") })
	if failpoints != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+failpoints)
	}
	cmd.Env = append(cmd.Env, env...)
	// A race-enabled child otherwise sleeps 1 s on exit (the race runtime's default
	// atexit_sleep_ms), which would add seconds to the package under -race.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	f.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill() // a child left blocked by a failed test
			<-p.done
		}
	})
	return p
}

// appender, deleter and compactor start children of each mode.
func (f *fixture) appender(name, failpoints string, first int64, n int) *proc {
	return f.start(name, "append", failpoints, fmt.Sprintf("%s=%d", envFirst, first), fmt.Sprintf("%s=%d", envRows, n))
}

func (f *fixture) deleter(name, failpoints, where string) *proc {
	return f.start(name, "delete", failpoints, envWhere+"="+where)
}

func (f *fixture) compactor(name, failpoints string) *proc {
	return f.start(name, "compact", failpoints)
}

// childTimeout bounds how long a test waits for a child or a condition.
const childTimeout = 30 * time.Second

// exit describes how a child ended.
type exit struct {
	killed bool   // by SIGKILL (a failpoint kill)
	code   int    // exit status when not killed
	res    result // its result line (zero if it printed none)
	hasRes bool
}

// wait waits for p to end and parses its result line.
func (p *proc) wait(t *testing.T) exit {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(childTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not end within %v\nstdout:\n%s\nstderr:\n%s", p.name, childTimeout, &p.stdout, &p.stderr)
	}
	var e exit
	var ee *exec.ExitError
	switch {
	case p.err == nil:
	case errors.As(p.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			e.killed = true
		} else {
			e.code = ee.ExitCode()
		}
	default:
		t.Fatalf("%s: %v", p.name, p.err)
	}
	sc := bufio.NewScanner(bytes.NewReader(p.stdout.Bytes()))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			if err := json.Unmarshal([]byte(line), &e.res); err != nil {
				t.Fatalf("%s: bad result line %q: %v", p.name, line, err)
			}
			e.hasRes = true
		}
	}
	return e
}

// mustSucceed waits for p and fails unless it exited 0 with a result.
func (p *proc) mustSucceed(t *testing.T) result {
	t.Helper()
	e := p.wait(t)
	if e.killed || e.code != 0 || !e.hasRes {
		t.Fatalf("%s: killed=%v code=%d result=%+v\nstdout:\n%s\nstderr:\n%s", p.name, e.killed, e.code, e.res, &p.stdout, &p.stderr)
	}
	return e.res
}

// mustBeKilled waits for p and fails unless a failpoint killed it.
func (p *proc) mustBeKilled(t *testing.T) {
	t.Helper()
	if e := p.wait(t); !e.killed {
		t.Fatalf("%s was not killed: code=%d result=%+v\nstdout:\n%s\nstderr:\n%s", p.name, e.code, e.res, &p.stdout, &p.stderr)
	}
}

// waitFor polls cond until it holds, failing after childTimeout or as soon as one of
// the watched children ends (it would never make cond true).
func (f *fixture) waitFor(what string, cond func() bool, watch ...*proc) {
	f.t.Helper()
	deadline := time.Now().Add(childTimeout)
	for !cond() {
		for _, p := range watch {
			select {
			case <-p.done:
				f.t.Fatalf("waiting for %s: %s ended (%v)\nstdout:\n%s\nstderr:\n%s", what, p.name, p.err, &p.stdout, &p.stderr)
			default:
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("waiting for %s: not within %v", what, childTimeout)
		}
		time.Sleep(5 * time.Millisecond) // polling interval of a condition wait, not a sleep for timing
	}
}

// headIs reports whether HEAD is version v.
func (f *fixture) headIs(v uint64) func() bool {
	return func() bool {
		h, err := manifest.Head(context.Background(), f.s, f.table)
		return err == nil && h == v
	}
}

// sidecarArmed reports whether a sidecar of the table exists.
func (f *fixture) sidecarArmed() bool {
	keys, err := recovery.Pending(context.Background(), f.s, f.table)
	return err == nil && len(keys) > 0
}

// txnStored reports whether a transaction record of id exists (the commit loop stores it
// right before manifest.before_version_put).
func (f *fixture) txnStored(id string) func() bool {
	return func() bool {
		objs, err := f.s.List(context.Background(), manifest.TxnDir(f.table), 0)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(objs, func(o store.ObjectInfo) bool { return strings.HasSuffix(o.Key, "-"+id+".txn") })
	}
}

// block is a SHALE_FAILPOINTS entry holding seam until path exists.
func block(seam, path string) string { return seam + "=block(" + path + ")" }

// spec joins failpoint entries.
func spec(entries ...string) string { return strings.Join(entries, ";") }
