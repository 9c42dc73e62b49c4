package coord

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// Client returns a Client of this server that calls it inside this process (etcd's
// v3client: the server's own request handlers called as functions), with no gRPC
// encoding, no TCP connection and no transport goroutines on either side. For keys,
// transactions, watches and leases it answers as a Connect client of Endpoints does,
// with the same etcd errors (rpctypes), so a program that hosts the server (a test, a
// benchmark worker, Config.InProcess) pays for etcd's work and not for talking to it.
// Other processes use Endpoints.
//
// The client serves the server running now: once Close or Restart stops it, its requests
// fail at once (etcd's "raft: stopped" and the like, or their context's error) instead of
// reconnecting, and its watches go quiet until it is closed; after a Restart, call Client
// again. Closing the client does not stop the server. Errors wrap ErrEmbedded (the server
// is not running).
func (e *Embedded) Client() (*Client, error) {
	cli, eps, err := e.local()
	if err != nil {
		return nil, err
	}
	return &Client{cli: cli, endpoints: eps}, nil
}

// local is Client's etcd client and the server's endpoints.
func (e *Embedded) local() (*clientv3.Client, []string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd == nil {
		return nil, nil, fmt.Errorf("%w: no server running on %s", ErrEmbedded, e.dir)
	}
	return v3client.New(e.etcd.Server), []string{clientURL(e.clientPort).String()}, nil
}
