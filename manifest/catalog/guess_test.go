package catalog

import (
	"context"
	"errors"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// countingKV counts the etcd requests a catalog sends (a Txn counts once, reads or
// writes alike).
type countingKV struct {
	clientv3.KV
	mu   sync.Mutex
	txns int
	gets int
}

func (k *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.mu.Lock()
	k.gets++
	k.mu.Unlock()
	return k.KV.Get(ctx, key, opts...)
}

func (k *countingKV) Txn(ctx context.Context) clientv3.Txn {
	k.mu.Lock()
	k.txns++
	k.mu.Unlock()
	return k.KV.Txn(ctx)
}

func (k *countingKV) take() (txns, gets int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	txns, gets, k.txns, k.gets = k.txns, k.gets, 0, 0
	return txns, gets
}

// countedCatalog is a catalog under prefix whose etcd requests are counted: a separate
// Catalog value, as another process would have.
func countedCatalog(t *testing.T, prefix string) (*Catalog, *countingKV) {
	kv := &countingKV{KV: etcdCli.KV}
	cli := clientv3.NewCtxClient(context.Background())
	cli.Cluster, cli.KV, cli.Lease, cli.Watcher, cli.Auth, cli.Maintenance = etcdCli.Cluster, kv, etcdCli.Lease, etcdCli.Watcher, etcdCli.Auth, etcdCli.Maintenance
	return New(cli, prefix), kv
}

// TestPublishOneRoundTripWhenUncontended (issue 13): once a catalog has seen a table's
// pointer (a Get, or its own publish), a fast-forward that nobody raced is one etcd
// transaction (the guarded write) and no read; the first publish of a table it never saw
// reads first, as before. Prev is reported exactly either way.
func TestPublishOneRoundTripWhenUncontended(t *testing.T) {
	ctx := testCtx(t)
	c, kv := countedCatalog(t, newCatalog(t).prefix)
	if _, err := c.Advance(ctx, "t", ptr(1), false); err != nil {
		t.Fatal(err)
	}
	if txns, gets := kv.take(); txns != 2 || gets != 0 {
		t.Fatalf("first publish of an unseen table: %d txns, %d gets; want the read and the write", txns, gets)
	}
	for v := uint64(2); v <= 5; v++ {
		adv, err := c.Advance(ctx, "t", ptr(v), true)
		if err != nil {
			t.Fatal(err)
		}
		if adv.Now != ptr(v) || adv.Prev != v-1 {
			t.Fatalf("publish %d: %+v", v, adv)
		}
		if txns, gets := kv.take(); txns != 1 || gets != 0 {
			t.Fatalf("publish %d after our own: %d txns, %d gets; want one guarded write", v, txns, gets)
		}
	}
	// A fresh catalog that opened the table (Get) publishes in one round trip too.
	d, dkv := countedCatalog(t, c.prefix)
	if _, _, err := d.Get(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	dkv.take()
	if _, err := d.FastForwardExisting(ctx, "t", ptr(6)); err != nil {
		t.Fatal(err)
	}
	if txns, gets := dkv.take(); txns != 1 || gets != 0 {
		t.Fatalf("publish after Get: %d txns, %d gets", txns, gets)
	}
	if got, _, _ := c.Get(ctx, "t"); got != ptr(6) {
		t.Fatalf("pointer %+v, want version 6", got)
	}
}

// TestPublishStaleGuess: a catalog whose remembered pointer another process moved, deleted
// (a drop) or replaced (a new incarnation) decides on the pointer as it is: the guarded
// write fails its compare and nothing of the guess is published. Each case fails if the
// guess were trusted: the write would go through (moving a pointer backwards, re-creating
// a dropped table's pointer, overwriting a later incarnation) or a goal would be reported
// met that does not hold.
func TestPublishStaleGuess(t *testing.T) {
	ctx := testCtx(t)
	prefix := newCatalog(t).prefix
	a, akv := countedCatalog(t, prefix)
	b, _ := countedCatalog(t, prefix)

	if _, err := a.FastForward(ctx, "t", inc(3, "A", 1)); err != nil {
		t.Fatal(err)
	}
	// b moves the pointer to 7: a's guess (3) is stale. a publishing 5 finds 7: the goal
	// holds, Prev says 7, and the pointer stays at 7.
	if _, err := b.FastForward(ctx, "t", inc(7, "A", 1)); err != nil {
		t.Fatal(err)
	}
	akv.take()
	adv, err := a.Advance(ctx, "t", inc(5, "A", 1), true)
	if err != nil || adv.Now != inc(7, "A", 1) || adv.Prev != 7 {
		t.Fatalf("publish 5 over a pointer moved to 7: %+v %v", adv, err)
	}
	if txns, gets := akv.take(); txns != 1 || gets != 0 {
		// The failed write's Else branch returned the pointer as it is: nothing to read.
		t.Fatalf("a stale guess whose goal then holds: %d txns, %d gets; want the one failed write", txns, gets)
	}
	// a's guess is now 7 (the read). b moves it to 8; a publishing 9 writes over 8.
	if _, err := b.FastForward(ctx, "t", inc(8, "A", 1)); err != nil {
		t.Fatal(err)
	}
	if adv, err := a.Advance(ctx, "t", inc(9, "A", 1), true); err != nil || adv.Now != inc(9, "A", 1) || adv.Prev != 8 {
		t.Fatalf("publish 9 over 8 with a guess of 7: %+v %v", adv, err)
	}

	// b drops the table (removes A's pointer): a's guess says 9, but a fast-forward of an
	// existing pointer must not re-create it.
	if ok, err := b.DeleteDropped(ctx, "t", inc(10, "A", 1)); err != nil || !ok {
		t.Fatalf("drop: %v %v", ok, err)
	}
	if _, err := a.FastForwardExisting(ctx, "t", inc(11, "A", 1)); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("publish after a drop another catalog made: %v, want ErrNoPointer", err)
	}
	if _, _, err := b.Get(ctx, "t"); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("the dropped pointer came back: %v", err)
	}

	// b creates the table again (incarnation B at 12). a, remembering A's pointer at 9
	// from before, publishes A's version 13: refused, B's pointer untouched.
	if _, err := a.FastForward(ctx, "t", inc(9, "A", 1)); err != nil { // a's guess: A at 9 again
		t.Fatal(err)
	}
	if ok, err := b.DeleteDropped(ctx, "t", inc(11, "A", 1)); err != nil || !ok {
		t.Fatalf("second drop: %v %v", ok, err)
	}
	if _, err := b.FastForward(ctx, "t", inc(12, "B", 12)); err != nil {
		t.Fatal(err)
	}
	for _, u := range []Update{
		{Table: "t", Mode: FastForward, Pointer: inc(13, "A", 1)},
		{Table: "t", Mode: FastForwardExisting, Pointer: inc(13, "A", 1)},
		{Table: "t", Mode: CAS, Expected: 9, Pointer: inc(13, "A", 1)},
	} {
		err := a.PublishMany(ctx, []Update{u})
		if !errors.Is(err, ErrIncarnation) && !errors.Is(err, ErrConflict) {
			t.Fatalf("%v of the dropped incarnation over B's pointer: %v", u.Mode, err)
		}
		if got, _, _ := b.Get(ctx, "t"); got != inc(12, "B", 12) {
			t.Fatalf("%v moved B's pointer to %+v", u.Mode, got)
		}
	}

	// A compare-and-swap whose guess matches the expected version but whose pointer
	// moved on is a conflict, not a write.
	if _, _, err := a.Get(ctx, "t"); err != nil { // guess: B at 12
		t.Fatal(err)
	}
	if _, err := b.FastForward(ctx, "t", inc(14, "B", 12)); err != nil {
		t.Fatal(err)
	}
	var ce *ConflictError
	if err := a.CompareAndSwap(ctx, "t", 12, inc(15, "B", 12)); !errors.As(err, &ce) || ce.Current.Version != 14 {
		t.Fatalf("CAS from 12 after the pointer moved to 14: %v", err)
	}
	if got, _, _ := b.Get(ctx, "t"); got != inc(14, "B", 12) {
		t.Fatalf("pointer %+v, want B at 14", got)
	}
}
