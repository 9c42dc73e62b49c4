package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Timing of a Client's watcher.
const (
	// watchEvery is how often the watcher looks at the connection and, with the embedded
	// default, at the state directory's server.
	watchEvery = 200 * time.Millisecond
	// waitNotice is how long the connection may be down before Config.Notify is told
	// what the client is waiting for; waitRepeat how often it is told again.
	waitNotice = time.Second
	waitRepeat = 10 * time.Second
)

// watcher keeps a Client connected and says what it waits for (Config.Notify):
//
//   - With the embedded default, when the state directory's background server exits
//     (killed, crashed) while the client is open, it starts a new one as Connect would
//     (or finds the one another process started), through <StateDir>/etcd/endpoint, and
//     points the client at it (clientv3.Client.SetEndpoints): requests waiting for the
//     dead server go to the new one, which has the same data.
//   - In every mode, when the connection has not been ready for waitNotice, it notifies
//     what it is waiting for, again every waitRepeat, and once more when connected again.
type watcher struct {
	cli    *clientv3.Client
	cfg    Config
	l      *layout // the embedded default's state directory; nil otherwise
	stop   chan struct{}
	done   chan struct{}
	notify func(format string, args ...any)

	mu  sync.Mutex
	eps []string // the endpoints the client uses
	pid int      // the embedded server's process (0: unknown or not embedded)

	downSince time.Time // the connection has not been ready since (zero: it is)
	told      time.Time // last notice about it (zero: none)
	retryAt   time.Time // next attempt to start a server after a failure
	failures  int
}

func newWatcher(cli *clientv3.Client, cfg Config, l *layout, eps []string, pid int) *watcher {
	w := &watcher{cli: cli, cfg: cfg, l: l, eps: eps, pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	w.notify = func(format string, args ...any) {
		if cfg.Notify != nil {
			cfg.Notify(fmt.Sprintf(format, args...))
		}
	}
	go w.run()
	return w
}

// close stops the watcher and waits for it.
func (w *watcher) close() {
	close(w.stop)
	<-w.done
}

func (w *watcher) endpoints() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.eps)
}

func (w *watcher) run() {
	defer close(w.done)
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if w.l != nil {
			w.checkServer()
		}
		w.checkConn(time.Now())
	}
}

// checkServer follows the state directory's server: to the endpoints its endpoint file
// names when they changed (another process restarted it), or, when the process the
// client used has exited, to a server started now.
func (w *watcher) checkServer() {
	w.mu.Lock()
	eps, pid := w.eps, w.pid
	w.mu.Unlock()
	if info, ok := readEndpoint(*w.l); ok && !slices.Equal(info.Endpoints, eps) && !processGone(info.PID) {
		w.use(info)
		w.reconnected()
		w.notify("etcd: the background etcd server of %s was restarted (pid %d); reconnected to %s", w.l.root, info.PID, strings.Join(info.Endpoints, ","))
		return
	}
	// Suspect the server when its process is gone or the connection is down; then it is
	// dead if nobody holds its server lock (a killed process that nobody has reaped yet
	// still has its pid, but no lock).
	suspect := processGone(pid) || !w.downSince.IsZero()
	if pid == 0 || !suspect || time.Now().Before(w.retryAt) || !w.serverDead() {
		return
	}
	if w.failures == 0 {
		w.notify("etcd: the background etcd server of %s (pid %d, %s) has exited; starting a new one", w.l.root, pid, strings.Join(eps, ","))
	}
	info, err := w.restart()
	if err != nil {
		w.failures++
		w.retryAt = time.Now().Add(min(time.Duration(w.failures)*time.Second, 10*time.Second))
		w.notify("etcd: cannot start a new etcd server for %s (will try again): %v", w.l.root, err)
		return
	}
	w.failures, w.retryAt = 0, time.Time{}
	w.use(info)
	w.reconnected()
	w.notify("etcd: reconnected to the new etcd server of %s (pid %d, %s)", w.l.root, info.PID, strings.Join(info.Endpoints, ","))
}

// serverDead reports whether no process holds the state directory's server lock. It
// looks only while holding start.lock (without waiting for it: a process holding it is
// starting or registering with a server, so the answer is "not dead" for now), because
// a server being started takes the server lock while its starter holds start.lock, and a
// look at that moment would make it fail.
func (w *watcher) serverDead() bool {
	lk, err := tryLock(w.l.startLock)
	if err != nil {
		return false
	}
	defer lk.unlock()
	return !serverAlive(*w.l)
}

// restart finds or starts the state directory's server as Connect does, under start.lock.
func (w *watcher) restart() (endpointInfo, error) {
	timeout := w.cfg.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() { // stop waiting when the client closes
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	lk, err := lock(ctx, w.l.startLock)
	if err != nil {
		return endpointInfo{}, err
	}
	defer lk.unlock()
	info, cli, err := ensureServer(ctx, *w.l, w.cfg, nil)
	if err != nil {
		return endpointInfo{}, err
	}
	cli.Close() // the dial proved the new server answers; the client's own connection moves to it
	return info, nil
}

// reconnected starts the connection's account afresh after the client moved to a new
// server (the move was just said): the wait for the old server is over, so neither a
// "no connection" notice counted from before the move nor a "connected again" one follows
// "reconnected"; if the new server is not ready a second from now, that is said then.
func (w *watcher) reconnected() {
	w.downSince, w.told = time.Time{}, time.Time{}
}

func (w *watcher) use(info endpointInfo) {
	w.mu.Lock()
	w.eps, w.pid = info.Endpoints, info.PID
	w.mu.Unlock()
	w.cli.SetEndpoints(info.Endpoints...)
}

// checkConn tells Notify, while the client's connection is not ready, what it waits
// for. An idle connection (no request in flight) counts as ready.
func (w *watcher) checkConn(now time.Time) {
	state := "READY"
	if conn := w.cli.ActiveConnection(); conn != nil {
		state = conn.GetState().String()
	}
	if state == "READY" || state == "IDLE" {
		if !w.told.IsZero() {
			w.notify("etcd: connected to %s again after %s", strings.Join(w.endpoints(), ","), now.Sub(w.downSince).Round(100*time.Millisecond))
		}
		w.downSince, w.told = time.Time{}, time.Time{}
		return
	}
	if w.downSince.IsZero() {
		w.downSince = now
		return
	}
	down := now.Sub(w.downSince)
	if down < waitNotice || (!w.told.IsZero() && now.Sub(w.told) < waitRepeat) {
		return
	}
	w.told = now
	what := "etcd at " + strings.Join(w.endpoints(), ",")
	if w.l != nil {
		what = "the background etcd server of " + w.l.root + " (" + strings.Join(w.endpoints(), ",") + ")"
	}
	w.notify("etcd: waiting for %s: no connection for %s (%s)", what, down.Round(time.Second), strings.ToLower(state))
}

// describe names the server the client uses, for a notice: the state directory's
// background server (its pid and endpoints) or the cluster's endpoints.
func (w *watcher) describe() string {
	w.mu.Lock()
	eps, pid := strings.Join(w.eps, ","), w.pid
	w.mu.Unlock()
	if w.l == nil {
		return "etcd at " + eps
	}
	if pid > 0 {
		return fmt.Sprintf("the background etcd server of %s, pid %d, %s", w.l.root, pid, eps)
	}
	return fmt.Sprintf("the background etcd server of %s, %s", w.l.root, eps)
}

// processGone reports whether no process has pid.
func processGone(pid int) bool {
	return pid > 0 && errors.Is(syscall.Kill(pid, syscall.Signal(0)), syscall.ESRCH)
}
