package servetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// storedConfig is the serve config in etcd under db's catalog ("" none).
func storedConfig(t *testing.T, db *engine.DB) string {
	t.Helper()
	st := serve.StateOf(db)
	resp, err := st.Client().Get(context.Background(), st.Keys().Config())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// TestBadInput: unknown tables, bad options and config values, a second planner with
// another config, through serve.New/Start/Explain and through the CLI: typed errors that
// name what is wrong, and nothing changed in etcd.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	createTable(t, e, "w", 1, false)
	l := &ledger{attempted: map[int64]bool{}, acked: map[int64]bool{}}
	l.add(-1, 1)
	cfg := serveConfig(e.serveChild("b1", nil))
	opts := func(id string) serve.Options {
		return serve.Options{ID: id, Config: cfg, Logger: quietLog(), Recovery: plan0Recovery()}
	}

	// An unknown table: typed (three ways), named.
	_, err := serve.Explain(ctx, e.db, "nope")
	if !errors.Is(err, serve.ErrTableNotFound) || !errors.Is(err, plan.ErrUnknownTable) || !errors.Is(err, manifest.ErrTableNotFound) ||
		!strings.Contains(err.Error(), "nope") {
		t.Fatalf("Explain(nope): %v", err)
	}

	// Bad options: refused by New, naming the value.
	for _, c := range []struct {
		name string
		mod  func(*serve.Options)
		want string
	}{
		{"unknown kind", func(o *serve.Options) { o.Slots = map[plan.Kind]int{"bogus": 1} }, "bogus"},
		{"negative slots", func(o *serve.Options) { o.Slots = map[plan.Kind]int{plan.KindMergeWAL: -1} }, "-1"},
		{"id with a slash", func(o *serve.Options) { o.ID = "a/b" }, "a/b"},
	} {
		o := opts("bad")
		c.mod(&o)
		if _, err := serve.New(ctx, e.db, o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	// A config that cannot run: refused before anything is stored.
	o := opts("short-lease")
	o.Config.LeaseTTL = time.Second
	if s, err := serve.New(ctx, e.db, o); err == nil {
		if err := s.Start(ctx); err == nil || !strings.Contains(strings.ToLower(err.Error()), "lease") {
			s.Close(ctx)
			t.Errorf("a 1 s lease TTL: Start: %v, want an error naming the lease", err)
		}
	} else if !strings.Contains(strings.ToLower(err.Error()), "lease") {
		t.Errorf("a 1 s lease TTL: New: %v, want an error naming the lease", err)
	}
	if c := storedConfig(t, e.db); c != "" {
		t.Fatalf("a refused config was stored: %s", c)
	}

	// The first planner stores its config; a second with another one is refused, naming
	// the setting and both values, and changes nothing.
	a, err := serve.New(ctx, e.db, opts("b1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	waitFor(t, 30*time.Second, "b1 to lead", a.IsLeader)
	stored := storedConfig(t, e.db)
	o = opts("b2")
	o.Config.PassInterval = 3 * runPass
	b, err := serve.New(ctx, e.db, o)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(ctx)
	if !errors.Is(err, state.ErrConfigMismatch) || !strings.Contains(err.Error(), "pass_interval") ||
		!strings.Contains(err.Error(), "200") || !strings.Contains(err.Error(), "600") {
		b.Close(ctx)
		t.Fatalf("a second planner with another pass interval: %v", err)
	}
	if got := storedConfig(t, e.db); got != stored {
		t.Fatalf("the stored config changed: %s, was %s", got, stored)
	}
	// A one-shot pass beside a running planner is refused too.
	if _, err := func() (serve.OnceResult, error) {
		s, err := serve.New(ctx, e.db, opts("b3"))
		if err != nil {
			return serve.OnceResult{}, err
		}
		return s.Once(ctx)
	}(); !errors.Is(err, serve.ErrLeaderRunning) || !strings.Contains(err.Error(), "b1") {
		t.Fatalf("Once beside a running planner: %v", err)
	}
	status, err := a.Status(ctx)
	if err != nil || status.Leader != "b1" || len(status.Executors) != 1 {
		t.Fatalf("after the refusals: status %+v, %v", status, err)
	}
	// Nothing corrupted: the first planner still works.
	appendGens(t, e.db, "w", 0, 4, 2, l)
	waitFor(t, 30*time.Second, "w merged", func() bool { return mergedWatermark(t, e.db, "w") == 2 })
	checkOnce(t, e.db, "w", l)
	checkVerify(t, e.db, "w")

	t.Run("CLI", func(t *testing.T) { testBadInputCLI(t) })
}

// testBadInputCLI runs the shale binary (built here) with bad input: `shale why` of an
// unknown table, bad serve flags and config file values, a second planner with another
// config while one runs (the CLI's catalog prefix is the default one).
func testBadInputCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shale binary")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-o", bin, "github.com/shale-db/shale/cmd/shale")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	e := &env{dir: t.TempDir()}
	e.s = storeLocal(t)
	e.db = enginetest.OpenDB(t, e.s, dbOptions(e.s, ""))
	createTable(t, e, "w", 1, false)
	endpoints := strings.Join(enginetest.Etcd().Endpoints(), ",")
	shale := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--store", e.s.URL(), "--etcd", endpoints}, args...)...)
		cmd.Env = append(os.Environ(), "SHALE_HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}

	// `shale why` of an unknown table: status 1, the table named; with --json the error
	// object of docs/json.md.
	code, _, stderr := shale("why", "nope")
	if code != 1 || !strings.Contains(stderr, "nope") || !strings.Contains(stderr, "not found") {
		t.Errorf("why nope: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = shale("--json", "why", "nope")
	var jerr struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
			Exit    int    `json:"exit"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(stderr), &jerr); code != 1 || err != nil || jerr.Error.Exit != 1 || !strings.Contains(jerr.Error.Message, "nope") {
		t.Errorf("--json why nope: exit %d, stderr %q (%v)", code, stderr, err)
	}
	code, stdout, stderr := shale("why", "w")
	if code != 0 || !strings.Contains(stdout, "w:") {
		t.Errorf("why w: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// Bad flags and config file values: usage errors (status 2) naming the flag.
	badFile := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badFile, []byte(`{"lease_ttl": "soon"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownFile := filepath.Join(dir, "unknown.json")
	if err := os.WriteFile(unknownFile, []byte(`{"pass_intervall": "1s"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--once", "--lease-ttl", "1s"}, "lease"},
		{[]string{"serve", "--once", "--slots", "bogus=1"}, "bogus"},
		{[]string{"serve", "--once", "--slots", "merge_wal=-2"}, "merge_wal"},
		{[]string{"serve", "--once", "--memory", "lots"}, "memory"},
		{[]string{"serve", "--once", "--pass-interval", "fast"}, "pass-interval"},
		{[]string{"serve", "--once", "--config", badFile}, "lease_ttl"},
		{[]string{"serve", "--once", "--config", unknownFile}, "pass_intervall"},
		{[]string{"serve", "--once", "--config", filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{"why"}, "arg"},
	} {
		code, _, stderr := shale(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("shale %s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}
	if c := storedConfig(t, e.db); c != "" {
		t.Fatalf("bad input stored a config: %s", c)
	}

	// A second planner with another config while one runs: refused, naming the setting;
	// the stored config unchanged.
	a, err := serve.New(ctx, e.db, serve.Options{ID: "cli-a", Config: serveConfig(e.serveChild("cli-a", nil)), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	stored := storedConfig(t, e.db)
	code, _, stderr = shale("serve", "--once", "--pass-interval", "3s", "--lease-ttl", "2s")
	if code == 0 || !strings.Contains(stderr, "pass_interval") {
		t.Errorf("a second planner with another config: exit %d, stderr %q", code, stderr)
	}
	if got := storedConfig(t, e.db); got != stored {
		t.Fatalf("the stored config changed: %s, was %s", got, stored)
	}
	if !a.IsLeader() {
		t.Fatal("the running planner lost its leadership")
	}
}
