package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"

	// The README example's imports. Linking them into this test binary makes `go test`
	// compile them, with this binary's flags, before the test runs, so the example's own
	// build finds them in the build cache instead of compiling them a second time.
	_ "github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/shale-db/shale/engine"
	_ "github.com/shale-db/shale/manifest"
	_ "github.com/shale-db/shale/store"
)

// readmeExample returns the first ```go block of README.md's "## As a library" section.
func readmeExample(t *testing.T, root string) []byte {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## As a library\n")
	if !ok {
		t.Fatal(`README.md has no "## As a library" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, code, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatal(`README.md's "As a library" section has no ` + "```go" + ` block`)
	}
	code, _, ok = strings.Cut(code, "\n```\n")
	if !ok {
		t.Fatal("README.md's library example block is not closed")
	}
	return []byte(code + "\n")
}

// goDirective is the main module's go line ("go 1.26.8"), so the example module asks for
// the same language version and never for another toolchain.
func goDirective(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go [0-9.]+$`).Find(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m)
}

// checkoutRequirements returns a require block with every module the checkout's go.mod
// requires, at the same versions, marked indirect: what `go get github.com/shale-db/shale`
// followed by `go mod tidy` writes into a program's go.mod. With it the example's module
// graph is complete, so the go command builds it from the modules this checkout's own
// build needs and never loads the go.mod of every module in the full (unpruned) graph,
// which a module cache filled by building (rather than by `go mod download`) does not hold
// and GOPROXY=off cannot fetch.
func checkoutRequirements(t *testing.T, goBin, root string) string {
	t.Helper()
	cmd := exec.Command(goBin, "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json in %s: %v", root, err)
	}
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("go mod edit -json: %v\n%s", err, out)
	}
	if len(mod.Require) == 0 {
		t.Fatalf("go mod edit -json: the checkout's go.mod requires nothing:\n%s", out)
	}
	var b strings.Builder
	b.WriteString("require (\n")
	for _, r := range mod.Require {
		fmt.Fprintf(&b, "\t%s %s // indirect\n", r.Path, r.Version)
	}
	b.WriteString(")\n\n")
	return b.String()
}

// TestREADMELibraryExample builds README.md's library example as a program of another
// module (example.com/app, requiring this one at v0.0.0 through a replace directive that
// points at this checkout), so it can only use what a program outside the module can
// import, and runs it twice against an etcd this test starts in-process and a file://
// store in a temporary directory (issue 9, item 1). The first run commits; the second
// commits nothing (its idempotency keys) and sees the same rows.
//
// It needs no network: the build runs with GOPROXY=off and GOFLAGS=-mod=mod, taking every
// module from the module cache (building or testing this module fills it) and the sums
// from this module's go.sum; the example's go.mod lists this module's requirements
// (checkoutRequirements), as `go mod tidy` would, so no other module is needed. Should a
// go.mod still be missing there, it builds again through the proxy the environment
// configures. It is built with -race when this test is, and this test binary
// links the packages the example imports, so the build reuses them from the build cache
// and takes a few seconds (linking); only a cold cache makes it compile the dependencies.
func TestREADMELibraryExample(t *testing.T) {
	root := moduleRoot(t)
	code := readmeExample(t, root)
	if formatted, err := format.Source(code); err != nil {
		t.Fatalf("README library example does not parse: %v\n%s", err, code)
	} else if !bytes.Equal(formatted, code) {
		t.Errorf("README library example is not gofmt-formatted; gofmt gives:\n%s", formatted)
	}
	if !bytes.HasPrefix(code, []byte("// ")) || !bytes.Contains(code, []byte("\npackage main\n")) {
		t.Fatalf("README library example is not a documented main package:\n%s", code)
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the README example: %v", err)
	}
	dir := t.TempDir()
	gomod := "module example.com/app\n\n" + goDirective(t, root) + "\n\n" +
		"require github.com/shale-db/shale v0.0.0\n\n" +
		checkoutRequirements(t, goBin, root) +
		"replace github.com/shale-db/shale => " + root + "\n"
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sums, "main.go": code} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	env := []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local"}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOWORK", "GOTOOLCHAIN", "APP_STORE", "APP_ETCD", "APP_STATE":
		default:
			env = append(env, kv)
		}
	}
	app := filepath.Join(dir, "app")
	args := []string{"build", "-o", app}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := goCommand(ctx, goBin, dir, env, args).CombinedOutput()
	if err != nil && bytes.Contains(out, []byte("module lookup disabled by GOPROXY=off")) {
		// The separate module's graph can name a go.mod this module's own build never
		// needed (module graph pruning differs when shale is not the main module), so
		// `go mod download` of this module did not fetch it: fetch it through the proxy
		// the environment configures (CI has one; a machine with no network fails here).
		t.Logf("the module cache lacks a go.mod the separate module needs; building through GOPROXY=%s", goEnv(t, goBin, "GOPROXY"))
		online := append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "GOPROXY=") }),
			"GOPROXY="+goEnv(t, goBin, "GOPROXY"))
		out, err = goCommand(ctx, goBin, dir, online, args).CombinedOutput()
	}
	if err != nil {
		t.Fatalf("go %s in a separate module: %v\n%s\ngo.mod:\n%s", strings.Join(args, " "), err, out, gomod)
	}
	t.Logf("built the README example in %v", time.Since(start).Round(time.Millisecond))

	etcd, err := coord.StartEmbedded(filepath.Join(t.TempDir(), "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	runEnv := append(env[:len(env):len(env)],
		"APP_STORE=file://"+filepath.Join(t.TempDir(), "store"),
		"APP_ETCD="+strings.Join(etcd.Endpoints(), ","),
		"APP_STATE="+filepath.Join(dir, "unused-state"))
	runApp := func(run int) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, app)
		cmd.Dir, cmd.Env = dir, runEnv
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("run %d of the README example: %v\nstdout:\n%s\nstderr:\n%s", run, err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}

	first := runApp(1)
	for _, want := range []string{
		"delivery: version 2, rows: 3\n",
		"sale: version 3, rows: 1\n",
		"order 1: committed\n",
		"in stock: apple 9\n",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("first run: output lacks %q:\n%s", want, first)
		}
	}
	second := runApp(2)
	for _, want := range []string{
		"delivery: committed earlier, as version 2\n",
		"sale: committed earlier, as version 3\norder 1: committed by an earlier run\n",
		"in stock: apple 9\n",
	} {
		if !strings.Contains(second, want) {
			t.Errorf("second run: output lacks %q:\n%s", want, second)
		}
	}
	for i, out := range []string{first, second} {
		if n := strings.Count(out, "in stock:"); n != 1 {
			t.Errorf("run %d: %d rows in stock, want 1 (apple; pear has none, the figs were ordered):\n%s", i+1, n, out)
		}
	}
}

// goCommand is the go command run in dir with env.
func goCommand(ctx context.Context, goBin, dir string, env, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// goEnv is `go env name` in this test's environment (the proxy a fallback build uses).
func goEnv(t *testing.T, goBin, name string) string {
	t.Helper()
	out, err := exec.Command(goBin, "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
