package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// endpointPID is the pid the state directory's endpoint file names (0: none).
func (e *env) endpointPID() int {
	b, err := os.ReadFile(filepath.Join(e.home, "etcd", "endpoint"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var ep struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &ep); err != nil {
		e.t.Fatal(err)
	}
	return ep.PID
}

// TestEtcdKilledDuringCommandReconnects: the embedded etcd server this test started is
// killed (SIGKILL, by the pid in <home>/etcd/endpoint) while an import waits between its
// commit and its publish. The import says on stderr that the server exited and that it
// starts a new one, reconnects to it through the endpoint file, and publishes: it
// succeeds within seconds instead of hanging about 40 s and failing.
func TestEtcdKilledDuringCommandReconnects(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("etcdkill")
	e.ok("create", tbl, "--schema", "a:int64")
	release := filepath.Join(e.dir, "release")
	cmd := exec.Command(shaleBin, "import", e.file("a.csv", "a\n1\n2\n"), "--table", tbl)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s", "SHALE_FAILPOINTS=engine.before_publish=block("+release+")")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	finished := false
	defer func() {
		if !finished {
			cmd.Process.Kill()
			<-done
		}
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; import stderr:\n%s", what, errb.String())
			}
			time.Sleep(20 * time.Millisecond) // polling the state directory
		}
	}
	waitUntil("the import's commit", func() bool { return e.manifests(tbl) == 2 })
	old := e.endpointPID()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitUntil("a new etcd server", func() bool { p := e.endpointPID(); return p != 0 && p != old })
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		finished = true
		if err != nil {
			t.Fatalf("import: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("import still running 30 s after the release; stderr:\n%s", errb.String())
	}
	t.Logf("import finished %s after the kill; stderr:\n%s", time.Since(killed).Round(time.Millisecond), errb.String())
	for _, w := range []string{"the background etcd server of " + e.home, "has exited; starting a new one", "reconnected to the new etcd server"} {
		if !strings.Contains(errb.String(), w) {
			t.Fatalf("stderr lacks %q:\n%s", w, errb.String())
		}
	}
	// The wait for the dead server ended with "reconnected": no stale "no connection"
	// notice about it follows.
	s := errb.String()
	if after := s[strings.Index(s, "reconnected to the new etcd server"):]; strings.Contains(after, "no connection for") {
		t.Fatalf("a stale notice follows the reconnection:\n%s", s)
	}
	if !strings.Contains(out.String(), "Appended 2 rows to "+tbl) {
		t.Fatalf("stdout: %s", out.String())
	}
	if row, _ := e.statusOf(tbl); row.Published != 2 || row.State != "in sync" {
		t.Fatalf("status after the import: %+v", row)
	}
}

// lockedBuffer is a bytes.Buffer a child process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEtcdStoppedSaysItWaitsForTheRunningServerToAnswer: while the state directory's
// etcd server is stopped (SIGSTOP: alive, not answering), a command says that it waits
// for that running server (its pid) to answer, not for a server "to start", starts no
// second server on the same data, and succeeds once the server is continued (SIGCONT).
func TestEtcdStoppedSaysItWaitsForTheRunningServerToAnswer(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("etcdstop")
	e.ok("create", tbl, "--schema", "a:int64")
	pid := e.endpointPID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	defer func() {
		if !continued {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	cmd := exec.Command(shaleBin, "versions", tbl)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s")
	var out bytes.Buffer
	var errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	const want = "to answer: it is running but has not answered for"
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(errb.String(), want) {
		select {
		case err := <-done:
			t.Fatalf("versions ended while etcd was stopped: %v\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("no message about the stopped server within a minute:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the command's stderr
	}
	if s := errb.String(); !strings.Contains(s, fmt.Sprintf("(pid %d, http://127.0.0.1:", pid)) || strings.Contains(s, "to start") {
		t.Fatalf("message: %s", s)
	}
	if p := e.endpointPID(); p != pid {
		t.Fatalf("a second server (pid %d) was started on the stopped one's data", p)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "create") {
			t.Fatalf("versions after SIGCONT: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("versions did not finish within a minute of SIGCONT:\n%s", errb.String())
	}
}

// TestEtcdStoppedMidCommandSaysWhatRequestItWaitsFor: the state directory's etcd server
// is stopped (SIGSTOP: its connections stay open, it answers nothing) between an
// import's commit and its publish. Once the publish has gone on for SHALE_STORE_SLOW
// without an answer, the import says on stderr, once, that it waits for that etcd
// transaction and for which server; continued (SIGCONT), the import publishes and
// succeeds as it would have.
func TestEtcdStoppedMidCommandSaysWhatRequestItWaitsFor(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("etcdslow")
	e.ok("create", tbl, "--schema", "a:int64")
	release := filepath.Join(e.dir, "release")
	cmd := exec.Command(shaleBin, "import", e.file("a.csv", "a\n1\n2\n"), "--table", tbl)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s", "SHALE_STORE_SLOW=1s",
		"SHALE_FAILPOINTS=engine.before_publish=block("+release+")")
	var out bytes.Buffer
	var errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	finished := false
	defer func() {
		if !finished {
			cmd.Process.Kill()
			<-done
		}
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			select {
			case err := <-done:
				finished = true
				t.Fatalf("import ended while waiting for %s: %v\nstderr:\n%s", what, err, errb.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; import stderr:\n%s", what, errb.String())
			}
			time.Sleep(20 * time.Millisecond) // polling the state directory and the import's stderr
		}
	}
	waitUntil("the import's commit", func() bool { return e.manifests(tbl) == 2 })
	pid := e.endpointPID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	defer func() {
		if !continued {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil("a notice about the publish", func() bool { return strings.Contains(errb.String(), "no answer after") })
	// Let the wait go on a few more periods: the notice is said once per wait.
	time.Sleep(3 * time.Second) // the behaviour under test is what is NOT printed meanwhile
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	select {
	case err := <-done:
		finished = true
		if err != nil {
			t.Fatalf("import after SIGCONT: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("import still running a minute after SIGCONT; stderr:\n%s", errb.String())
	}
	s := errb.String()
	t.Logf("stderr:\n%s", s)
	want := fmt.Sprintf("shale: etcd: waiting for transaction on %q", "")
	want = want[:len(want)-2] // the key follows
	if !strings.Contains(s, want) || !strings.Contains(s, fmt.Sprintf("(the background etcd server of %s, pid %d, http://127.0.0.1:", e.home, pid)) ||
		!strings.Contains(s, "Ctrl-C stops)") {
		t.Fatalf("stderr does not say which etcd request waits for which server:\n%s", s)
	}
	if n := strings.Count(s, "no answer after"); n != 1 {
		t.Fatalf("%d notices for one wait:\n%s", n, s)
	}
	if !strings.Contains(out.String(), "Appended 2 rows to "+tbl) {
		t.Fatalf("stdout: %s", out.String())
	}
	if row, _ := e.statusOf(tbl); row.Published != 2 || row.State != "in sync" {
		t.Fatalf("status after the import: %+v", row)
	}
}
