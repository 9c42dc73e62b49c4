package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/faults"
)

// sharedEtcd is one embedded etcd for the KV tests (each test uses its own key prefix and
// its own clients); the restart tests start their own.
var (
	etcdOnce sync.Once
	etcdSrv  *coord.Embedded
	etcdErr  error
	etcdDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if etcdSrv != nil {
		etcdSrv.Close()
		os.RemoveAll(etcdDir)
	}
	os.Exit(code)
}

func sharedEndpoints(t *testing.T) []string {
	etcdOnce.Do(func() {
		if etcdDir, etcdErr = os.MkdirTemp("", "faults-etcd-"); etcdErr == nil {
			etcdSrv, etcdErr = coord.StartEmbedded(etcdDir)
		}
	})
	if etcdErr != nil {
		t.Fatal(etcdErr)
	}
	return etcdSrv.Endpoints()
}

func newClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var prefixSeq atomic.Int64

// wrapped returns a client whose KV goes through a fresh EtcdKV, a plain client of the
// same server to check what landed, and a key prefix no other test (or run, with -count)
// uses.
func wrapped(t *testing.T) (*clientv3.Client, *faults.EtcdKV, *clientv3.Client, string) {
	eps := sharedEndpoints(t)
	cli := newClient(t, eps)
	return cli, faults.WrapKV(cli, 0), newClient(t, eps), fmt.Sprintf("/%s-%d/", t.Name(), prefixSeq.Add(1))
}

// value returns the key's value as the plain client reads it ("" and false when absent).
func value(t *testing.T, plain *clientv3.Client, key string) (string, bool) {
	t.Helper()
	r, err := plain.Get(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return "", false
	}
	return string(r.Kvs[0].Value), true
}

func createIfAbsent(cli *clientv3.Client, ctx context.Context, key, val string) (*clientv3.TxnResponse, error) {
	return cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).Else(clientv3.OpGet(key)).Commit()
}

func requireEtcdInjected(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("error %v: want %v and faults.ErrInjected", err, want)
	}
}

// TestEtcdTxnResponseDropped: the txn is applied, the caller hears a deadline error, and
// its retry finds the compare failing because its own write landed.
func TestEtcdTxnResponseDropped(t *testing.T) {
	cli, kv, plain, p := wrapped(t)
	ctx := ctxT(t)
	key := p + "tables/t"
	h := kv.Add(faults.EtcdRule{Ops: []faults.EtcdOp{faults.EtcdTxn}, Key: p + "*",
		Kind: faults.DropResponse, Times: 1})
	_, err := createIfAbsent(cli, ctx, key, "v1")
	requireEtcdInjected(t, err, faults.ErrEtcdUnavailable)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("error %v: gRPC code %v, want Unavailable (what clientv3 returns on a broken connection)", err, status.Code(err))
	}
	if v, ok := value(t, plain, key); !ok || v != "v1" {
		t.Fatalf("txn whose response was dropped: key = %q (present %v), want v1 applied", v, ok)
	}
	r, err := createIfAbsent(cli, ctx, key, "v1")
	if err != nil || r.Succeeded {
		t.Fatalf("retry = %+v, %v; want a failed compare (our own write is there)", r, err)
	}
	in := kv.Injections()
	if h.Injected() != 1 || len(in) != 1 || !in[0].Forwarded || in[0].Result != nil || in[0].Key != key || in[0].Op != "txn" {
		t.Fatalf("Injected %d, log %+v; want one forwarded, applied txn on %s", h.Injected(), in, key)
	}
}

// TestEtcdRequestDropped: a put fails before it is sent, N times, and nothing lands.
func TestEtcdRequestDropped(t *testing.T) {
	cli, kv, plain, p := wrapped(t)
	ctx := ctxT(t)
	key := p + "k"
	errLost := errors.New("connection reset")
	h := kv.Add(faults.EtcdRule{Ops: []faults.EtcdOp{faults.EtcdPut}, Kind: faults.DropRequest, Err: errLost, Times: 2})
	for i := range 2 {
		_, err := cli.Put(ctx, key, "v")
		requireEtcdInjected(t, err, errLost)
		if _, ok := value(t, plain, key); ok {
			t.Fatalf("dropped put %d landed", i+1)
		}
	}
	if _, err := cli.Get(ctx, key); err != nil { // not selected
		t.Fatalf("get: %v", err)
	}
	if _, err := cli.Put(ctx, key, "v"); err != nil {
		t.Fatalf("third put (budget spent): %v", err)
	}
	if v, ok := value(t, plain, key); !ok || v != "v" {
		t.Fatalf("third put: key = %q (present %v)", v, ok)
	}
	if h.Injected() != 2 {
		t.Fatalf("Injected = %d, want 2", h.Injected())
	}
}

// TestEtcdKeyAndDo: a rule's key glob selects by any key a call names (a txn's compares,
// then and else ops), and Do goes through the rules too.
func TestEtcdKeyAndDo(t *testing.T) {
	cli, kv, plain, p := wrapped(t)
	ctx := ctxT(t)
	kv.Add(faults.EtcdRule{Key: p + "sel/*", Kind: faults.DropRequest})
	if _, err := createIfAbsent(cli, ctx, p+"other/a", "v"); err != nil {
		t.Fatalf("txn on an unselected key: %v", err)
	}
	// Only the else branch names a selected key.
	_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(p+"other/a"), "=", 0)).
		Then(clientv3.OpPut(p+"other/b", "v")).Else(clientv3.OpGet(p + "sel/x")).Commit()
	requireEtcdInjected(t, err, faults.ErrEtcdUnavailable)
	_, err = cli.Do(ctx, clientv3.OpPut(p+"sel/y", "v"))
	requireEtcdInjected(t, err, faults.ErrEtcdUnavailable)
	if _, ok := value(t, plain, p+"sel/y"); ok {
		t.Fatal("dropped Do put landed")
	}
	if _, err := cli.Do(ctx, clientv3.OpPut(p+"other/c", "v")); err != nil {
		t.Fatalf("Do on an unselected key: %v", err)
	}
	_, err = cli.Delete(ctx, p+"sel/z")
	requireEtcdInjected(t, err, faults.ErrEtcdUnavailable)

	kv.Restore()
	if _, err := cli.Put(ctx, p+"sel/y", "v"); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	if n := len(kv.Injections()); n != 3 {
		t.Fatalf("%d injections, want 3", n)
	}
}

func TestEtcdDelayAndHang(t *testing.T) {
	cli, kv, plain, p := wrapped(t)
	ctx := ctxT(t)
	const d = 30 * time.Millisecond
	kv.Add(faults.EtcdRule{Ops: []faults.EtcdOp{faults.EtcdPut}, Kind: faults.Delay, Delay: d, Times: 1})
	kv.Add(faults.EtcdRule{Ops: []faults.EtcdOp{faults.EtcdGet}, Key: p + "hang/*", Kind: faults.Hang})
	start := time.Now()
	if _, err := cli.Put(ctx, p+"hang/k", "v"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < d {
		t.Fatalf("delayed put returned after %v, want at least %v", el, d)
	}
	if v, ok := value(t, plain, p+"hang/k"); !ok || v != "v" {
		t.Fatal("delayed put did not land")
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := cli.Get(tctx, p+"hang/k")
	requireEtcdInjected(t, err, context.DeadlineExceeded)
	if in := kv.Injections(); len(in) != 2 || !in[0].Forwarded || in[1].Forwarded {
		t.Fatalf("injections %+v: want a forwarded delay and an unforwarded hang", in)
	}
}

// TestEtcdWritesOnly: a WritesOnly rule skips reads and read-only txns (the catalog reads
// pointers through one) and takes the first txn that writes.
func TestEtcdWritesOnly(t *testing.T) {
	cli, kv, plain, p := wrapped(t)
	ctx := ctxT(t)
	h := kv.Add(faults.EtcdRule{WritesOnly: true, Kind: faults.DropRequest, Times: 1})
	if _, err := cli.Txn(ctx).Then(clientv3.OpGet(p+"wo/a"), clientv3.OpGet(p+"wo/b")).Commit(); err != nil {
		t.Fatalf("read-only txn: %v", err)
	}
	if _, err := cli.Get(ctx, p+"wo/a"); err != nil {
		t.Fatalf("get: %v", err)
	}
	_, err := createIfAbsent(cli, ctx, p+"wo/a", "v")
	requireEtcdInjected(t, err, faults.ErrEtcdUnavailable)
	if _, ok := value(t, plain, p+"wo/a"); ok || h.Injected() != 1 {
		t.Fatalf("writing txn: landed %v, Injected %d; want dropped once", ok, h.Injected())
	}
}

// TestEtcdHangAfterSend: the write lands and the caller's deadline passes with no answer,
// which is how a real timeout after send looks (context.DeadlineExceeded).
func TestEtcdHangAfterSend(t *testing.T) {
	cli, kv, plain, p := wrapped(t)
	kv.Add(faults.EtcdRule{Ops: []faults.EtcdOp{faults.EtcdTxn}, Kind: faults.HangAfterSend, Times: 1})
	// The forwarded txn runs under this context too, so the deadline must outlast the
	// txn itself (30 ms did not on a loaded 2-core machine: the txn never landed).
	tctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	defer cancel()
	_, err := createIfAbsent(cli, tctx, p+"hang-after/k", "v")
	requireEtcdInjected(t, err, context.DeadlineExceeded)
	if v, ok := value(t, plain, p+"hang-after/k"); !ok || v != "v" {
		t.Fatalf("txn that hung after send: landed %v (%q), want applied", ok, v)
	}
	if in := kv.Injections(); len(in) != 1 || !in[0].Forwarded || in[0].Result != nil {
		t.Fatalf("injections %+v, want one forwarded, applied txn", in)
	}
}

var seamMidPublish = failpoint.Seam("faults_test.mid_publish")

// TestRestartEtcdAtSeam stops etcd when an operation reaches a seam between its read and
// its compare-and-swap, holds it down while the test checks that it is down, then lets it
// start again: the operation's CAS, sent while etcd was down, completes afterwards and the
// data written before the restart survived it.
func TestRestartEtcdAtSeam(t *testing.T) {
	e, err := coord.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli := newClient(t, e.Endpoints())
	ctx := ctxT(t)
	const key = "/restart/tables/t"
	if _, err := cli.Put(ctx, key, "v1"); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var release sync.Once
	r := faults.RestartEtcdAt(e, seamMidPublish.Name(), faults.RestartOptions{Hold: hold})
	t.Cleanup(func() { // on an early failure: no restart left waiting on hold
		r.Cancel()
		release.Do(func() { close(hold) })
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Wait(wctx)
	})

	type result struct {
		resp *clientv3.TxnResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		g, err := cli.Get(ctx, key)
		if err != nil {
			done <- result{nil, err}
			return
		}
		if err := seamMidPublish.Inject(ctx); err != nil {
			done <- result{nil, err}
			return
		}
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", g.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, "v2")).Commit()
		done <- result{resp, err}
	}()

	select {
	case <-r.Stopped():
	case res := <-done:
		t.Fatalf("operation finished (%+v) without reaching the seam", res)
	case <-ctx.Done():
		t.Fatal("seam not reached")
	}
	// etcd is down: a read cannot complete.
	probe, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = newClient(t, e.Endpoints()).Get(probe, key)
	cancel()
	if err == nil {
		t.Fatal("etcd answered while stopped at the seam")
	}
	select {
	case res := <-done:
		t.Fatalf("CAS completed while etcd was down: %+v", res)
	default:
	}
	release.Do(func() { close(hold) })
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	res := <-done
	if res.err != nil || !res.resp.Succeeded {
		t.Fatalf("CAS across the restart = %+v; want it applied", res)
	}
	if v, _ := value(t, cli, key); v != "v2" {
		t.Fatalf("after the restart the key holds %q, want v2", v)
	}
	if failpoint.Hits(seamMidPublish.Name()) != 1 {
		t.Fatalf("seam hits = %d, want 1", failpoint.Hits(seamMidPublish.Name()))
	}
}

// TestRestartEtcdCancel: a cancelled restart never stops the server.
func TestRestartEtcdCancel(t *testing.T) {
	eps := sharedEndpoints(t)
	r := faults.RestartEtcdAt(etcdSrv, seamMidPublish.Name(), faults.RestartOptions{})
	r.Cancel()
	if err := seamMidPublish.Inject(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Stopped():
		t.Fatal("cancelled restart stopped the server")
	default:
	}
	if _, err := newClient(t, eps).Put(ctxT(t), "/cancel/k", "v"); err != nil {
		t.Fatalf("server after a cancelled restart: %v", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Wait(wctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a restart that never happened = %v, want context.Canceled", err)
	}
}
