package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// stores are the real stores every store fault runs against.
var stores = []storetest.Kind{
	{Name: "mem", Open: storetest.Mem},
	{Name: "local", Open: storetest.Local},
}

func eachStore(t *testing.T, f func(t *testing.T, fs *faults.Store)) {
	for _, k := range stores {
		t.Run(k.Name, func(t *testing.T) { f(t, faults.NewStore(k.Open(t), 0)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requireInjected fails unless err is an injected *store.Error of class want naming key.
func requireInjected(t *testing.T, err, want error, s store.Store, key string) {
	t.Helper()
	storetest.RequireClass(t, err, want, s, key)
	if !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("error %v does not wrap faults.ErrInjected", err)
	}
}

// landed reports whether the inner store holds exactly data at key (nil data: absent).
func landed(t *testing.T, fs *faults.Store, key string) []byte {
	t.Helper()
	got, err := fs.Inner().Get(context.Background(), key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("read back %s: %v", key, err)
	}
	return got
}

// TestTransparent: with no rules the wrapper passes the store conformance suite.
func TestTransparent(t *testing.T) {
	for _, k := range stores {
		t.Run(k.Name, func(t *testing.T) {
			storetest.Conformance(t, storetest.Kind{Name: k.Name, Open: func(t testing.TB) store.Store {
				return faults.NewStore(k.Open(t), 0)
			}})
		})
	}
}

func TestDropRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, fs *faults.Store) {
		ctx := ctxT(t)
		h := fs.Add(faults.Rule{Ops: []store.Op{store.OpPutIfAbsent}, Key: "*/_versions/*",
			Kind: faults.DropRequest, Class: store.ErrOutcomeUnknown, Times: 1})
		key := "t/_versions/00000000000000000001.manifest"
		before := fs.Counters().Snapshot()
		err := fs.PutIfAbsent(ctx, key, []byte("v1"))
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, key)
		if got := landed(t, fs, key); got != nil {
			t.Fatalf("dropped request landed: %q", got)
		}
		if n := fs.Counters().Snapshot().Sub(before).ByOp[store.OpPutIfAbsent]; n != 0 {
			t.Fatalf("dropped request reached the store (%d put_if_absent counted)", n)
		}
		// Budget spent: the retry goes through.
		if err := fs.PutIfAbsent(ctx, key, []byte("v1")); err != nil {
			t.Fatal(err)
		}
		if got := landed(t, fs, key); string(got) != "v1" {
			t.Fatalf("after the fault: stored %q, want v1", got)
		}
		if h.Injected() != 1 {
			t.Fatalf("Injected = %d, want 1", h.Injected())
		}
		in := fs.Injections()
		if len(in) != 1 || in[0].Forwarded || in[0].Kind != faults.DropRequest || in[0].Key != key || in[0].Rule != "#1" {
			t.Fatalf("Injections = %+v, want one unforwarded drop-request of %s", in, key)
		}
	})
}

// TestUnavailableNTimes: 503-like transient errors on the next N matching calls only.
func TestUnavailableNTimes(t *testing.T) {
	eachStore(t, func(t *testing.T, fs *faults.Store) {
		ctx := ctxT(t)
		if err := fs.Put(ctx, "t/data/a.arrow", []byte("a")); err != nil {
			t.Fatal(err)
		}
		if err := fs.Put(ctx, "t/other", []byte("o")); err != nil {
			t.Fatal(err)
		}
		h := fs.Add(faults.Rule{Name: "503", Ops: []store.Op{store.OpGet, store.OpGetRange},
			Key: "t/data/*", Kind: faults.DropRequest, Times: 2})
		// Not selected: another op, another key.
		if _, err := fs.Head(ctx, "t/data/a.arrow"); err != nil {
			t.Fatalf("head (not selected): %v", err)
		}
		if _, err := fs.Get(ctx, "t/other"); err != nil {
			t.Fatalf("get of another key (not selected): %v", err)
		}
		_, err := fs.Get(ctx, "t/data/a.arrow")
		requireInjected(t, err, store.ErrTransient, fs, "t/data/a.arrow")
		_, err = fs.GetRange(ctx, "t/data/a.arrow", 0, 1)
		requireInjected(t, err, store.ErrTransient, fs, "t/data/a.arrow")
		if got, err := fs.Get(ctx, "t/data/a.arrow"); err != nil || string(got) != "a" {
			t.Fatalf("third get = %q, %v; want the object (budget of 2 spent)", got, err)
		}
		if h.Injected() != 2 {
			t.Fatalf("Injected = %d, want 2", h.Injected())
		}
	})
}

func TestDropResponse(t *testing.T) {
	eachStore(t, func(t *testing.T, fs *faults.Store) {
		ctx := ctxT(t)
		fs.Add(faults.Rule{Kind: faults.DropResponse, Ops: []store.Op{store.OpPut, store.OpPutIfAbsent,
			store.OpDelete, store.OpGet, store.OpList}})

		// A write lands, and the caller hears "outcome unknown".
		err := fs.Put(ctx, "k/put", []byte("p"))
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, "k/put")
		if got := landed(t, fs, "k/put"); string(got) != "p" {
			t.Fatalf("put whose response was dropped: stored %q, want p", got)
		}
		err = fs.PutIfAbsent(ctx, "k/pia", []byte("mine"))
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, "k/pia")
		if got := landed(t, fs, "k/pia"); string(got) != "mine" {
			t.Fatalf("put-if-absent whose response was dropped: stored %q, want mine", got)
		}
		// A put-if-absent that loses is also hidden; the record says what the store answered.
		err = fs.PutIfAbsent(ctx, "k/pia", []byte("theirs"))
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, "k/pia")
		if got := landed(t, fs, "k/pia"); string(got) != "mine" {
			t.Fatalf("losing put-if-absent changed the object to %q", got)
		}
		err = fs.Delete(ctx, "k/put")
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, "k/put")
		if got := landed(t, fs, "k/put"); got != nil {
			t.Fatalf("delete whose response was dropped: object still there (%q)", got)
		}
		// Reads: the answer is lost, a transient failure.
		_, err = fs.Get(ctx, "k/pia")
		requireInjected(t, err, store.ErrTransient, fs, "k/pia")
		_, err = fs.List(ctx, "k/", 0)
		requireInjected(t, err, store.ErrTransient, fs, "k/")

		in := fs.Injections()
		if len(in) != 6 {
			t.Fatalf("%d injections, want 6: %+v", len(in), in)
		}
		for i, want := range []error{nil, nil, store.ErrPreconditionFailed, nil, nil, nil} {
			if !in[i].Forwarded || (want == nil) != (in[i].Result == nil) || (want != nil && !errors.Is(in[i].Result, want)) {
				t.Fatalf("injection %d = %+v, want forwarded with result %v", i, in[i], want)
			}
		}
	})
}

func TestDelay(t *testing.T) {
	eachStore(t, func(t *testing.T, fs *faults.Store) {
		ctx := ctxT(t)
		const d = 30 * time.Millisecond
		fs.Add(faults.Rule{Kind: faults.Delay, Delay: d, Ops: []store.Op{store.OpPut}, Times: 1})
		start := time.Now()
		if err := fs.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < d {
			t.Fatalf("delayed put returned after %v, want at least %v", el, d)
		}
		if got := landed(t, fs, "k"); string(got) != "v" {
			t.Fatalf("delayed put stored %q", got)
		}

		// The caller gives up during the delay: not forwarded, outcome unknown to it.
		fs.Add(faults.Rule{Kind: faults.Delay, Delay: time.Hour, Ops: []store.Op{store.OpPut}, Times: 1})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := fs.Put(cctx, "k2", []byte("v"))
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, "k2")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v does not wrap context.Canceled", err)
		}
		if got := landed(t, fs, "k2"); got != nil {
			t.Fatalf("put cancelled during its delay landed")
		}
	})
}

func TestHang(t *testing.T) {
	eachStore(t, func(t *testing.T, fs *faults.Store) {
		ctx := ctxT(t)
		fs.Add(faults.Rule{Kind: faults.Hang, Key: "slow/*"})
		tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		err := fs.PutIfAbsent(tctx, "slow/k", []byte("v"))
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, "slow/k")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v does not wrap context.DeadlineExceeded", err)
		}
		if got := landed(t, fs, "slow/k"); got != nil {
			t.Fatal("hung put landed")
		}
		_, err = fs.Head(tctx, "slow/k")
		requireInjected(t, err, store.ErrTransient, fs, "slow/k")
		// Other keys are not affected.
		if err := fs.Put(ctx, "fast", []byte("v")); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHangAfterSend: the write lands, then the caller's deadline passes with no answer.
func TestHangAfterSend(t *testing.T) {
	eachStore(t, func(t *testing.T, fs *faults.Store) {
		fs.Add(faults.Rule{Kind: faults.HangAfterSend, Ops: []store.Op{store.OpPutIfAbsent}})
		tctx, cancel := context.WithTimeout(ctxT(t), 20*time.Millisecond)
		defer cancel()
		err := fs.PutIfAbsent(tctx, "t/_versions/1", []byte("v"))
		requireInjected(t, err, store.ErrOutcomeUnknown, fs, "t/_versions/1")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v does not wrap context.DeadlineExceeded", err)
		}
		if got := landed(t, fs, "t/_versions/1"); string(got) != "v" {
			t.Fatalf("put-if-absent that hung after send: stored %q, want v", got)
		}
	})
}

// TestProbability: a probabilistic rule fails a seeded, replayable subset of calls.
func TestProbability(t *testing.T) {
	seed := faults.NewSeed(t)
	run := func(seed uint64) (pattern []bool, injected int) {
		fs := faults.NewStore(storetest.Mem(t), seed)
		h := fs.Add(faults.Rule{Kind: faults.DropRequest, Ops: []store.Op{store.OpPut}, Probability: 0.3})
		for i := range 300 {
			err := fs.Put(context.Background(), fmt.Sprintf("k/%d", i), []byte("v"))
			if err != nil && !errors.Is(err, faults.ErrInjected) {
				t.Fatal(err)
			}
			pattern = append(pattern, err != nil)
			if got := landed(t, fs, fmt.Sprintf("k/%d", i)); (got == nil) != (err != nil) {
				t.Fatalf("seed %d call %d: error %v but landed=%v", seed, i, err, got != nil)
			}
		}
		return pattern, h.Injected()
	}
	a, na := run(seed)
	b, nb := run(seed)
	if fmt.Sprint(a) != fmt.Sprint(b) || na != nb {
		t.Fatalf("seed %d: two runs injected different calls", seed)
	}
	// 300 draws at p=0.3: mean 90, sd ~7.9; outside [30, 150] is > 7 sd away.
	if na < 30 || na > 150 {
		t.Fatalf("seed %d: %d of 300 calls injected at p=0.3", seed, na)
	}
	c, _ := run(seed + 1)
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatalf("seeds %d and %d injected the same 300-call pattern", seed, seed+1)
	}
}

func TestRuleOrderRemoveClear(t *testing.T) {
	fs := faults.NewStore(storetest.Mem(t), 0)
	ctx := ctxT(t)
	first := fs.Add(faults.Rule{Name: "first", Kind: faults.DropRequest, Class: store.ErrPermanent, Times: 1})
	second := fs.Add(faults.Rule{Name: "second", Kind: faults.DropRequest, Class: store.ErrNotFound})
	_, err := fs.Head(ctx, "x")
	requireInjected(t, err, store.ErrPermanent, fs, "x")
	_, err = fs.Head(ctx, "x") // first's budget is spent: second takes it
	requireInjected(t, err, store.ErrNotFound, fs, "x")
	second.Remove()
	if err := fs.Put(ctx, "x", []byte("v")); err != nil {
		t.Fatalf("after Remove: %v", err)
	}
	fs.Add(faults.Rule{Kind: faults.DropRequest})
	fs.Clear()
	if _, err := fs.Get(ctx, "x"); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
	if first.Injected() != 1 || second.Injected() != 1 || len(fs.Injections()) != 2 {
		t.Fatalf("injected first=%d second=%d log=%d, want 1, 1, 2", first.Injected(), second.Injected(), len(fs.Injections()))
	}
}

func TestInvalidRulesPanic(t *testing.T) {
	fs := faults.NewStore(storetest.Mem(t), 0)
	for _, r := range []faults.Rule{
		{},
		{Kind: faults.DropRequest, Class: errors.New("not a class")},
		{Kind: faults.Delay},
		{Kind: faults.Hang, Times: -1},
		{Kind: faults.Hang, Probability: 1.5},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%+v) did not panic", r)
				}
			}()
			fs.Add(r)
		}()
	}
}

// TestConcurrentBudget: under concurrent calls (run with -race) a rule affects exactly
// Times calls, and exactly those calls' writes are reported unknown while landing.
func TestConcurrentBudget(t *testing.T) {
	fs := faults.NewStore(storetest.Mem(t), 0)
	ctx := ctxT(t)
	h := fs.Add(faults.Rule{Kind: faults.DropResponse, Ops: []store.Op{store.OpPutIfAbsent}, Times: 10})
	var wg sync.WaitGroup
	var mu sync.Mutex
	unknown := 0
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				key := fmt.Sprintf("k/%d-%d", g, i)
				err := fs.PutIfAbsent(ctx, key, []byte(key))
				if err != nil && !errors.Is(err, store.ErrOutcomeUnknown) {
					t.Error(err)
				}
				if got := landed(t, fs, key); !bytes.Equal(got, []byte(key)) {
					t.Errorf("%s not stored (error %v)", key, err)
				}
				if err != nil {
					mu.Lock()
					unknown++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if unknown != 10 || h.Injected() != 10 || len(fs.Injections()) != 10 {
		t.Fatalf("unknown outcomes %d, Injected %d, log %d; want 10 each", unknown, h.Injected(), len(fs.Injections()))
	}
}
