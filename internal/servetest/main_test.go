package servetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// envChild holds a child's configuration (JSON, childConfig).
const envChild = "SHALE_SERVETEST_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envChild); cfg != "" {
		os.Exit(child(cfg))
	}
	enginetest.Main(m)
}

// Roles of child processes.
const (
	roleServe  = "serve"  // a serve process (serve.New, Start) until the stop file or SIGTERM
	roleWriter = "writer" // appends batches through WAL shards (and plain appends), journaling each
)

// target is one WAL shard a writer appends through.
type target struct {
	Table string `json:"table"`
	Shard int    `json:"shard"`
}

// childConfig is what a child is told.
type childConfig struct {
	Role   string `json:"role"`
	Name   string `json:"name"`   // names its journal (<dir>/<name>.journal) or log (<dir>/<name>.log)
	Dir    string `json:"dir"`    // journals, logs and stop files
	Prefix string `json:"prefix"` // the catalog prefix
	Stop   string `json:"stop"`   // the stop file's name in Dir

	// Serve: its executor id, slots by kind (nil: one of each), the planner-wide config
	// (durations, and the default policy's thresholds) and recovery's MinAge.
	ID             string         `json:"id,omitempty"`
	Slots          map[string]int `json:"slots,omitempty"`
	PassInterval   time.Duration  `json:"pass_interval,omitempty"`
	LeaseTTL       time.Duration  `json:"lease_ttl,omitempty"`
	IdleTimeout    time.Duration  `json:"idle_timeout,omitempty"`
	MinGenerations uint64         `json:"min_generations,omitempty"`
	// HoldAt: at the first hit of this seam the child touches <dir>/held and waits for
	// <dir>/go, ignoring its context (a process paused exactly there).
	HoldAt         string        `json:"hold_at,omitempty"`
	RecoveryMinAge time.Duration `json:"recovery_min_age,omitempty"`

	// Writer: round robin over Targets, batches of Rows rows with ids From, From+1, …;
	// FlushEvery k flushes a shard after its k-th acknowledged append; every PlainEvery-th
	// batch goes to Plain by a plain append (AppendRecord) instead; Pace between batches.
	Targets    []target      `json:"targets,omitempty"`
	Plain      string        `json:"plain,omitempty"`
	PlainEvery int           `json:"plain_every,omitempty"`
	From       int64         `json:"from,omitempty"`
	Rows       int           `json:"rows,omitempty"`
	FlushEvery int           `json:"flush_every,omitempty"`
	Pace       time.Duration `json:"pace,omitempty"`
}

func (c childConfig) stopPath() string { return filepath.Join(c.Dir, c.Stop) }

func (c childConfig) stopped() bool {
	_, err := os.Stat(c.stopPath())
	return err == nil
}

// touch creates the file at path (a stop file, a failpoint's block file).
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// child runs a child's role and returns its exit status: 0 done, 1 failure.
func child(raw string) int {
	if err := failpoint.Verify(); err != nil {
		fmt.Fprintln(os.Stderr, "servetest child:", err)
		return 1
	}
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "servetest child: bad config:", err)
		return 1
	}
	var err error
	switch cfg.Role {
	case roleServe:
		err = runServe(cfg)
	case roleWriter:
		err = runWriter(cfg)
	default:
		err = fmt.Errorf("unknown role %q", cfg.Role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "servetest child %s: %v\n", cfg.Name, err)
		return 1
	}
	return 0
}

// dbOptions are the engine options every DB of these tests uses (as the CLI opens it:
// recovery sidecars for merges and index builds, recovery before the first write).
func dbOptions(s store.Store, prefix string) engine.Options {
	return engine.Options{CatalogPrefix: prefix, BeforeFirstWrite: recovery.Hook(recovery.Options{}),
		IndexSidecars: recovery.IndexSidecars{Store: s}, MergeSidecars: recovery.MergeSidecars{Store: s}}
}

// openChild opens the parent's store and etcd (enginetest.ChildEnv) under prefix.
func openChild(ctx context.Context, prefix string) (*engine.DB, func(), error) {
	s, err := store.Open(ctx, os.Getenv(enginetest.EnvStore), store.Options{})
	if err != nil {
		return nil, nil, err
	}
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: strings.Split(os.Getenv(enginetest.EnvEtcd), ",")})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	opts := dbOptions(s, prefix)
	opts.Etcd = cli.Etcd()
	db, err := engine.Open(ctx, s, opts)
	if err != nil {
		cli.Close()
		s.Close()
		return nil, nil, err
	}
	return db, func() { cli.Close(); s.Close() }, nil
}

// schema of the test tables: a unique id and the name of the child that appended it.
var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "who", Type: arrow.BinaryTypes.String},
}, nil)

// batch returns rows with ids [from, from+n).
func batch(from int64, n int, who string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range int64(n) {
		b.Field(0).(*array.Int64Builder).Append(from + i)
		b.Field(1).(*array.StringBuilder).Append(who)
	}
	return b.NewRecordBatch()
}

// childProc is a started child.
type childProc struct {
	cfg  childConfig
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
	err  error

	mu    sync.Mutex
	ended time.Time // when the parent saw it end
}

// start starts a child with cfg and its failpoint spec ("" = none).
func start(t *testing.T, s store.Store, cfg childConfig, failpoints string) *childProc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envChild+"="+string(raw)), enginetest.ChildEnv(s)...)
	if failpoints != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+failpoints)
	}
	p := &childProc{cfg: cfg, cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		p.mu.Lock()
		p.ended = time.Now()
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *childProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *childProc) endedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

func (p *childProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.cfg.Name, err)
	}
}

// kill SIGKILLs the child and waits for it to end.
func (p *childProc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	p.wait(t, 30*time.Second)
}

// exit is how a child ended.
type exit struct {
	Killed bool // by SIGKILL
	Code   int  // exit status otherwise
}

// wait waits (at most d) for the child to end.
func (p *childProc) wait(t *testing.T, d time.Duration) exit {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("child %s did not end within %s:\n%s", p.cfg.Name, d, p.out)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return exit{}
	case errors.As(p.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exit{Killed: ws.Signal() == syscall.SIGKILL, Code: -1}
		}
		return exit{Code: ee.ExitCode()}
	}
	t.Fatalf("child %s: %v\n%s", p.cfg.Name, p.err, p.out)
	return exit{}
}

// waitOK waits for the child to exit with status 0.
func (p *childProc) waitOK(t *testing.T, d time.Duration) {
	t.Helper()
	if e := p.wait(t, d); e.Killed || e.Code != 0 {
		t.Fatalf("child %s ended %+v:\n%s", p.cfg.Name, e, p.out)
	}
}

// seed is SHALE_SEED or a fresh one, printed so a run can be replayed.
func seed(t *testing.T) int64 {
	t.Helper()
	if v := os.Getenv("SHALE_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("SHALE_SEED=%q: %v", v, err)
		}
		t.Logf("seed %d (SHALE_SEED)", n)
		return n
	}
	n := time.Now().UnixNano() % 1_000_000_007
	t.Logf("seed %d (replay with SHALE_SEED=%d)", n, n)
	return n
}

func slow() bool { return os.Getenv("SHALE_SLOW") == "1" }

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }

// readLines returns the complete lines of a file (a torn last line is left out).
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out, sc.Err()
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
