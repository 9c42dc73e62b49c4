package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
)

// Tests for what a new user trying the README on a clean clone tripped on (issue 9's
// acceptance: none of the defects it lists recurs), each named after the behaviour.

// TestMaintenanceCommandsNeverCreateAMissingStore: the commands that change only tables
// already in a store (delete, update, drop, compact, recover, repair, gc, also their
// --dry-run and preview modes) given a mistyped --store say that it does not exist and
// create nothing, instead of creating it and reporting "No tables" or "No drift" with
// exit status 0; on a fresh state directory they say there is no store yet.
func TestMaintenanceCommandsNeverCreateAMissingStore(t *testing.T) {
	e := sharedEnv(t)
	root := t.TempDir()
	missing := filepath.Join(root, "typo", "store")
	cmds := [][]string{
		{"gc"}, {"gc", "--dry-run"}, {"gc", "t", "--dry-run"}, {"recover"}, {"recover", "t"},
		{"repair"}, {"repair", "t", "--confirm"}, {"compact", "t"}, {"compact", "t", "--dry-run"},
		{"delete", "t", "--where", "a = 1"}, {"update", "t", "--set", "a=1", "--where", "true"}, {"drop", "t"},
		{"index", "create", "t", "--column", "a"}, {"index", "update", "t", "i"}, {"index", "drop", "t", "i"},
		{"wal", "merge", "t"}, {"wal", "scan", "t"},
	}
	for _, args := range cmds {
		a := append(append([]string{}, args...), "--store", "file://"+missing)
		e.fails(1, []string{"store file://" + missing + " does not exist", "nothing was created"}, a...)
	}
	if got := tree(t, root); len(got) != 0 {
		t.Fatalf("maintenance commands created %v under %s", got, root)
	}

	f := freshEnv(t)
	for _, args := range [][]string{{"gc"}, {"recover"}, {"repair"}} {
		f.fails(1, []string{"no store yet at file://" + filepath.Join(f.home, "store")}, args...)
	}
	if _, err := os.Stat(filepath.Join(f.home, "store")); !os.IsNotExist(err) {
		t.Fatalf("a maintenance command created the default store: %v", err)
	}
}

// TestEmptyGlobalFlagsAreUsageErrors: --store "", --home "" and --etcd "" (an unset shell
// variable, say) are usage errors, as --table "" is, instead of silently meaning the
// default store, state directory or embedded etcd.
func TestEmptyGlobalFlagsAreUsageErrors(t *testing.T) {
	e := sharedEnv(t)
	for _, flag := range []string{"--store", "--home", "--etcd"} {
		for _, args := range [][]string{{"status", flag, ""}, {flag, " ", "query", "t"}, {"import", e.file("x.csv", "a\n1\n"), flag + "="}} {
			e.fails(2, []string{flag + " is empty", "leave " + flag + " out"}, args...)
		}
	}
	if n := e.manifests("x"); n != 0 {
		t.Fatalf("import with an empty global flag created table x (%d manifests)", n)
	}
}

// TestBadFlagValuesAreWordedWithoutStrconvText: a flag value that does not parse is a
// usage error that says what was expected, never strconv's or time's own text.
func TestBadFlagValuesAreWordedWithoutStrconvText(t *testing.T) {
	e := sharedEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"query", "t", "--limit", "abc"}, `invalid argument "abc" for "-n, --limit" flag: not an integer`},
		{[]string{"query", "t", "--version", "-1"}, `invalid argument "-1" for "--version" flag: not a whole number`},
		{[]string{"query", "t", "--limit", "99999999999999999999"}, "flag: out of range"},
		{[]string{"query", "t", "--count=maybe"}, "not true or false"},
		{[]string{"gc", "--grace", "5x"}, `invalid argument "5x" for "--grace" flag: not a duration (like 500ms, 30s, 5m, 1h30m)`},
		{[]string{"gc", "--grace", "5"}, "not a duration"},
		{[]string{"compact", "t", "--deleted-ratio", "lots"}, "not a number"},
	} {
		r := e.fails(2, []string{c.want}, c.args...)
		for _, raw := range []string{"strconv", "Parse", "invalid syntax", "time: "} {
			if strings.Contains(r.stderr, raw) {
				t.Fatalf("shale %q: %q still says %q", c.args, r.stderr, raw)
			}
		}
	}
	// The --grace usage error says durations as they are typed.
	e.fails(2, []string{"--grace 30s is shorter than 1m:"}, "gc", "--grace", "30s")
}

// TestEmptyColumnNameIsAUsageError: --columns with an empty name ("a,,b", "a,") is a usage
// error naming its position, not `unknown column “”` from the table.
func TestEmptyColumnNameIsAUsageError(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("cols")
	e.ok("import", e.file("c.csv", "a,b\n1,x\n"), "--table", tbl)
	e.fails(2, []string{`--columns "a,,b": column 2 of the list is empty`}, "query", tbl, "--columns", "a,,b")
	e.fails(2, []string{`--columns "a,": column 2 of the list is empty`}, "export", tbl, "--format", "csv", "--columns", "a,")
	if out := e.ok("query", tbl, "--columns", " b , a ", "--format", "csv"); out != "b,a\nx,1\n" {
		t.Fatalf("--columns with spaces: %q", out)
	}
}

// TestStatusListsEtcdEndpointsAsText: status prints its etcd endpoints as a list a person
// reads ("etcd:  http://…"), not as a Go slice ("[http://…]").
func TestStatusListsEtcdEndpointsAsText(t *testing.T) {
	e := sharedEnv(t)
	e.ok("create", e.table("st"), "--schema", "a:int64")
	out := e.ok("status")
	if !strings.Contains(out, "\netcd:  http://127.0.0.1:") || strings.Contains(out, "[") {
		t.Fatalf("status: %s", out)
	}
}

func TestFlagDurationAndEndpointList(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 90 * time.Minute: "1h30m", time.Minute: "1m", 30 * time.Second: "30s",
		1500 * time.Millisecond: "1.5s", 2*time.Hour + 5*time.Second: "2h0m5s", 0: "0s",
	} {
		if got := flagDuration(d); got != want {
			t.Errorf("flagDuration(%v) = %q, want %q", d, got, want)
		}
	}
	if got := endpointList([]string{"http://a:1", "http://b:2"}); got != "http://a:1, http://b:2" {
		t.Errorf("endpointList: %q", got)
	}
}

// TestStoreThatNeverAnswersIsSaidAndCtrlCEndsIt: against an S3 endpoint that accepts
// connections and never answers, a command says on stderr what it waits for (the
// request, the key, how long, the store's redacted URL), again while it waits, instead
// of hanging without a word; Ctrl-C ends it with "interrupted".
func TestStoreThatNeverAnswersIsSaidAndCtrlCEndsIt(t *testing.T) {
	e := sharedEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	defer func() {
		l.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	}()
	storeURL := "s3://AKID:" + plantedSecret + "@bkt/p?endpoint=http://" + l.Addr().String() + "&use_path_style=true&region=us-east-1"
	cmd := exec.Command(shaleBin, "query", "t", "--store", storeURL)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s", envStoreSlow+"=200ms")
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	const want = "shale: store: waiting for "
	deadline := time.Now().Add(time.Minute)
	for strings.Count(errb.String(), want) < 2 {
		select {
		case err := <-done:
			t.Fatalf("query of a silent store ended: %v\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("no word about the silent store within a minute:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the command's stderr
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		s := errb.String()
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(s, "shale: error: interrupted: query stopped") ||
			!strings.Contains(s, `no answer after`) || !strings.Contains(s, "s3://REDACTED@bkt/p") || strings.Contains(s, plantedSecret) {
			t.Fatalf("after Ctrl-C: %v\n%s", err, s)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("query did not end within a minute of SIGINT:\n%s", errb.String())
	}
}

// TestUnknownStoreParameterIsAUsageError: a --store URL with a query parameter the store
// does not know is a usage error (exit 2) that names it, like every other malformed
// --store, not a failed command (exit 1).
func TestUnknownStoreParameterIsAUsageError(t *testing.T) {
	e := sharedEnv(t)
	e.fails(2, []string{`--store s3://b?bogus=1&region=us-east-1`, `unknown query parameter "bogus"`}, "status", "--store", "s3://b?region=us-east-1&bogus=1")
	e.fails(2, []string{`invalid value for "use_path_style"`}, "query", "t", "--store", "s3://b?region=us-east-1&use_path_style=nope")
}

// TestStatusOfAMissingBucketSaysSoOnce: status (and query) of an S3 store whose bucket
// does not exist say that the bucket does not exist, naming it once, without the SDK's
// request ids and without repeating the listing it was doing.
func TestStatusOfAMissingBucketSaysSoOnce(t *testing.T) {
	e := sharedEnv(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	missing := strings.Replace(srv.StoreURL, "s3://"+storetest.S3Bucket, "s3://nosuchbkt", 1)
	for _, args := range [][]string{{"status"}, {"query", "t"}, {"status", "--json"}} {
		r := e.run(append(args, "--store", missing)...)
		if r.code != 1 || !strings.Contains(r.stderr, `bucket does not exist: \"nosuchbkt\"`) && !strings.Contains(r.stderr, `bucket does not exist: "nosuchbkt"`) ||
			strings.Contains(r.stderr, "RequestID") || strings.Contains(r.stderr, "object not found") || strings.Count(r.stderr, "_recovery/") > 1 {
			t.Fatalf("shale %q of a missing bucket: %v", args, r)
		}
	}
}

// TestBenchRepsBelowOneIsAUsageError: bench --reps 0 and --reps -3 are usage errors (exit
// 2) instead of silently running the default 5 repetitions (issue 9 item 16 names both).
func TestBenchRepsBelowOneIsAUsageError(t *testing.T) {
	e := sharedEnv(t)
	for _, n := range []string{"0", "-3"} {
		e.fails(2, []string{"--reps must be at least 1, got " + n}, "bench", "--suites", "import", "--reps", n)
	}
}
