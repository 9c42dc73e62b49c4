package coord

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// defaultSlowAfter is Config.SlowAfter's default.
const defaultSlowAfter = 10 * time.Second

// slowReporter says, through Config.Notify, what a request to etcd that has gone on for
// SlowAfter without an answer waits for: a server that accepts connections but does not
// answer (stopped with SIGSTOP, overloaded, partitioned) leaves the connection "ready",
// so the watcher alone would say nothing while a command waits for its deadline.
//
// It says so once per wait: while one notice is outstanding (a request it named has not
// finished), other requests that become slow are not named again. It never changes what
// a request returns.
type slowReporter struct {
	after  time.Duration
	notify func(string)
	where  func() string // the server the client uses, for the notice

	mu     sync.Mutex
	active int // slow requests of the current wait that have not finished
}

// watch starts timing one request (what: its kind and key, as the notice names it) and
// returns the function that ends it.
func (r *slowReporter) watch(what string) (done func()) {
	start := time.Now()
	var mu sync.Mutex
	finished, slow := false, false
	t := time.AfterFunc(r.after, func() {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		slow = true
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.active == 0 {
			r.notify(fmt.Sprintf("etcd: waiting for %s: no answer after %s (%s; Ctrl-C stops)",
				what, time.Since(start).Round(time.Second/10), r.where()))
		}
		r.active++
	})
	return func() {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		finished = true
		if slow {
			r.mu.Lock()
			r.active--
			r.mu.Unlock()
		}
	}
}

// wrap makes cli's key-value and lease requests report themselves to r when slow.
func (r *slowReporter) wrap(cli *clientv3.Client) {
	cli.KV = slowKV{KV: cli.KV, r: r}
	cli.Lease = slowLease{Lease: cli.Lease, r: r}
}

// slowKV is a clientv3.KV whose requests report to a slowReporter.
type slowKV struct {
	clientv3.KV
	r *slowReporter
}

func (k slowKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	defer k.r.watch(fmt.Sprintf("get %q", key))()
	return k.KV.Get(ctx, key, opts...)
}

func (k slowKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	defer k.r.watch(fmt.Sprintf("put %q", key))()
	return k.KV.Put(ctx, key, val, opts...)
}

func (k slowKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	defer k.r.watch(fmt.Sprintf("delete %q", key))()
	return k.KV.Delete(ctx, key, opts...)
}

func (k slowKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	defer k.r.watch(fmt.Sprintf("request on %q", op.KeyBytes()))()
	return k.KV.Do(ctx, op)
}

func (k slowKV) Txn(ctx context.Context) clientv3.Txn {
	return &slowTxn{Txn: k.KV.Txn(ctx), r: k.r}
}

// slowTxn is a clientv3.Txn whose Commit reports to a slowReporter, naming the first key
// the transaction compares or writes.
type slowTxn struct {
	clientv3.Txn
	r   *slowReporter
	key string
}

func (t *slowTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	for i := range cs {
		if t.key == "" {
			t.key = string(cs[i].KeyBytes())
		}
	}
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *slowTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		if t.key == "" {
			t.key = string(op.KeyBytes())
		}
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *slowTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *slowTxn) Commit() (*clientv3.TxnResponse, error) {
	defer t.r.watch(fmt.Sprintf("transaction on %q", t.key))()
	return t.Txn.Commit()
}

// slowLease is a clientv3.Lease whose one-shot requests report to a slowReporter.
type slowLease struct {
	clientv3.Lease
	r *slowReporter
}

func (l slowLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	defer l.r.watch(fmt.Sprintf("lease grant (%d s)", ttl))()
	return l.Lease.Grant(ctx, ttl)
}

func (l slowLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	defer l.r.watch(fmt.Sprintf("lease revoke (%x)", int64(id)))()
	return l.Lease.Revoke(ctx, id)
}

func (l slowLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	defer l.r.watch(fmt.Sprintf("lease keep-alive (%x)", int64(id)))()
	return l.Lease.KeepAliveOnce(ctx, id)
}
