package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

// The tests run the real binary as a subprocess, built once here. Most tests share one
// state directory (one background etcd, one store) and use their own table names; tests
// that need a fresh state directory stop its etcd server before it is removed.
var (
	shaleBin   string
	sharedHome string
)

func TestMain(m *testing.M) {
	coord.ServeIfRequested()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "shale-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shaleBin = filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-o", shaleBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	sharedHome = filepath.Join(dir, "home")
	code := m.Run()
	if err := stopServer(sharedHome); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

// stopServer stops the background etcd server of a state directory (a process this test
// binary caused to start, identified by the pid in its endpoint file) and waits for it to
// remove its endpoint file.
func stopServer(home string) error {
	epFile := filepath.Join(home, "etcd", "endpoint")
	b, err := os.ReadFile(epFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var ep struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &ep); err != nil || ep.PID <= 0 {
		return fmt.Errorf("endpoint file %s: %q", epFile, b)
	}
	if err := syscall.Kill(ep.PID, syscall.SIGTERM); err != nil {
		return nil // already gone
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(ep.PID, 0) != nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("etcd server pid %d of %s did not stop within 20 s", ep.PID, home)
}

// env runs shale commands against one state directory.
type env struct {
	t    *testing.T
	home string
	dir  string // working directory for input files
}

// sharedEnv uses the package's shared state directory.
func sharedEnv(t *testing.T) *env {
	return &env{t: t, home: sharedHome, dir: t.TempDir()}
}

// freshEnv uses a new state directory whose etcd server is stopped at cleanup.
func freshEnv(t *testing.T) *env {
	home := t.TempDir()
	t.Cleanup(func() {
		if err := stopServer(home); err != nil {
			t.Error(err)
		}
	})
	return &env{t: t, home: home, dir: t.TempDir()}
}

var tableSeq atomic.Int64

// table returns a table name unique in the shared store.
func (e *env) table(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), tableSeq.Add(1))
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run executes the binary with args and returns its output and exit status.
func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.runEnv(nil, args...)
}

// runEnv is run with extra environment entries (SHALE_FAILPOINTS, say).
func (e *env) runEnv(extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, shaleBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s"), extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		e.t.Fatalf("run shale %q: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// ok runs a command that must succeed and returns its stdout.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("shale %q: %v", args, r)
	}
	return r.stdout
}

// fails runs a command that must exit with code and print one error line naming every
// string of want.
func (e *env) fails(code int, want []string, args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != code {
		e.t.Fatalf("shale %q: want exit %d, got %v", args, code, r)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "shale: error: ") {
		e.t.Fatalf("shale %q: want one error line on stderr, got %q", args, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			e.t.Fatalf("shale %q: stderr %q does not mention %q", args, r.stderr, w)
		}
	}
	return r
}

// file writes a file in the env's working directory and returns its path.
func (e *env) file(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// manifests counts a table's manifest objects in the default local store.
func (e *env) manifests(table string) int {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.home, "store", table, "_versions"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ent := range ents {
		if strings.HasSuffix(ent.Name(), ".manifest") {
			n++
		}
	}
	return n
}

// versions returns the versions `shale versions --json` lists.
func (e *env) versions(table string) []versionJSON {
	e.t.Helper()
	var out versionsJSON
	if err := json.Unmarshal([]byte(e.ok("versions", table, "--json")), &out); err != nil {
		e.t.Fatal(err)
	}
	if out.Table != table || out.Versions == nil {
		e.t.Fatalf("versions --json: %+v", out)
	}
	return out.Versions
}

// jsonLines parses JSON Lines output.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// repoFile is a path under the repository root (two levels up from this package).
func repoFile(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

// engineDB opens the env's store and etcd through the library, as a program linking Shale
// would, for states no command makes (a table with a type the CLI cannot create, a
// multi-table transaction); everything it opened is closed when the test ends.
func (e *env) engineDB(ctx context.Context) *engine.DB {
	e.t.Helper()
	c, err := coord.Connect(ctx, coord.Config{StateDir: e.home})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	s, err := store.Open(ctx, (&url.URL{Scheme: "file", Path: filepath.Join(e.home, "store")}).String(), store.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	db, err := engine.Open(ctx, s, engine.Options{Etcd: c.Etcd()})
	if err != nil {
		e.t.Fatal(err)
	}
	return db
}
