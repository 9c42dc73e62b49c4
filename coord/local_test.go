package coord

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// bothClients starts an embedded server and returns its in-process client and a network
// client of its endpoints.
func bothClients(t *testing.T) (*Embedded, map[string]*clientv3.Client) {
	t.Helper()
	e, err := StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	local, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	remote, err := Connect(ctx, Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	if got, want := local.Endpoints(), e.Endpoints(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("in-process client's endpoints %v, want the server's %v", got, want)
	}
	return e, map[string]*clientv3.Client{"in-process": local.Etcd(), "network": remote.Etcd()}
}

// TestEmbeddedClientAnswersLikeNetwork runs the same requests through the in-process
// client and a network client of one server: the same answers, and the same etcd errors
// (compared with errors.Is on the rpctypes values callers test for).
func TestEmbeddedClientAnswersLikeNetwork(t *testing.T) {
	_, clis := bothClients(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, cli := range clis {
		p := "/" + name + "/"
		put, err := cli.Put(ctx, p+"a", "1")
		if err != nil {
			t.Fatalf("%s: put: %v", name, err)
		}
		if _, err := cli.Put(ctx, p+"b", "2"); err != nil {
			t.Fatalf("%s: put: %v", name, err)
		}
		r, err := cli.Get(ctx, p, clientv3.WithPrefix())
		if err != nil || len(r.Kvs) != 2 || string(r.Kvs[0].Value) != "1" || string(r.Kvs[1].Value) != "2" {
			t.Fatalf("%s: prefix get: %v %v", name, r, err)
		}
		// A guarded write: the stale guard fails and takes the else branch, the current one succeeds.
		stale, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(p+"a"), "=", put.Header.Revision-1)).
			Then(clientv3.OpPut(p+"a", "x")).Else(clientv3.OpGet(p + "a")).Commit()
		if err != nil || stale.Succeeded || string(stale.Responses[0].GetResponseRange().Kvs[0].Value) != "1" {
			t.Fatalf("%s: stale txn: %+v %v", name, stale, err)
		}
		ok, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(p+"a"), "=", put.Header.Revision)).
			Then(clientv3.OpPut(p+"a", "3")).Commit()
		if err != nil || !ok.Succeeded {
			t.Fatalf("%s: txn: %+v %v", name, ok, err)
		}
		if d, err := cli.Delete(ctx, p+"b"); err != nil || d.Deleted != 1 {
			t.Fatalf("%s: delete: %v %v", name, d, err)
		}
	}
	// Each client sees what the other wrote: one server.
	for name, cli := range clis {
		r, err := cli.Get(ctx, "/", clientv3.WithPrefix())
		if err != nil || len(r.Kvs) != 2 {
			t.Fatalf("%s: sees %v (%v), want /in-process/a and /network/a", name, r, err)
		}
	}

	// Errors: a compacted revision, an empty key, a transaction with too many operations,
	// an unknown lease, and a request whose context has ended.
	nc := clis["network"]
	cur, err := nc.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Compact(ctx, cur.Header.Revision); err != nil {
		t.Fatal(err)
	}
	tooMany := make([]clientv3.Op, 200)
	for i := range tooMany {
		tooMany[i] = clientv3.OpPut(fmt.Sprint("/many/", i), "v")
	}
	cases := []struct {
		name string
		run  func(*clientv3.Client) error
		want error
	}{
		{"compacted", func(c *clientv3.Client) error { _, err := c.Get(ctx, "/", clientv3.WithRev(1)); return err }, rpctypes.ErrCompacted},
		{"empty key", func(c *clientv3.Client) error { _, err := c.Put(ctx, "", "v"); return err }, rpctypes.ErrEmptyKey},
		{"too many ops", func(c *clientv3.Client) error { _, err := c.Txn(ctx).Then(tooMany...).Commit(); return err }, rpctypes.ErrTooManyOps},
		{"unknown lease", func(c *clientv3.Client) error { _, err := c.Put(ctx, "/l", "v", clientv3.WithLease(12345)); return err }, rpctypes.ErrLeaseNotFound},
		{"ended context", func(c *clientv3.Client) error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := c.Get(cctx, "/")
			return err
		}, context.Canceled},
	}
	for _, c := range cases {
		for name, cli := range clis {
			if err := c.run(cli); !errors.Is(err, c.want) {
				t.Errorf("%s: %s: %v, want %v", c.name, name, err, c.want)
			}
		}
	}
}

// TestEmbeddedClientWatchesAndLeases: watches of the in-process client see writes of a
// network client (and report a compacted start revision as one would), a leased key goes
// away when its lease is revoked, and an etcd election (concurrency, as serve uses it)
// works across the two clients.
func TestEmbeddedClientWatchesAndLeases(t *testing.T) {
	_, clis := bothClients(t)
	local, remote := clis["in-process"], clis["network"]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := local.Watch(wctx, "/w/", clientv3.WithPrefix())
	if _, err := remote.Put(ctx, "/w/k", "v"); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-wch:
		if err := resp.Err(); err != nil || len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != "/w/k" {
			t.Fatalf("watch: %+v %v", resp.Events, err)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	wcancel()

	cur, err := remote.Put(ctx, "/w/k", "v2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Compact(ctx, cur.Header.Revision); err != nil {
		t.Fatal(err)
	}
	for name, cli := range clis {
		cctx, ccancel := context.WithCancel(ctx)
		resp := <-cli.Watch(cctx, "/w/", clientv3.WithPrefix(), clientv3.WithRev(1))
		ccancel()
		if !errors.Is(resp.Err(), rpctypes.ErrCompacted) || resp.CompactRevision != cur.Header.Revision {
			t.Errorf("%s: watch from a compacted revision: %v (compact revision %d), want ErrCompacted at %d",
				name, resp.Err(), resp.CompactRevision, cur.Header.Revision)
		}
	}

	lease, err := local.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.Put(ctx, "/lease/k", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := local.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := remote.Get(ctx, "/lease/k"); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("leased key after revoke: %v %v, want gone", r, err)
	}

	// An election: the in-process client leads; the network client's candidate waits until
	// the leader resigns.
	s1, err := concurrency.NewSession(local, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := concurrency.NewSession(remote, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	e1, e2 := concurrency.NewElection(s1, "/elect/"), concurrency.NewElection(s2, "/elect/")
	if err := e1.Campaign(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	won := make(chan error, 1)
	go func() { won <- e2.Campaign(ctx, "two") }()
	if l, err := e2.Leader(ctx); err != nil || string(l.Kvs[0].Value) != "one" {
		t.Fatalf("leader %v %v, want one", l, err)
	}
	select {
	case err := <-won:
		t.Fatalf("second candidate won while the first leads: %v", err)
	default:
	}
	if err := e1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	if l, err := e1.Leader(ctx); err != nil || string(l.Kvs[0].Value) != "two" {
		t.Fatalf("leader after resign %v %v, want two", l, err)
	}
}

// TestEmbeddedClientAfterStop: once the server stops, the in-process client's requests
// fail instead of waiting for it, its open watch ends when it closes, Client refuses a
// stopped server, and after a Restart a new in-process client reads what was written
// before.
func TestEmbeddedClientAfterStop(t *testing.T) {
	e, err := StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Etcd().Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	wch := c.Etcd().Watch(context.WithoutCancel(ctx), "k")
	e.Close()
	if _, err := e.Client(); !errors.Is(err, ErrEmbedded) {
		t.Fatalf("Client of a stopped server: %v, want ErrEmbedded", err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = c.Etcd().Put(rctx, "k", "v2")
	rcancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put through a stopped server: %v, want an immediate etcd error", err)
	}
	t.Logf("put through a stopped server: %v", err)
	// A watch of the stopped server ends when the client closes.
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for range wch {
	}
	if err := e.Restart(); err != nil {
		t.Fatal(err)
	}
	c2, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if r, err := c2.Etcd().Get(ctx, "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: %v %v, want k=v", r, err)
	}
	if err := c2.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
