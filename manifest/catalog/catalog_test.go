package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdCli is a client of one real embedded etcd shared by the tests; each test uses its
// own key prefix.
var etcdCli *clientv3.Client

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "catalog-etcd-")
	if err != nil {
		panic(err)
	}
	e, err := coord.StartEmbedded(dir)
	if err != nil {
		panic(err)
	}
	etcdCli, err = clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	etcdCli.Close()
	e.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

var prefixSeq atomic.Int64

// newCatalog returns a catalog under a prefix no other test (or -count repetition) uses.
func newCatalog(t *testing.T) *Catalog {
	return New(etcdCli, fmt.Sprintf("/test/%s/%d/", t.Name(), prefixSeq.Add(1)))
}

func ptr(v uint64) Pointer {
	return Pointer{Version: v, ManifestKey: fmt.Sprintf("t/_versions/%020d.manifest", ^uint64(0)-v), Checksum: uint32(v) * 2654435761}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPointerEncoding(t *testing.T) {
	p := ptr(7)
	b := p.Encode()
	if !strings.Contains(string(b), `"format":1`) {
		t.Fatalf("encoding %s lacks the format field", b)
	}
	got, err := DecodePointer(b)
	if err != nil || got != p {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, p)
	}
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{"format":2,"version":1,"manifest_key":"k","checksum":1}`, ErrNewerFormat},
		{`{"format":99}`, ErrNewerFormat},
		{`{"version":1,"manifest_key":"k"}`, ErrCorrupt},
		{`{"format":1,"version":0,"manifest_key":"k"}`, ErrCorrupt},
		{`{"format":1,"version":3,"manifest_key":""}`, ErrCorrupt},
		{`not json`, ErrCorrupt},
	} {
		if _, err := DecodePointer([]byte(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("DecodePointer(%s) = %v, want %v", tc.in, err, tc.want)
		}
	}
}

func TestGetAndDelete(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	if _, _, err := c.Get(ctx, "t"); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("Get of absent table: %v, want ErrNoPointer", err)
	}
	if err := c.CompareAndSwap(ctx, "t", 0, ptr(1)); err != nil {
		t.Fatal(err)
	}
	p, rev, err := c.Get(ctx, "t")
	if err != nil || p != ptr(1) || rev == 0 {
		t.Fatalf("Get = %+v, %d, %v; want %+v at a nonzero revision", p, rev, err, ptr(1))
	}
	if err := c.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, "t"); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("Get after Delete: %v, want ErrNoPointer", err)
	}
	if err := c.Delete(ctx, "t"); err != nil {
		t.Fatalf("Delete of absent table: %v, want nil", err)
	}
}

func TestFastForwardAlreadyAheadWritesNothing(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	if got, err := c.FastForward(ctx, "t", ptr(5)); err != nil || got != ptr(5) {
		t.Fatalf("FastForward onto absent pointer: %+v %v", got, err)
	}
	_, rev0, _ := c.Get(ctx, "t")
	for _, v := range []uint64{3, 5} {
		got, err := c.FastForward(ctx, "t", ptr(v))
		if err != nil || got != ptr(5) {
			t.Fatalf("FastForward(%d) with pointer at 5: %+v %v, want success with version 5", v, got, err)
		}
	}
	p, rev, _ := c.Get(ctx, "t")
	if p != ptr(5) || rev != rev0 {
		t.Fatalf("pointer %+v rev %d after no-op fast-forwards, want version 5 rev %d (no write)", p, rev, rev0)
	}
	// Our version published under another manifest: reported, not overwritten.
	other := ptr(5)
	other.ManifestKey = "t/_versions/other.manifest"
	if _, err := c.FastForward(ctx, "t", other); !errors.Is(err, ErrDiverged) {
		t.Fatalf("FastForward of a diverged pointer: %v, want ErrDiverged", err)
	}
	if got, err := c.FastForward(ctx, "t", ptr(6)); err != nil || got != ptr(6) {
		t.Fatalf("FastForward(6): %+v %v", got, err)
	}
}

// 8 goroutines fast-forward versions 1..8 at once: all succeed, the pointer ends at 8, and
// a watcher sees it only ever rise (invariant 2).
func TestFastForwardConcurrentMonotonic(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	const n = 8
	for round := 0; round < 5; round++ {
		table := fmt.Sprintf("t%d", round)
		start, err := etcdCli.Get(ctx, c.Key(table))
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		wch := etcdCli.Watch(wctx, c.Key(table), clientv3.WithRev(start.Header.Revision+1))

		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				v := uint64(i + 1)
				got, err := c.FastForward(ctx, table, ptr(v))
				if err == nil && got.Version < v {
					err = fmt.Errorf("FastForward(%d) reported success at version %d", v, got.Version)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d racer %d: %v", round, i+1, err)
			}
		}
		if p, _, err := c.Get(ctx, table); err != nil || p != ptr(n) {
			t.Fatalf("round %d: final pointer %+v %v, want version %d", round, p, err, n)
		}
		var seen []uint64
	watch:
		for resp := range wch {
			if err := resp.Err(); err != nil {
				t.Fatal(err)
			}
			for _, ev := range resp.Events {
				p, err := DecodePointer(ev.Kv.Value)
				if err != nil {
					t.Fatal(err)
				}
				if len(seen) > 0 && p.Version <= seen[len(seen)-1] {
					t.Fatalf("round %d: watcher saw versions %v then %d: pointer did not rise", round, seen, p.Version)
				}
				seen = append(seen, p.Version)
				if p.Version == n {
					break watch
				}
			}
		}
		wcancel()
		t.Logf("round %d: writes observed %v", round, seen)
	}
}

// 8 racers compare-and-swap from the same expected version: exactly one wins; the others
// get a *ConflictError naming the winner's pointer.
func TestCompareAndSwapOneWinner(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	for _, expected := range []uint64{0, 1, 9} {
		table := fmt.Sprintf("t-from-%d", expected)
		if expected > 0 {
			if err := c.CompareAndSwap(ctx, table, 0, ptr(expected)); err != nil {
				t.Fatal(err)
			}
		}
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = c.CompareAndSwap(ctx, table, expected, ptr(expected+1+uint64(i))) })
		}
		wg.Wait()
		final, _, err := c.Get(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		winners := 0
		for i, err := range errs {
			if err == nil {
				winners++
				if final != ptr(expected+1+uint64(i)) {
					t.Fatalf("racer %d won but pointer is %+v", i, final)
				}
				continue
			}
			var ce *ConflictError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
				t.Fatalf("racer %d: %v, want *ConflictError", i, err)
			}
			if ce.Table != table || ce.Expected != expected || ce.Current != final {
				t.Fatalf("racer %d: conflict %+v, want expected %d current %+v", i, ce, expected, final)
			}
		}
		if winners != 1 {
			t.Fatalf("expected=%d: %d winners, want exactly 1 (errors %v)", expected, winners, errs)
		}
	}
}

func TestCompareAndSwapRules(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	if err := c.CompareAndSwap(ctx, "t", 0, ptr(3)); err != nil {
		t.Fatal(err)
	}
	// Backwards or standing still is refused before any I/O.
	for _, v := range []uint64{2, 3} {
		if err := c.CompareAndSwap(ctx, "t", 3, ptr(v)); !errors.Is(err, ErrBackwards) {
			t.Fatalf("CAS 3 -> %d: %v, want ErrBackwards", v, err)
		}
	}
	// Expected absent, but present.
	if err := c.CompareAndSwap(ctx, "t", 0, ptr(4)); !errors.Is(err, ErrConflict) {
		t.Fatalf("CAS from absent onto a present pointer: %v, want ErrConflict", err)
	}
	// Expected present, but absent.
	var ce *ConflictError
	if err := c.CompareAndSwap(ctx, "u", 2, ptr(4)); !errors.As(err, &ce) || ce.Current.Version != 0 {
		t.Fatalf("CAS onto an absent pointer: %v, want conflict with current version 0", err)
	}
	// A retried CAS whose first attempt landed succeeds (invariant 4) without writing.
	if err := c.CompareAndSwap(ctx, "t", 3, ptr(4)); err != nil {
		t.Fatal(err)
	}
	_, rev, _ := c.Get(ctx, "t")
	if err := c.CompareAndSwap(ctx, "t", 3, ptr(4)); err != nil {
		t.Fatalf("retried CAS: %v, want success", err)
	}
	if _, rev2, _ := c.Get(ctx, "t"); rev2 != rev {
		t.Fatalf("retried CAS rewrote the pointer (rev %d -> %d)", rev, rev2)
	}
	if err := c.CompareAndSwap(ctx, "t", 0, Pointer{Version: 9}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("pointer without manifest key: %v, want ErrInvalid", err)
	}
}

func TestNewerFormatRefused(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	newer := `{"format":2,"version":1,"manifest_key":"k","checksum":0}`
	if _, err := etcdCli.Put(ctx, c.Key("t"), newer); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		var ce *Error
		if !errors.Is(err, ErrNewerFormat) || !errors.As(err, &ce) || ce.Key != c.Key("t") || !strings.Contains(err.Error(), c.Key("t")) {
			t.Fatalf("%s: %v, want ErrNewerFormat naming key %s", what, err, c.Key("t"))
		}
	}
	_, _, err := c.Get(ctx, "t")
	check("Get", err)
	_, err = c.FastForward(ctx, "t", ptr(5))
	check("FastForward", err)
	check("CompareAndSwap", c.CompareAndSwap(ctx, "t", 1, ptr(5)))
	check("PublishMany", c.PublishMany(ctx, []Update{{Table: "t", Mode: FastForward, Pointer: ptr(5)}}))
	_, _, err = c.Snapshot(ctx, nil)
	check("Snapshot(all)", err)
	_, _, err = c.Snapshot(ctx, []string{"t"})
	check("Snapshot(t)", err)
	r, err := etcdCli.Get(ctx, c.Key("t"))
	if err != nil || string(r.Kvs[0].Value) != newer {
		t.Fatalf("newer-format pointer was overwritten: %v %v", r, err)
	}
}

func TestPublishManyAllOrNothing(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	if err := c.PublishMany(ctx, []Update{
		{Table: "a", Mode: CAS, Expected: 0, Pointer: ptr(3)},
		{Table: "b", Mode: FastForward, Pointer: ptr(1)},
	}); err != nil {
		t.Fatal(err)
	}
	// b's CAS conflicts: a's CAS must not land either.
	err := c.PublishMany(ctx, []Update{
		{Table: "a", Mode: CAS, Expected: 3, Pointer: ptr(4)},
		{Table: "b", Mode: CAS, Expected: 2, Pointer: ptr(5)},
	})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Table != "b" || ce.Current != ptr(1) {
		t.Fatalf("PublishMany with a stale CAS: %v, want conflict on b at version 1", err)
	}
	snap, _, err := c.Snapshot(ctx, []string{"a", "b", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if snap["a"] != ptr(3) || snap["b"] != ptr(1) || len(snap) != 2 {
		t.Fatalf("after a failed PublishMany: %+v, want a@3 b@1 and no entry for missing", snap)
	}
	// A fast-forward entry already met is skipped; the rest publishes.
	if err := c.PublishMany(ctx, []Update{
		{Table: "a", Mode: FastForward, Pointer: ptr(2)},
		{Table: "b", Mode: CAS, Expected: 1, Pointer: ptr(2)},
	}); err != nil {
		t.Fatal(err)
	}
	snap, _, _ = c.Snapshot(ctx, nil)
	if snap["a"] != ptr(3) || snap["b"] != ptr(2) || len(snap) != 2 {
		t.Fatalf("after PublishMany: %+v, want a@3 b@2", snap)
	}
	for _, bad := range [][]Update{
		nil,
		{{Table: "a", Mode: CAS, Expected: 3, Pointer: ptr(2)}},
		{{Table: "a", Mode: FastForward, Pointer: ptr(7)}, {Table: "a", Mode: FastForward, Pointer: ptr(8)}},
		{{Table: "a", Mode: 0, Pointer: ptr(7)}},
		{{Table: "", Mode: FastForward, Pointer: ptr(7)}},
	} {
		if err := c.PublishMany(ctx, bad); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrBackwards) {
			t.Fatalf("PublishMany(%+v): %v, want ErrInvalid or ErrBackwards", bad, err)
		}
	}
	if snap2, _, _ := c.Snapshot(ctx, nil); snap2["a"] != ptr(3) || snap2["b"] != ptr(2) {
		t.Fatalf("refused publishes changed the catalog: %+v", snap2)
	}
}

// Publishes of several tables at once race snapshots: every snapshot sees all tables at
// one version, never half of a publish.
func TestPublishManySnapshotAtomic(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	tables := []string{"t0", "t1", "t2", "t3"}
	const publishes = 150
	done := make(chan struct{})
	var pubErr error
	go func() {
		defer close(done)
		for v := uint64(1); v <= publishes; v++ {
			us := make([]Update, len(tables))
			for i, tb := range tables {
				if i%2 == 0 {
					us[i] = Update{Table: tb, Mode: FastForward, Pointer: ptr(v)}
				} else {
					us[i] = Update{Table: tb, Mode: CAS, Expected: v - 1, Pointer: ptr(v)}
				}
			}
			if err := c.PublishMany(ctx, us); err != nil {
				pubErr = err
				return
			}
		}
	}()
	snaps := 0
	distinct := map[uint64]bool{}
	check := func(snap map[string]Pointer, rev int64) {
		t.Helper()
		snaps++
		if len(snap) == 0 {
			return
		}
		v := snap[tables[0]].Version
		distinct[v] = true
		for _, tb := range tables {
			if snap[tb] != ptr(v) {
				t.Fatalf("snapshot at revision %d saw half a publish: %+v", rev, snap)
			}
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		for _, sel := range [][]string{nil, tables} {
			snap, rev, err := c.Snapshot(ctx, sel)
			if err != nil {
				t.Fatal(err)
			}
			check(snap, rev)
		}
	}
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	snap, _, _ := c.Snapshot(ctx, tables)
	if snap[tables[0]].Version != publishes {
		t.Fatalf("final snapshot %+v, want version %d", snap, publishes)
	}
	t.Logf("%d snapshots saw %d distinct versions during %d publishes", snaps, len(distinct), publishes)
}

// Snapshot of more tables than fit one read transaction still reads one revision.
func TestSnapshotManyTables(t *testing.T) {
	c, ctx := newCatalog(t), testCtx(t)
	var names []string
	for i := 0; i < 250; i++ {
		names = append(names, fmt.Sprintf("t%03d", i))
	}
	for start := 0; start < len(names); start += MaxPublishMany {
		var us []Update
		for _, n := range names[start:min(start+MaxPublishMany, len(names))] {
			us = append(us, Update{Table: n, Mode: FastForward, Pointer: ptr(1)})
		}
		if err := c.PublishMany(ctx, us); err != nil {
			t.Fatal(err)
		}
	}
	snap, rev, err := c.Snapshot(ctx, names)
	if err != nil || len(snap) != len(names) {
		t.Fatalf("Snapshot: %d pointers, %v; want %d", len(snap), err, len(names))
	}
	// Move the last table on; a snapshot pinned at rev still sees it at 1.
	if _, err := c.FastForward(ctx, names[len(names)-1], ptr(2)); err != nil {
		t.Fatal(err)
	}
	states, _, err := c.read(ctx, names[len(names)-1:], rev)
	if err != nil || states[0].ptr != ptr(1) {
		t.Fatalf("read at revision %d: %+v %v, want version 1", rev, states, err)
	}
	all, _, err := c.Snapshot(ctx, nil)
	if err != nil || len(all) != len(names) || all[names[len(names)-1]] != ptr(2) {
		t.Fatalf("Snapshot(nil): %d pointers, %v", len(all), err)
	}
}

// etcd restarts while publishes run: every publish still succeeds (an unknown outcome is
// decided by re-reading the pointer), and the pointer ends at the last version.
func TestPublishAcrossEtcdRestart(t *testing.T) {
	e, err := coord.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, ctx := New(cli, "/restart"), testCtx(t)

	const last = 60
	progress := make(chan uint64, last)
	errc := make(chan error, 1)
	go func() {
		for v := uint64(1); v <= last; v++ {
			var err error
			if v%2 == 0 {
				_, err = c.FastForward(ctx, "t", ptr(v))
			} else {
				err = c.CompareAndSwap(ctx, "t", v-1, ptr(v))
			}
			if err != nil {
				errc <- fmt.Errorf("publish %d: %w", v, err)
				return
			}
			progress <- v
		}
		errc <- nil
	}()
	restarts := 0
	for v := range progress {
		if (v == 10 || v == 30) && restarts < 2 {
			start := time.Now()
			if err := e.Restart(); err != nil {
				t.Fatal(err)
			}
			restarts++
			t.Logf("restart after version %d took %v", v, time.Since(start))
		}
		if v == last {
			break
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if p, _, err := c.Get(ctx, "t"); err != nil || p != ptr(last) {
		t.Fatalf("final pointer %+v %v, want version %d", p, err, last)
	}
}
