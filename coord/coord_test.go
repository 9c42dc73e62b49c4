package coord

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Environment of a re-executed test binary acting as a client process (see runChild).
const (
	envChild     = "COORD_TEST_CHILD" // the child's name
	envChildDir  = "COORD_TEST_STATEDIR"
	envChildPeer = "COORD_TEST_PEER" // the other child's name
)

func TestMain(m *testing.M) {
	ServeIfRequested() // the background etcd server is this binary re-executed
	if name := os.Getenv(envChild); name != "" {
		if err := runChild(name, os.Getenv(envChildPeer), os.Getenv(envChildDir)); err != nil {
			fmt.Fprintln(os.Stderr, "child", name+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testIdle is the background server's idle period in these tests.
const testIdle = 300 * time.Millisecond

// runChild connects to the state directory's shared etcd, writes /test/<name>, waits until
// it sees /test/<peer> (written by the other process), and prints the endpoints it used.
func runChild(name, peer, stateDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Connect(ctx, Config{StateDir: stateDir, ServerIdle: testIdle})
	if err != nil {
		return err
	}
	defer c.Close()
	cli := c.Etcd()
	if _, err := cli.Put(ctx, "/test/"+name, fmt.Sprint(os.Getpid())); err != nil {
		return err
	}
	if err := waitKey(ctx, cli, "/test/"+peer); err != nil {
		return err
	}
	fmt.Printf("ENDPOINTS %s\n", strings.Join(c.Endpoints(), ","))
	return c.Close()
}

// waitKey returns once key exists, watching from the revision of a first read.
func waitKey(ctx context.Context, cli *clientv3.Client, key string) error {
	r, err := cli.Get(ctx, key)
	if err != nil {
		return err
	}
	if len(r.Kvs) > 0 {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range cli.Watch(wctx, key, clientv3.WithRev(r.Header.Revision+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				return nil
			}
		}
	}
	return fmt.Errorf("watch %s: %w", key, context.Cause(ctx))
}

// waitFor polls cond with backoff until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	backoff := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(backoff)
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// serverGone reports that the state directory's background server has exited.
func serverGone(l layout) bool {
	_, err := os.Stat(l.endpointFile)
	return errors.Is(err, os.ErrNotExist) && !serverAlive(l)
}

func TestStartEmbeddedRestart(t *testing.T) {
	e, err := StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	eps := e.Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "http://127.0.0.1:") {
		t.Fatalf("endpoints %v, want one loopback URL", eps)
	}
	c, err := Connect(context.Background(), Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Etcd().Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}

	if err := e.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := e.Endpoints(); got[0] != eps[0] {
		t.Fatalf("endpoint changed across restart: %v -> %v", eps, got)
	}
	// The old client reconnects by itself and the key survived.
	r, err := c.Etcd().Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart got %v, want k=v1", r.Kvs)
	}
}

func TestConnectUnreachableEndpoint(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Connect(context.Background(), Config{
		Endpoints:   []string{fmt.Sprintf("127.0.0.1:%d", port)},
		DialTimeout: 300 * time.Millisecond,
	})
	if !errors.Is(err, ErrConnect) {
		t.Fatalf("Connect to a closed port: %v, want ErrConnect", err)
	}
}

// Two OS processes Connect to a fresh state directory at the same time: both succeed, use
// one server (each reads the key the other wrote), and the server exits once both close.
func TestSharedServerTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLayout(dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b"}
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i, name := range names {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envChild+"="+name, envChildPeer+"="+names[1-i], envChildDir+"="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmds = append(cmds, cmd)
		outs = append(outs, &out)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child %s stderr:\n%s", name, errb.String())
			}
		})
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var endpoints []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %s: %v", names[i], err)
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "ENDPOINTS "); ok {
				endpoints = append(endpoints, s)
			}
		}
	}
	if len(endpoints) != 2 || endpoints[0] != endpoints[1] {
		t.Fatalf("children used endpoints %q, want the same server", endpoints)
	}
	// Both clients closed: the server exits after testIdle and removes its endpoint file.
	waitFor(t, "background server exit", 30*time.Second, func() bool { return serverGone(l) })
	if log, _ := os.ReadFile(l.logFile); len(log) != 0 {
		t.Fatalf("background server printed:\n%s", log)
	}
}

// A connected client keeps the background server alive past its idle period; after Close
// the server exits, and a later Connect restarts it on the same data.
func TestSharedServerIdleAndRestart(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLayout(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A stale endpoint file (dead port) must not confuse Connect.
	port, _ := freePort()
	if err := l.mkdir(); err != nil {
		t.Fatal(err)
	}
	if err := writeEndpoint(l, []string{fmt.Sprintf("http://127.0.0.1:%d", port)}); err != nil {
		t.Fatal(err)
	}

	c, err := Connect(ctx, Config{StateDir: dir, ServerIdle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := readEndpoint(l)
	if !ok || info.PID == os.Getpid() {
		t.Fatalf("endpoint file %+v (ok=%v): want a separate server process", info, ok)
	}
	if _, err := c.Etcd().Put(ctx, "k", "kept"); err != nil {
		t.Fatal(err)
	}
	// Asserting that something does NOT happen needs elapsed time: several idle periods.
	time.Sleep(4 * testIdle)
	if serverGone(l) {
		t.Fatal("server exited while a client was connected")
	}
	if _, err := c.Etcd().Put(ctx, "k2", "v"); err != nil {
		t.Fatalf("server unusable while a client is connected: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "background server exit", 30*time.Second, func() bool { return serverGone(l) })

	c2, err := Connect(ctx, Config{StateDir: dir, ServerIdle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r, err := c2.Etcd().Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "kept" {
		t.Fatalf("after server restart: %v %v, want k=kept", r, err)
	}
	if info2, _ := readEndpoint(l); info2.PID == info.PID {
		t.Fatalf("expected a new server process, still pid %d", info.PID)
	}
	c2.Close()
	waitFor(t, "background server exit", 30*time.Second, func() bool { return serverGone(l) })
}

// InProcess runs the server here; it refuses a second server on the same directory and
// serves shared-mode clients through the endpoint file until it closes.
func TestInProcess(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLayout(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Connect(ctx, Config{StateDir: dir, InProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if info, ok := readEndpoint(l); !ok || info.PID != os.Getpid() {
		t.Fatalf("endpoint file %+v ok=%v, want this process", info, ok)
	}
	if _, err := Connect(ctx, Config{StateDir: dir, InProcess: true}); !errors.Is(err, ErrStateDirBusy) ||
		!strings.Contains(err.Error(), fmt.Sprintf("served by pid %d", os.Getpid())) {
		t.Fatalf("second InProcess Connect: %v, want ErrStateDirBusy naming the serving pid", err)
	}
	shared, err := Connect(ctx, Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if shared.Endpoints()[0] != c.Endpoints()[0] {
		t.Fatalf("shared client uses %v, want the in-process server %v", shared.Endpoints(), c.Endpoints())
	}
	if _, err := c.Etcd().Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	r, err := shared.Etcd().Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("shared client read: %v %v", r, err)
	}
	n, err := shared.Etcd().Get(ctx, ClientsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || n.Count != 1 {
		t.Fatalf("client keys: %v %v, want 1 (the shared client)", n, err)
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !serverGone(l) {
		t.Fatal("endpoint file or server lock left after InProcess Close")
	}
	if _, err := os.Stat(filepath.Join(l.dataDir, "member")); err != nil {
		t.Fatalf("data directory not under state dir: %v", err)
	}
}

// TestClientFollowsRestartedServer: the background server is killed (SIGKILL) while a
// client is open. The client starts a new one on the same data, points itself at it, and
// says so through Config.Notify; a request made after the kill succeeds, and the data
// written before it is there.
func TestClientFollowsRestartedServer(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLayout(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var notes []string
	c, err := Connect(ctx, Config{StateDir: dir, ServerIdle: testIdle, Notify: func(msg string) {
		mu.Lock()
		notes = append(notes, msg)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Close()
		waitFor(t, "background server exit", 30*time.Second, func() bool { return serverGone(l) })
	}()
	if _, err := c.Etcd().Put(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	old, ok := readEndpoint(l)
	if !ok {
		t.Fatal("no endpoint file")
	}
	if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// A write in flight when the server died fails (nobody can tell whether it was
	// applied); one made once the connection is known lost waits for the new server.
	waitFor(t, "the client to see the connection lost", 30*time.Second, func() bool {
		st := c.Etcd().ActiveConnection().GetState().String()
		mu.Lock()
		defer mu.Unlock()
		return (st != "READY" && st != "IDLE") || len(notes) > 0
	})
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	if _, err := c.Etcd().Put(rctx, "k2", "after"); err != nil {
		t.Fatalf("put after the server was killed: %v", err)
	}
	r, err := c.Etcd().Get(rctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "before" {
		t.Fatalf("after the restart: %v %v, want k=before", r, err)
	}
	t.Logf("reconnected %s after the kill", time.Since(start).Round(time.Millisecond))
	now, ok := readEndpoint(l)
	if !ok || now.PID == old.PID || !slices.Equal(c.Endpoints(), now.Endpoints) {
		t.Fatalf("endpoint file %+v, client endpoints %v; want a new server the client uses", now, c.Endpoints())
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(notes, "\n")
	if !strings.Contains(all, fmt.Sprintf("(pid %d, ", old.PID)) || !strings.Contains(all, "has exited; starting a new one") ||
		!strings.Contains(all, fmt.Sprintf("reconnected to the new etcd server of %s (pid %d", l.root, now.PID)) {
		t.Fatalf("notes:\n%s", all)
	}
}

// TestClientFollowsServerRestartedElsewhere: when another process has already replaced
// the killed server, the client follows the endpoint file to it instead of starting one.
func TestClientFollowsServerRestartedElsewhere(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLayout(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := Connect(ctx, Config{StateDir: dir, ServerIdle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	old, _ := readEndpoint(l)
	// Stop a's watcher from acting first: it is closed here, and b's replaces the server.
	a.watch.close()
	a.watch = nil
	b, err := Connect(ctx, Config{StateDir: dir, ServerIdle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// b replaces the server; a write in flight at the kill fails, so try until one lands.
	waitFor(t, "b to write through a new server", 30*time.Second, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := b.Etcd().Put(pctx, "k", "v")
		return err == nil
	})
	now, _ := readEndpoint(l)
	if now.PID == old.PID {
		t.Fatal("b did not replace the server")
	}
	w := newWatcher(a.cli, Config{}, &l, old.Endpoints, old.PID)
	a.watch = w
	waitFor(t, "a to follow the new server", 30*time.Second, func() bool { return slices.Equal(a.Endpoints(), now.Endpoints) })
	r, err := a.Etcd().Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("a after following: %v %v", r, err)
	}
	b.Close()
	a.Close()
	waitFor(t, "background server exit", 30*time.Second, func() bool { return serverGone(l) })
}
