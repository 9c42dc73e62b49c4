package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/internal/failpoint"
)

// ErrEtcdUnavailable is the default error of an etcd DropRequest or DropResponse rule:
// the gRPC Unavailable status clientv3 returns when the connection to etcd breaks (for
// instance while a request was in flight) and the caller's context is still live.
var ErrEtcdUnavailable = status.Error(codes.Unavailable, "connection to etcd closed")

// EtcdOp names a kind of etcd KV call a rule can select.
type EtcdOp string

const (
	EtcdGet    EtcdOp = "get"    // Get, and Do with a get op
	EtcdPut    EtcdOp = "put"    // Put, and Do with a put op
	EtcdDelete EtcdOp = "delete" // Delete, and Do with a delete op
	EtcdTxn    EtcdOp = "txn"    // Txn(...).Commit(), and Do with a txn op
)

// EtcdRule says which etcd KV calls to affect and how.
type EtcdRule struct {
	// Name labels the rule in Injection records (default "#<n>", n-th rule added).
	Name string
	// Ops selects calls by kind; empty selects every kind.
	Ops []EtcdOp
	// Key selects calls that name a matching key (same glob as Rule.Key). A txn names
	// every key in its compares and in its then and else ops; it is selected if any
	// matches. "" matches every call.
	Key string
	// WritesOnly selects only calls that can write: Put, Delete, and txns with a put or
	// delete op in either branch (the catalog reads through read-only txns, which this
	// skips).
	WritesOnly bool
	// Kind is what happens to a selected call: DropRequest (never sent), DropResponse
	// (applied by etcd, then reported as failed with Err), Delay, Hang (never sent; the
	// caller gets context.DeadlineExceeded or Canceled when its context ends) or
	// HangAfterSend (applied, then the same; the call is forwarded under the caller's
	// context, so that context's deadline must outlast the call for it to land).
	Kind Kind
	// Err is the error a DropRequest or DropResponse call returns (wrapped so that
	// errors.Is also matches ErrInjected). Default ErrEtcdUnavailable. Note that clientv3
	// returns context.DeadlineExceeded only once the caller's context has ended (else a
	// gRPC status): for a realistic timeout after the write landed use HangAfterSend with
	// a context deadline.
	Err error
	// Delay is how long a Delay rule waits before sending (required for Delay).
	Delay time.Duration
	// Times and Probability limit the rule as in Rule.
	Times       int
	Probability float64
}

// EtcdKV is a clientv3.KV that forwards to a client's original KV and injects faults by
// rule. WrapKV installs it into the client, so code holding the *clientv3.Client (the
// catalog, through cli.Get and cli.Txn) goes through it. Rules are consulted as in Store.
// A call whose context ends during a Delay, Hang or HangAfterSend returns the context's
// error, as clientv3 does (wrapped so errors.Is also matches ErrInjected). GetStream and
// Compact are forwarded unchanged. All methods are safe for concurrent use.
type EtcdKV struct {
	clientv3.KV // the original: methods not overridden below are forwarded unchanged
	cli         *clientv3.Client
	eng         *engine
	rules       []etcdRule // guarded by eng.mu
}

type etcdRule struct {
	EtcdRule
	h *Handle
}

var _ clientv3.KV = (*EtcdKV)(nil)

// WrapKV replaces cli.KV with an EtcdKV that forwards to the original and returns it (no rules
// yet). Call it before cli is shared with other goroutines: the field is replaced without
// synchronisation. seed seeds the random stream of Probability rules. Restore undoes it.
func WrapKV(cli *clientv3.Client, seed uint64) *EtcdKV {
	k := &EtcdKV{KV: cli.KV, cli: cli, eng: newEngine(seed)}
	cli.KV = k
	return k
}

// Restore puts the client's original KV back (same caveat as WrapKV).
func (k *EtcdKV) Restore() { k.cli.KV = k.KV }

// Seed returns the seed of the random stream.
func (k *EtcdKV) Seed() uint64 { return k.eng.seed }

// Add appends a rule and returns its handle. It panics on an invalid rule (unknown Kind,
// Delay without a positive Delay, Times < 0, Probability outside [0, 1]).
func (k *EtcdKV) Add(r EtcdRule) *Handle {
	switch r.Kind {
	case DropRequest, DropResponse, Hang, HangAfterSend:
	case Delay:
		if r.Delay <= 0 {
			panic(fmt.Sprintf("faults: etcd rule %q: Delay rule needs Delay > 0", r.Name))
		}
	default:
		panic(fmt.Sprintf("faults: etcd rule %q: unknown Kind %v", r.Name, r.Kind))
	}
	if r.Err == nil {
		r.Err = ErrEtcdUnavailable
	}
	h := k.eng.newHandle(r.Name, r.Times, r.Probability)
	k.eng.mu.Lock()
	defer k.eng.mu.Unlock()
	k.rules = append(k.rules, etcdRule{r, h})
	return h
}

// Clear removes every rule. Injections are kept.
func (k *EtcdKV) Clear() {
	k.eng.mu.Lock()
	defer k.eng.mu.Unlock()
	for _, r := range k.rules {
		r.h.removed = true
	}
	k.rules = nil
}

// Injections returns every injection so far, in order.
func (k *EtcdKV) Injections() []Injection { return k.eng.injections() }

// callInfo is what rules select etcd calls by.
type callInfo struct {
	op     EtcdOp
	keys   []string // every key the call names
	writes bool     // the call can write
}

func (k *EtcdKV) pick(c callInfo) *etcdRule {
	k.eng.mu.Lock()
	defer k.eng.mu.Unlock()
	for i := range k.rules {
		r := &k.rules[i]
		if (len(r.Ops) > 0 && !slices.Contains(r.Ops, c.op)) || (r.WritesOnly && !c.writes) {
			continue
		}
		if r.Key != "" && !slices.ContainsFunc(c.keys, func(key string) bool { return matchGlob(r.Key, key) }) {
			continue
		}
		if r.h.take(k.eng.rng) {
			return r
		}
	}
	return nil
}

// injectedEtcdError is an error made up for an etcd call: errors.Is matches the rule's Err
// and ErrInjected.
type injectedEtcdError struct {
	err    error
	detail string
}

func (e *injectedEtcdError) Error() string   { return fmt.Sprintf("%v (%s)", e.err, e.detail) }
func (e *injectedEtcdError) Unwrap() []error { return []error{e.err, ErrInjected} }

// do runs one call through the rules. call sends it to etcd.
func (k *EtcdKV) do(ctx context.Context, c callInfo, call func() error) error {
	r := k.pick(c)
	if r == nil {
		return call()
	}
	in := Injection{Rule: r.h.name, Kind: r.Kind, Op: string(c.op)}
	if len(c.keys) > 0 {
		in.Key = c.keys[0]
	}
	made := func(err error, what string) error {
		return &injectedEtcdError{err, fmt.Sprintf("injected by rule %s: etcd %s %s", r.h.name, c.op, what)}
	}
	forward := func() {
		in.Forwarded = true
		in.Result = call()
	}
	var err error
	switch r.Kind {
	case DropRequest:
		err = made(r.Err, "not sent")
	case DropResponse:
		forward()
		err = made(r.Err, "sent, response dropped")
	case Delay:
		if sleepCtx(ctx.Done(), r.Delay) {
			forward()
			err = in.Result
		} else {
			err = made(ctx.Err(), fmt.Sprintf("not sent: context ended during a %v delay", r.Delay))
		}
	case Hang:
		<-ctx.Done()
		err = made(ctx.Err(), "not sent, no answer")
	case HangAfterSend:
		forward()
		<-ctx.Done()
		err = made(ctx.Err(), "sent, no answer")
	}
	in.Returned = err
	k.eng.record(in)
	return err
}

func (k *EtcdKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (
	*clientv3.PutResponse, error) {
	var resp *clientv3.PutResponse
	err := k.do(ctx, callInfo{EtcdPut, []string{key}, true}, func() (err error) {
		resp, err = k.KV.Put(ctx, key, val, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (k *EtcdKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (
	*clientv3.GetResponse, error) {
	var resp *clientv3.GetResponse
	err := k.do(ctx, callInfo{EtcdGet, []string{key}, false}, func() (err error) {
		resp, err = k.KV.Get(ctx, key, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (k *EtcdKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (
	*clientv3.DeleteResponse, error) {
	var resp *clientv3.DeleteResponse
	err := k.do(ctx, callInfo{EtcdDelete, []string{key}, true}, func() (err error) {
		resp, err = k.KV.Delete(ctx, key, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (k *EtcdKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	var kind EtcdOp
	switch {
	case op.IsGet():
		kind = EtcdGet
	case op.IsPut():
		kind = EtcdPut
	case op.IsDelete():
		kind = EtcdDelete
	case op.IsTxn():
		kind = EtcdTxn
	default:
		return k.KV.Do(ctx, op)
	}
	c := callInfo{op: kind}
	c.keys, c.writes = opKeys(nil, false, op)
	var resp clientv3.OpResponse
	err := k.do(ctx, c, func() (err error) {
		resp, err = k.KV.Do(ctx, op)
		return err
	})
	if err != nil {
		return clientv3.OpResponse{}, err
	}
	return resp, nil
}

// Txn returns a transaction whose Commit goes through the rules.
func (k *EtcdKV) Txn(ctx context.Context) clientv3.Txn {
	return &txn{k: k, ctx: ctx, inner: k.KV.Txn(ctx)}
}

// txn collects the keys a transaction names, for rule matching at Commit.
type txn struct {
	k      *EtcdKV
	ctx    context.Context
	inner  clientv3.Txn
	mu     sync.Mutex
	keys   []string
	writes bool
}

func (t *txn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.mu.Lock()
	for _, c := range cs {
		t.keys = append(t.keys, string(c.KeyBytes()))
	}
	t.mu.Unlock()
	t.inner = t.inner.If(cs...)
	return t
}

func (t *txn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.mu.Lock()
	for _, op := range ops {
		t.keys, t.writes = opKeys(t.keys, t.writes, op)
	}
	t.mu.Unlock()
	t.inner = t.inner.Then(ops...)
	return t
}

func (t *txn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.mu.Lock()
	for _, op := range ops {
		t.keys, t.writes = opKeys(t.keys, t.writes, op)
	}
	t.mu.Unlock()
	t.inner = t.inner.Else(ops...)
	return t
}

func (t *txn) Commit() (*clientv3.TxnResponse, error) {
	t.mu.Lock()
	c := callInfo{EtcdTxn, slices.Clone(t.keys), t.writes}
	t.mu.Unlock()
	var resp *clientv3.TxnResponse
	err := t.k.do(t.ctx, c, func() (err error) {
		resp, err = t.inner.Commit()
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// opKeys appends the keys op names (recursing into a txn op) to keys, and reports
// whether op or an earlier one (writes) can write.
func opKeys(keys []string, writes bool, op clientv3.Op) ([]string, bool) {
	if op.IsTxn() {
		cmps, thens, elses := op.Txn()
		for _, c := range cmps {
			keys = append(keys, string(c.KeyBytes()))
		}
		for _, o := range append(thens, elses...) {
			keys, writes = opKeys(keys, writes, o)
		}
		return keys, writes
	}
	return append(keys, string(op.KeyBytes())), writes || op.IsPut() || op.IsDelete()
}

// RestartOptions say how long RestartEtcdAt keeps the server down.
type RestartOptions struct {
	// Down is the least time the server stays stopped.
	Down time.Duration
	// Hold, when not nil, keeps the server stopped until it is closed (and Down passed),
	// so a test can act while etcd is down.
	Hold <-chan struct{}
}

// EtcdRestart is an etcd restart armed at a failpoint seam by RestartEtcdAt.
type EtcdRestart struct {
	seam    string
	disable func()
	stopped chan struct{}
	done    chan struct{}
	err     error // of Restart; set before done is closed
}

// RestartEtcdAt arms a restart of the embedded server e at the failpoint seam: the first
// time the seam is hit, the hitting goroutine stops the server (coord.Embedded.Close) and
// continues at once, so the operation carries on against a stopped etcd; a background
// goroutine starts the server again on the same data directory and ports
// (coord.Embedded.Restart) after opts.Down and once opts.Hold is closed. Clients
// reconnect by themselves; requests sent meanwhile wait for the server (clientv3 waits for
// a connection by default) or fail when their context ends.
//
// To restart inline instead (the seam returns once etcd is back), enable
// failpoint.Call(func(context.Context) error { return e.Restart() }) at the seam.
// The seam's action is replaced; Cancel disarms it.
func RestartEtcdAt(e *coord.Embedded, seam string, opts RestartOptions) *EtcdRestart {
	r := &EtcdRestart{seam: seam, stopped: make(chan struct{}), done: make(chan struct{})}
	r.disable = failpoint.Enable(seam, failpoint.Call(func(context.Context) error {
		e.Close()
		close(r.stopped)
		go func() {
			defer close(r.done)
			time.Sleep(opts.Down)
			if opts.Hold != nil {
				<-opts.Hold
			}
			r.err = e.Restart()
		}()
		return nil
	}).Once())
	return r
}

// Stopped is closed once the seam was hit and the server stopped.
func (r *EtcdRestart) Stopped() <-chan struct{} { return r.stopped }

// Wait waits until the server has been started again and returns Restart's error, or
// ctx's error if ctx ends first (for instance because the seam was never hit).
func (r *EtcdRestart) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("faults: etcd restart at seam %s: %w", r.seam, context.Cause(ctx))
	}
}

// Cancel disarms the seam if it has not been hit yet; a restart already under way still
// completes.
func (r *EtcdRestart) Cancel() { r.disable() }
