package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Files of the embedded default under <StateDir>/etcd/:
//
//	data/          the etcd data directory
//	endpoint       JSON {format, endpoints, pid, state_dir} of the running server; written
//	               atomically once the server is ready, removed when it stops
//	start.lock     flock held while a client checks for, starts or registers with the server,
//	               and by the server while it shuts down, so no client registers with a
//	               server that is going away
//	server.lock    flock held by the process running the server for its whole life; a
//	               client that cannot take it knows a server process is alive
//	server.log     stdout/stderr of the last background server process
type layout struct {
	root         string // absolute StateDir
	etcdDir      string
	dataDir      string
	endpointFile string
	startLock    string
	serverLock   string
	logFile      string
}

func newLayout(stateDir string) (layout, error) {
	if stateDir == "" {
		return layout{}, fmt.Errorf("%w: no state directory configured", ErrConnect)
	}
	root, err := filepath.Abs(stateDir)
	if err != nil {
		return layout{}, fmt.Errorf("%w: state directory %q: %v", ErrConnect, stateDir, err)
	}
	d := filepath.Join(root, "etcd")
	return layout{
		root:         root,
		etcdDir:      d,
		dataDir:      filepath.Join(d, "data"),
		endpointFile: filepath.Join(d, "endpoint"),
		startLock:    filepath.Join(d, "start.lock"),
		serverLock:   filepath.Join(d, "server.lock"),
		logFile:      filepath.Join(d, "server.log"),
	}, nil
}

func (l layout) mkdir() error {
	if err := os.MkdirAll(l.etcdDir, 0o700); err != nil {
		return fmt.Errorf("%w: create %s: %v", ErrConnect, l.etcdDir, err)
	}
	return nil
}

// endpointFormat is the format version of the endpoint file this build writes and reads.
const endpointFormat = 1

type endpointInfo struct {
	Format    int      `json:"format"`
	Endpoints []string `json:"endpoints"`
	PID       int      `json:"pid"`
	StateDir  string   `json:"state_dir"`
}

// readEndpoint returns the endpoints recorded in the endpoint file, or ok=false when the
// file is missing, unreadable, of another format or for another state directory (a stale
// or foreign file is treated like a missing one: the caller then checks the server lock).
func readEndpoint(l layout) (endpointInfo, bool) {
	b, err := os.ReadFile(l.endpointFile)
	if err != nil {
		return endpointInfo{}, false
	}
	var info endpointInfo
	if json.Unmarshal(b, &info) != nil || info.Format != endpointFormat ||
		len(info.Endpoints) == 0 || info.StateDir != l.root {
		return endpointInfo{}, false
	}
	return info, true
}

// writeEndpoint writes the endpoint file atomically: temp file, fsync, rename, fsync dir.
func writeEndpoint(l layout, endpoints []string) error {
	b, err := json.Marshal(endpointInfo{Format: endpointFormat, Endpoints: endpoints, PID: os.Getpid(), StateDir: l.root})
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", l.endpointFile, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l.endpointFile)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", l.endpointFile, err)
	}
	if d, err := os.Open(l.etcdDir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// fileLock is an flock(2) on a lock file. Locks belong to the open file, so two opens in
// one process exclude each other just as two processes do.
type fileLock struct{ f *os.File }

// errLocked reports a lock that is held elsewhere (tryLock only).
var errLocked = errors.New("lock held by another process")

// tryLock takes an exclusive lock without waiting; errLocked if it is held.
func tryLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

// lock takes an exclusive lock, polling with backoff (2 ms doubling to 50 ms) until it is
// free or ctx ends. flock's blocking mode cannot be cancelled, hence the polling.
func lock(ctx context.Context, path string) (*fileLock, error) {
	backoff := 2 * time.Millisecond
	for {
		lk, err := tryLock(path)
		if !errors.Is(err, errLocked) {
			return lk, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for %s: %w", path, context.Cause(ctx))
		case <-t.C:
		}
		backoff = min(backoff*2, 50*time.Millisecond)
	}
}

// unlock releases the lock (closing the file releases the flock). Nil-safe.
func (lk *fileLock) unlock() {
	if lk != nil && lk.f != nil {
		lk.f.Close()
		lk.f = nil
	}
}

// serverAlive reports whether some process holds the server lock.
func serverAlive(l layout) bool {
	lk, err := tryLock(l.serverLock)
	if err != nil {
		return errors.Is(err, errLocked)
	}
	lk.unlock()
	return false
}
