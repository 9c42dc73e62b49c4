// Package coord connects Shale to etcd, where the catalog keeps each table's published
// pointer (DESIGN §5).
//
// Three ways to get an etcd:
//   - Connect with Config.Endpoints set joins an existing cluster.
//   - Connect with no endpoints uses the embedded default: one shared background etcd
//     server process per state directory, started on demand by whichever `shale` command
//     needs it first and stopped by itself once no client has been connected for an idle
//     period. Any number of processes may Connect to the same state directory at once.
//     A program that may start this server must call ServeIfRequested first thing in main
//     (and in TestMain), because the server is the program's own binary re-executed.
//   - StartEmbedded (or Config.InProcess) runs etcd inside the calling process, for tests
//     and for library users that own their state directory. Embedded.Client (and the
//     Client of Config.InProcess) calls that server in-process: no gRPC, no TCP.
//
// Embedded servers listen on 127.0.0.1 only and log nothing (zap Nop logger).
//
// Where to start: Connect returns a *Client; pass Client.Etcd() to engine.Options.Etcd and
// Close the client when done (with InProcess, that stops the server). ErrConnect,
// ErrEmbedded and ErrStateDirBusy classify Connect's failures for errors.Is.
package coord

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ErrEmbedded classifies failures to start or stop an embedded etcd server.
var ErrEmbedded = errors.New("coord: embedded etcd")

// startTimeout bounds how long an embedded server may take to become ready. A cold start
// takes 0.3–0.6 s on a loaded 2-core machine (shared/reference/deps.md §2c).
const startTimeout = 60 * time.Second

// Embedded is an etcd server running inside this process: a single member listening on
// 127.0.0.1 (client and peer ports chosen free at the first start), data under one
// directory. Methods are safe for concurrent use.
type Embedded struct {
	dir string

	mu         sync.Mutex
	etcd       *embed.Etcd
	clientPort int
	peerPort   int
}

// StartEmbedded starts a single-member etcd with its data under dir (created if missing;
// an existing data directory is reopened with its keys). It listens on 127.0.0.1 on free
// client and peer ports and returns once the server is ready to serve requests.
// Errors wrap ErrEmbedded.
func StartEmbedded(dir string) (*Embedded, error) {
	e := &Embedded{dir: dir}
	if err := e.start(); err != nil {
		return nil, err
	}
	return e, nil
}

// Endpoints returns the client URLs ("http://127.0.0.1:<port>"). They stay the same across
// Restart, so clients reconnect on their own.
func (e *Embedded) Endpoints() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return []string{clientURL(e.clientPort).String()}
}

// Dir returns the data directory.
func (e *Embedded) Dir() string { return e.dir }

// Close stops the server. Open client connections see the server go away. Closing twice
// is a no-op.
func (e *Embedded) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd != nil {
		e.etcd.Close()
		e.etcd = nil
	}
}

// Restart stops the server (if running) and starts it again on the same data directory
// and the same ports, so data survives and clients holding the old endpoints reconnect.
// Errors wrap ErrEmbedded (for instance when another process took a port meanwhile).
func (e *Embedded) Restart() error {
	e.Close()
	return e.start()
}

// Err returns a channel that yields a fatal server error, if the server fails after start.
// It is nil when the server is not running.
func (e *Embedded) Err() <-chan error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd == nil {
		return nil
	}
	return e.etcd.Err()
}

func clientURL(port int) *url.URL {
	return &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// start launches etcd. On the first start the ports are picked by listen-and-close, which
// races with other processes picking ports (deps.md pitfall 6), so a bind failure is retried
// with fresh ports. A restart reuses the recorded ports.
func (e *Embedded) start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd != nil {
		return fmt.Errorf("%w: already running on %s", ErrEmbedded, e.dir)
	}
	fresh := e.clientPort == 0
	attempts := 1
	if fresh {
		attempts = 5
	}
	var lastErr error
	for range attempts {
		if fresh {
			cp, err1 := freePort()
			pp, err2 := freePort()
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("%w: pick free ports: %v", ErrEmbedded, err)
			}
			if cp == pp {
				continue
			}
			e.clientPort, e.peerPort = cp, pp
		}
		etcd, err := startEtcd(e.dir, e.clientPort, e.peerPort)
		if err == nil {
			e.etcd = etcd
			return nil
		}
		lastErr = err
		if !isAddrInUse(err) {
			break
		}
	}
	if fresh {
		e.clientPort, e.peerPort = 0, 0
	}
	return fmt.Errorf("%w: start in %s: %v", ErrEmbedded, e.dir, lastErr)
}

func startEtcd(dir string, clientPort, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "shale"
	cfg.Dir = dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu := clientURL(clientPort)
	pu := &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	// Keep an hour of revisions for snapshot reads; without compaction a long-lived state
	// directory grows without bound.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"
	cfg.ListenMetricsUrls = nil
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(startTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("not ready after %v", startTimeout)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func isAddrInUse(err error) bool {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "listen" {
		return true
	}
	// embed wraps listener errors without %w in some paths.
	return err != nil && strings.Contains(err.Error(), "address already in use")
}
