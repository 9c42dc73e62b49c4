package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// EnvServe names the environment variable that turns a Shale binary into the background
	// etcd server for the state directory it holds (see ServeIfRequested).
	EnvServe = "SHALE_ETCD_SERVE"
	// EnvIdle optionally sets the background server's idle period (a Go duration such as
	// "30s"). Config.ServerIdle passes it to a server that Connect starts.
	EnvIdle = "SHALE_ETCD_IDLE"
	// DefaultIdle is how long a background server keeps running with no client connected.
	DefaultIdle = 30 * time.Second

	// ClientsPrefix holds one leased key per connected client of a background server.
	ClientsPrefix = "/shale/clients/"
	// serverKey holds the absolute state directory of the server, so a client never mistakes
	// another etcd on a recycled port for its own.
	serverKey = "/shale/server/state_dir"
)

// ErrStateDirBusy reports that another process already runs the etcd server of a state
// directory, so this process cannot run one there (Config.InProcess).
var ErrStateDirBusy = errors.New("coord: state directory is served by another process")

// ServeIfRequested turns this process into the background etcd server of a state directory
// when the environment variable SHALE_ETCD_SERVE names one, and then exits the process
// (status 0 after an idle shutdown, 1 on failure). Otherwise it returns at once.
//
// Connect starts that server by re-executing the program's own binary, so every program
// (and every test binary, from TestMain) that may Connect without endpoints must call this
// first thing in main, before parsing flags.
//
// The server listens on 127.0.0.1 free ports, writes <StateDir>/etcd/endpoint when ready,
// and exits once no client key has existed under ClientsPrefix for the idle period
// (SHALE_ETCD_IDLE, default 30 s), removing the endpoint file first. SIGTERM and SIGINT stop
// it the same way.
func ServeIfRequested() {
	dir := os.Getenv(EnvServe)
	if dir == "" {
		return
	}
	idle := DefaultIdle
	if s := os.Getenv(EnvIdle); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "shale etcd server: bad %s=%q\n", EnvIdle, s)
			os.Exit(1)
		}
		idle = d
	}
	if err := serveBackground(dir, idle); err != nil {
		fmt.Fprintf(os.Stderr, "shale etcd server (pid %d): %v\n", os.Getpid(), err)
		os.Exit(1)
	}
	os.Exit(0)
}

// server is a running etcd server owning a state directory: it holds the server lock and
// has published the endpoint file.
type server struct {
	l     layout
	owner *fileLock // server.lock, held for the server's life
	emb   *Embedded
	cli   *clientv3.Client
}

// openServer starts the state directory's etcd server in this process. The caller holds
// start.lock. Errors: ErrStateDirBusy when another process serves the directory.
func openServer(ctx context.Context, l layout) (*server, error) {
	owner, err := tryLock(l.serverLock)
	if errors.Is(err, errLocked) {
		who := "another process"
		if info, ok := readEndpoint(l); ok && info.PID > 0 {
			who = fmt.Sprintf("pid %d", info.PID)
		}
		return nil, fmt.Errorf("%w: %s is served by %s (a background server of the shale command stops after %s without clients, %s sets it; or connect to it without InProcess)",
			ErrStateDirBusy, l.root, who, DefaultIdle, EnvIdle)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEmbedded, err)
	}
	emb, err := StartEmbedded(l.dataDir)
	if err != nil {
		owner.unlock()
		return nil, err
	}
	s := &server{l: l, owner: owner, emb: emb}
	fail := func(err error) (*server, error) {
		s.close()
		return nil, fmt.Errorf("%w: %s: %v", ErrEmbedded, l.root, err)
	}
	// The server's own requests (its state-directory key, the idle checks) are calls
	// inside this process (Embedded.Client).
	if s.cli, _, err = emb.local(); err != nil {
		return fail(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.cli.Put(pctx, serverKey, l.root); err != nil {
		return fail(fmt.Errorf("put %s: %v", serverKey, err))
	}
	if err := writeEndpoint(l, emb.Endpoints()); err != nil {
		return fail(err)
	}
	return s, nil
}

// close stops etcd and releases the server lock. The caller removes the endpoint file
// first (under start.lock) when it published one.
func (s *server) close() {
	if s.cli != nil {
		s.cli.Close()
	}
	s.emb.Close()
	s.owner.unlock()
}

// shutdown removes the endpoint file and stops the server while holding start.lock, so no
// client can read the endpoint and register in between.
func (s *server) shutdown(ctx context.Context) error {
	lk, err := lock(ctx, s.l.startLock)
	if err != nil {
		s.close() // stop anyway; a stale endpoint file is detected by clients
		return err
	}
	defer lk.unlock()
	os.Remove(s.l.endpointFile)
	s.close()
	return nil
}

// clientCount counts live client keys.
func (s *server) clientCount(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := s.cli.Get(ctx, ClientsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return r.Count, nil
}

// serveBackground runs the background server until it has been idle for idle.
func serveBackground(stateDir string, idle time.Duration) error {
	l, err := newLayout(stateDir)
	if err != nil {
		return err
	}
	if err := l.mkdir(); err != nil {
		return err
	}
	ctx := context.Background()
	s, err := openServer(ctx, l)
	if err != nil {
		return err
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)

	poll := min(max(idle/4, 10*time.Millisecond), time.Second)
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	lastBusy := time.Now() // a server nobody registers with still exits after idle
	for {
		select {
		case <-sigc:
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return s.shutdown(sctx)
		case err := <-s.emb.Err():
			s.shutdown(ctx)
			return fmt.Errorf("%w: %v", ErrEmbedded, err)
		case <-ticker.C:
		}
		n, err := s.clientCount(ctx)
		if err != nil || n > 0 {
			lastBusy = time.Now()
			continue
		}
		if time.Since(lastBusy) < idle {
			continue
		}
		// Idle. Stop unless a client is connecting right now (it holds start.lock) or
		// registered since the count above.
		lk, err := tryLock(l.startLock)
		if err != nil {
			continue
		}
		if n, err := s.clientCount(ctx); err != nil || n > 0 {
			lk.unlock()
			lastBusy = time.Now()
			continue
		}
		os.Remove(l.endpointFile)
		s.close()
		lk.unlock()
		return nil
	}
}
