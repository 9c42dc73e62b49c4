package waltest

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
const envChild = "SHALE_WALTEST_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envChild); cfg != "" {
		os.Exit(child(cfg))
	}
	enginetest.Main(m)
}

// Roles of child processes.
const (
	roleWriter = "writer" // appends batches through one shard, journaling each
	roleReplay = "replay" // opens a shard (claim, fence, replay), flushes, closes
	roleMerger = "merger" // merges the table's WAL, once or in a loop
)

// exitFenced is a writer's exit status when its shard was claimed by another writer
// (wal.ErrFenced) and it was not told to claim it back.
const exitFenced = 3

// childConfig is what a child is told.
type childConfig struct {
	Role  string `json:"role"`
	Name  string `json:"name"` // names its journal: <dir>/<name>.journal
	Dir   string `json:"dir"`  // journals and the stop file
	Table string `json:"table"`
	Shard int    `json:"shard"`
	// Writer: batches of Rows rows with ids From, From+1, … appended from Goroutines
	// goroutines; Batches 0 appends until the stop file appears; FlushEvery k flushes
	// after every k-th acknowledged batch (0: never); Pace sleeps between a goroutine's
	// appends; Abandon exits without closing the writer (its memtable unflushed, as a
	// killed process leaves it); Reclaim claims the shard again when fenced (at most
	// MaxClaims claims in all, then it stops).
	From       int64         `json:"from,omitempty"`
	Rows       int           `json:"rows,omitempty"`
	Batches    int           `json:"batches,omitempty"`
	Goroutines int           `json:"goroutines,omitempty"`
	FlushEvery int           `json:"flush_every,omitempty"`
	Pace       time.Duration `json:"pace,omitempty"`
	Abandon    bool          `json:"abandon,omitempty"`
	Reclaim    bool          `json:"reclaim,omitempty"`
	MaxClaims  int           `json:"max_claims,omitempty"`
	// Merger: Loop merges until the stop file appears (else once), Pace between merges.
	Loop bool `json:"loop,omitempty"`
}

func stopFile(dir string) string { return filepath.Join(dir, "stop") }

func stopped(dir string) bool {
	_, err := os.Stat(stopFile(dir))
	return err == nil
}

// child runs a child's role and returns its exit status: 0 done, exitFenced, 1 failure.
func child(raw string) int {
	if err := failpoint.Verify(); err != nil {
		fmt.Fprintln(os.Stderr, "waltest child:", err)
		return 1
	}
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "waltest child: bad config:", err)
		return 1
	}
	code, err := runChild(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "waltest child %s: %v\n", cfg.Name, err)
		return 1
	}
	return code
}

func runChild(cfg childConfig) (int, error) {
	ctx := context.Background()
	db, closeDB, err := openChild(ctx)
	if err != nil {
		return 1, err
	}
	defer closeDB()
	j, err := openJournal(cfg.Dir, cfg.Name)
	if err != nil {
		return 1, err
	}
	defer j.close()
	switch cfg.Role {
	case roleWriter:
		return runWriter(ctx, db, j, cfg)
	case roleReplay:
		return 0, runReplay(ctx, db, j, cfg)
	case roleMerger:
		return 0, runMerger(ctx, db, j, cfg)
	}
	return 1, fmt.Errorf("unknown role %q", cfg.Role)
}

// openChild opens the parent's store and etcd (enginetest.ChildEnv) as a DB whose WAL
// merges keep recovery sidecars (as the CLI's do).
func openChild(ctx context.Context) (*engine.DB, func(), error) {
	s, err := store.Open(ctx, os.Getenv(enginetest.EnvStore), store.Options{})
	if err != nil {
		return nil, nil, err
	}
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: strings.Split(os.Getenv(enginetest.EnvEtcd), ",")})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	db, err := engine.Open(ctx, s, engine.Options{Etcd: cli.Etcd(), MergeSidecars: recovery.MergeSidecars{Store: s}})
	if err != nil {
		cli.Close()
		s.Close()
		return nil, nil, err
	}
	return db, func() { cli.Close(); s.Close() }, nil
}

// schema of the test tables: a unique id and the name of the writer that appended it.
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
}

// start starts a child with cfg, its failpoint spec ("" = none) and env.
func start(t *testing.T, s store.Store, cfg childConfig, failpoints string, env ...string) *childProc {
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
	cmd.Env = append(cmd.Env, env...)
	p := &childProc{cfg: cfg, cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
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

// run starts a child, waits for it and returns how it ended.
func run(t *testing.T, s store.Store, cfg childConfig, failpoints string) (exit, string) {
	t.Helper()
	p := start(t, s, cfg, failpoints)
	e := p.wait(t, 2*time.Minute)
	return e, p.out.String()
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

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }
