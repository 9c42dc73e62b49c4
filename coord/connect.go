package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrConnect classifies failures to reach etcd.
var ErrConnect = errors.New("coord: cannot connect to etcd")

// Config says which etcd to use.
type Config struct {
	// Endpoints of an existing etcd cluster ("host:port" or "http://host:port"). When set,
	// StateDir, InProcess and ServerIdle are ignored.
	Endpoints []string
	// StateDir is the local state directory of the embedded default; etcd's files live in
	// <StateDir>/etcd/. Required when Endpoints is empty.
	StateDir string
	// DialTimeout bounds each connection attempt and health check. Default 5 s.
	DialTimeout time.Duration
	// InProcess runs the state directory's etcd server inside this process instead of a
	// shared background process, and the Client calls it in-process (Embedded.Client). Other processes may Connect to it meanwhile (it publishes
	// the endpoint file), but it stops when this Client closes. Connect fails with
	// ErrStateDirBusy if another process already serves the directory.
	InProcess bool
	// ServerIdle is the idle period of a background server started by this Connect
	// (default: $SHALE_ETCD_IDLE, else DefaultIdle). It does not change a running server.
	ServerIdle time.Duration
	// StartTimeout bounds how long Connect waits for a background server to start and for
	// start.lock. Default 60 s.
	StartTimeout time.Duration
	// Notify, when set, is told in one line (no trailing newline) what the client waits
	// for while it waits: a connection that is not ready for a second (then every 10 s,
	// and once more when it is back), a background server that exited and is being
	// replaced, one slow to start. It is called from a goroutine of the Client, never
	// after Close returns. (With the embedded default the Client replaces an exited
	// background server whether or not Notify is set.) Messages never carry credentials.
	Notify func(msg string)
	// SlowAfter is how long a request to etcd (a get, put, delete, transaction, lease grant
	// or revoke) may go on without an answer before Notify is told, once per wait, what it
	// waits for (a server that is stopped or overloaded keeps its connection "ready", so
	// nothing else would say it). Default 10 s. Only with Notify set; it never changes what
	// a request returns.
	SlowAfter time.Duration
	// Username and Password authenticate to a cluster with etcd authentication enabled
	// (ignored by a cluster without it). User info in an endpoint
	// (http://user:password@host:2379) sets them when Username is empty; it is removed
	// from the endpoints before dialing, so no message, log or Client.Endpoints shows it.
	Username, Password string
}

// Client is a connection to etcd. Its methods are safe for concurrent use.
type Client struct {
	cli       *clientv3.Client
	endpoints []string
	presence  *presence // background server mode: our leased key under ClientsPrefix
	server    *server   // InProcess mode
	watch     *watcher  // reconnects to a restarted background server; says what it waits for
	closeOnce sync.Once
	closeErr  error
}

// Etcd returns the etcd client. It stays valid until Close.
func (c *Client) Etcd() *clientv3.Client { return c.cli }

// Endpoints returns the client URLs in use (with the embedded default, those of the
// background server the client follows: a restarted one's).
func (c *Client) Endpoints() []string {
	if c.watch != nil {
		return c.watch.endpoints()
	}
	return append([]string(nil), c.endpoints...)
}

// Close releases the connection. With the embedded default it first deletes this client's
// key, so the background server can go idle; with InProcess it stops the server (waiting
// up to 30 s for it). Calling Close again returns the first result. Errors: the etcd
// client's, and the in-process server's shutdown error (wrapping ErrEmbedded).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		if c.watch != nil {
			c.watch.close()
		}
		if c.presence != nil {
			c.presence.close(c.cli)
		}
		err := c.cli.Close()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		if c.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = errors.Join(err, c.server.shutdown(ctx))
		}
		c.closeErr = err
	})
	return c.closeErr
}

// Connect returns a client of the configured etcd:
//   - cfg.Endpoints set: that cluster, after one successful request (bounded by DialTimeout);
//   - cfg.InProcess: an etcd server started in this process on cfg.StateDir;
//   - otherwise the state directory's shared background server, started if none answers
//     (see ServeIfRequested, which the program's main must call).
//
// Errors wrap ErrConnect, ErrEmbedded or ErrStateDirBusy, and ctx's error when it ends.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if len(cfg.Endpoints) > 0 {
		eps, user, password, err := endpointAuth(cfg)
		if err != nil {
			return nil, err
		}
		cli, err := dialAs(ctx, eps, cfg.DialTimeout, "", user, password)
		if err != nil {
			return nil, err
		}
		c := &Client{cli: cli, endpoints: eps}
		if cfg.Notify != nil {
			c.watch = newWatcher(cli, cfg, nil, eps, 0) // eps: without user info
			c.reportSlow(cfg)
		}
		return c, nil
	}
	l, err := newLayout(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := l.mkdir(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	lk, err := lock(ctx, l.startLock)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConnect, err)
	}
	defer lk.unlock()
	if cfg.InProcess {
		return connectInProcess(ctx, l)
	}
	return connectShared(ctx, l, cfg)
}

func connectInProcess(ctx context.Context, l layout) (*Client, error) {
	s, err := openServer(ctx, l)
	if err != nil {
		return nil, err
	}
	// This process hosts the server: call it in-process (Embedded.Client), no gRPC or TCP.
	cli, eps, err := s.emb.local()
	if err != nil {
		s.shutdown(ctx)
		return nil, err
	}
	return &Client{cli: cli, endpoints: eps, server: s}, nil
}

// connectShared runs under start.lock: use the running server if it answers, else start
// one, then register this client's key before releasing the lock.
func connectShared(ctx context.Context, l layout, cfg Config) (*Client, error) {
	info, cli, err := ensureServer(ctx, l, cfg, cfg.Notify)
	if err != nil {
		return nil, err
	}
	c, err := register(ctx, cli, info.Endpoints)
	if err != nil {
		return nil, err
	}
	c.watch = newWatcher(cli, cfg, &l, info.Endpoints, info.PID)
	if cfg.Notify != nil {
		c.reportSlow(cfg)
	}
	return c, nil
}

// reportSlow makes the client's requests tell cfg.Notify when they are slow (see
// Config.SlowAfter); the notice names the server the watcher follows.
func (c *Client) reportSlow(cfg Config) {
	after := cfg.SlowAfter
	if after <= 0 {
		after = defaultSlowAfter
	}
	r := &slowReporter{after: after, notify: cfg.Notify, where: c.watch.describe}
	r.wrap(c.cli)
}

// ensureServer runs under start.lock: it dials the running server if it answers, else
// starts one and dials it once it has published its endpoint file. notify (when set) is
// told when the wait for a starting server is long.
func ensureServer(ctx context.Context, l layout, cfg Config, notify func(string)) (endpointInfo, *clientv3.Client, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if info, ok := readEndpoint(l); ok {
		if cli, err := dial(ctx, info.Endpoints, cfg.DialTimeout, l.root); err == nil {
			return info, cli, nil
		}
	}
	var exited <-chan error
	if !serverAlive(l) {
		// No server process: whatever endpoint file exists is stale.
		os.Remove(l.endpointFile)
		var err error
		if exited, err = spawnServer(l, cfg.ServerIdle); err != nil {
			return endpointInfo{}, nil, err
		}
	}
	// Wait for the new server (or for a live one that has not published its endpoint yet).
	backoff := 5 * time.Millisecond
	var lastErr error
	start, told := time.Now(), time.Time{}
	for {
		if info, ok := readEndpoint(l); ok {
			cli, err := dial(ctx, info.Endpoints, cfg.DialTimeout, l.root)
			if err == nil {
				return info, cli, nil
			}
			lastErr = err
		}
		if notify != nil && time.Since(start) >= 2*time.Second && time.Since(told) >= waitRepeat {
			told = time.Now()
			notify(waitingMessage(l, exited != nil, time.Since(start)))
		}
		t := time.NewTimer(backoff)
		select {
		case err := <-exited:
			t.Stop()
			return endpointInfo{}, nil, fmt.Errorf("%w: background etcd server for %s exited (%v); see %s%s",
				ErrConnect, l.root, err, l.logFile, logTail(l.logFile))
		case <-ctx.Done():
			t.Stop()
			return endpointInfo{}, nil, fmt.Errorf("%w: background etcd server for %s not ready: %w (last: %v)",
				ErrConnect, l.root, context.Cause(ctx), lastErr)
		case <-t.C:
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// waitingMessage says what ensureServer waits for: a server it started, or one that was
// already running (its process is alive) but does not answer, stopped (SIGSTOP) or
// overloaded, say, which must not be replaced while it may still write its data.
func waitingMessage(l layout, spawned bool, waited time.Duration) string {
	if spawned {
		return fmt.Sprintf("etcd: waiting for the background etcd server of %s to start (%s so far; its log: %s)",
			l.root, waited.Round(time.Second), l.logFile)
	}
	who := "its process"
	if info, ok := readEndpoint(l); ok {
		who = fmt.Sprintf("pid %d, %s", info.PID, strings.Join(info.Endpoints, ", "))
	}
	return fmt.Sprintf("etcd: waiting for the background etcd server of %s (%s) to answer: it is running but has not answered for %s (stopped or overloaded? its log: %s)",
		l.root, who, waited.Round(time.Second), l.logFile)
}

func register(ctx context.Context, cli *clientv3.Client, eps []string) (*Client, error) {
	p, err := startPresence(ctx, cli)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: register client: %v", ErrConnect, err)
	}
	return &Client{cli: cli, endpoints: eps, presence: p}, nil
}

// spawnServer starts this program's binary as the detached background server of l.
// The returned channel yields the process's exit.
func spawnServer(l layout, idle time.Duration) (<-chan error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: find own binary: %v", ErrConnect, err)
	}
	logf, err := os.OpenFile(l.logFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConnect, err)
	}
	defer logf.Close()
	cmd := exec.Command(exe)
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvServe+"=") && !(idle > 0 && strings.HasPrefix(kv, EnvIdle+"=")) {
			env = append(env, kv)
		}
	}
	env = append(env, EnvServe+"="+l.root)
	if idle > 0 {
		env = append(env, EnvIdle+"="+idle.String())
	}
	cmd.Env = env
	cmd.Dir = l.etcdDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start background etcd server %s: %v", ErrConnect, exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps the child whenever it exits
	return exited, nil
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return ":\n" + strings.TrimSpace(string(b))
}

func newEtcdClientAs(endpoints []string, dialTimeout time.Duration, user, password string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Logger:      zap.NewNop(),
		Username:    user,
		Password:    password,
	})
}

// dial connects and proves the cluster answers with one linearizable read. With
// wantStateDir set it also checks that the server is the one of that state directory (and
// first that its port accepts connections at all, to fail fast on a stale endpoint).
func dial(ctx context.Context, endpoints []string, timeout time.Duration, wantStateDir string) (*clientv3.Client, error) {
	return dialAs(ctx, endpoints, timeout, wantStateDir, "", "")
}

// dialAs is dial, authenticating as user (when set).
func dialAs(ctx context.Context, endpoints []string, timeout time.Duration, wantStateDir, user, password string) (*clientv3.Client, error) {
	if wantStateDir != "" && !portOpen(endpoints[0], timeout) {
		return nil, fmt.Errorf("%w: %s: connection refused", ErrConnect, endpoints[0])
	}
	if wantStateDir == "" && !slices.ContainsFunc(endpoints, func(ep string) bool { return portOpen(ep, timeout) }) {
		// Fail fast with a clear message instead of waiting out the dial timeout.
		return nil, fmt.Errorf("%w: %v: no endpoint accepts connections", ErrConnect, endpoints)
	}
	cli, err := newEtcdClientAs(endpoints, timeout, user, password)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %v", ErrConnect, endpoints, err)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := cli.Get(rctx, serverKey)
	if err == nil && wantStateDir != "" {
		if len(r.Kvs) == 0 || string(r.Kvs[0].Value) != wantStateDir {
			err = fmt.Errorf("server at %v does not serve %s", endpoints, wantStateDir)
		}
	}
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: %v: %v", ErrConnect, endpoints, err)
	}
	return cli, nil
}

func portOpen(endpoint string, timeout time.Duration) bool {
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		host = u.Host
	}
	c, err := net.DialTimeout("tcp", host, min(timeout, time.Second))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// presenceTTL is the lease TTL of a client key: a crashed client stops counting as
// connected this long after its last keepalive.
const presenceTTL = 5 // seconds

// presence keeps this client's leased key under ClientsPrefix alive, re-creating it if the
// lease is lost (for instance after a server restart that outlived the TTL).
type presence struct {
	key    string
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	lease clientv3.LeaseID
}

func startPresence(ctx context.Context, cli *clientv3.Client) (*presence, error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	host, _ := os.Hostname()
	p := &presence{
		key:  ClientsPrefix + host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:]),
		done: make(chan struct{}),
	}
	kctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	ch, err := p.grant(ctx, kctx, cli)
	if err != nil {
		cancel()
		return nil, err
	}
	go p.keep(kctx, cli, ch)
	return p, nil
}

// grant creates a lease, puts the key under it and starts keepalives bound to kctx.
func (p *presence) grant(ctx, kctx context.Context, cli *clientv3.Client) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := cli.Grant(ctx, presenceTTL)
	if err != nil {
		return nil, err
	}
	if _, err := cli.Put(ctx, p.key, strconv.Itoa(os.Getpid()), clientv3.WithLease(g.ID)); err != nil {
		return nil, err
	}
	ch, err := cli.KeepAlive(kctx, g.ID)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.lease = g.ID
	p.mu.Unlock()
	return ch, nil
}

func (p *presence) keep(kctx context.Context, cli *clientv3.Client, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(p.done)
	backoff := 50 * time.Millisecond
	for {
		if ch != nil {
			for range ch { // drained until the keepalive ends
			}
		}
		if kctx.Err() != nil {
			return
		}
		var err error
		if ch, err = p.grant(kctx, kctx, cli); err == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		ch = nil
		t := time.NewTimer(backoff)
		select {
		case <-kctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// close stops keepalives and revokes the lease, deleting the key at once.
func (p *presence) close(cli *clientv3.Client) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	id := p.lease
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli.Revoke(ctx, id) // on failure the key expires after presenceTTL
}
