package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/store"
)

// LargeObjectSize is the size of the large conditional object the conformance suite
// writes: above the 16 MiB at which s3blob switches to a multipart upload, and above
// gcsblob's 16 MiB chunk (so GCS uses a resumable upload with more than one chunk).
const LargeObjectSize = 17<<20 + 12345

// Conformance runs the store contract (store.Store's doc comments) against stores
// from k.Open, which must return a fresh, empty store per call. Each check is a subtest.
// The large conditional object (LargeObjectSize bytes) is written only when
// k.LargeWritePath.
func Conformance(t *testing.T, k Kind) {
	open := k.Open
	t.Run("GetPutOverwrite", func(t *testing.T) { testGetPut(t, open(t)) })
	t.Run("GetRange", func(t *testing.T) { testGetRange(t, open(t)) })
	t.Run("Head", func(t *testing.T) { testHead(t, open(t)) })
	t.Run("List", func(t *testing.T) { testList(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("InvalidKeys", func(t *testing.T) { testInvalidKeys(t, open(t)) })
	t.Run("PutIfAbsentSequential", func(t *testing.T) { testPutIfAbsentSequential(t, open(t)) })
	t.Run("PutIfAbsentRace", func(t *testing.T) { testPutIfAbsentRace(t, open(t)) })
	if k.LargeWritePath {
		t.Run("LargeConditionalObject", func(t *testing.T) { testLargeConditional(t, open(t)) })
	}
	t.Run("Counters", func(t *testing.T) { testCounters(t, open(t)) })
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// RequireClass fails the test unless err is an *store.Error of class want (and of no
// other class) that names the store and key in its fields and message.
func RequireClass(t testing.TB, err, want error, s store.Store, key string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %v for key %q", want, key)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v: want class %v", err, want)
	}
	for _, c := range []error{store.ErrNotFound, store.ErrPreconditionFailed, store.ErrTransient,
		store.ErrPermanent, store.ErrOutcomeUnknown, store.ErrPreconditionsIgnored} {
		if c != want && errors.Is(err, c) {
			t.Fatalf("error %v: has class %v besides %v", err, c, want)
		}
	}
	var e *store.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *store.Error", err, err)
	}
	if e.Key != key || e.Store != s.URL() {
		t.Fatalf("error names key %q store %q, want %q %q", e.Key, e.Store, key, s.URL())
	}
	if msg := err.Error(); !strings.Contains(msg, strconv.Quote(key)) || !strings.Contains(msg, s.URL()) {
		t.Fatalf("error message %q does not name key %q and store %q", msg, key, s.URL())
	}
}

func mustPut(t testing.TB, s store.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctxT(t), key, data); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func mustGet(t testing.TB, s store.Store, key string) []byte {
	t.Helper()
	b, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return b
}

func testGetPut(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	_, err := s.Get(ctx, "t/missing")
	RequireClass(t, err, store.ErrNotFound, s, "t/missing")

	mustPut(t, s, "t/a", []byte("hello"))
	if got := mustGet(t, s, "t/a"); string(got) != "hello" {
		t.Fatalf("get = %q, want hello", got)
	}
	mustPut(t, s, "t/a", []byte("replaced, longer"))
	if got := mustGet(t, s, "t/a"); string(got) != "replaced, longer" {
		t.Fatalf("after overwrite get = %q", got)
	}
	mustPut(t, s, "t/empty", nil)
	if got := mustGet(t, s, "t/empty"); len(got) != 0 {
		t.Fatalf("empty object read back as %d bytes", len(got))
	}
	// A key nested under a deep path.
	mustPut(t, s, "t/deep/er/still/x.arrow", []byte{0, 1, 2})
	if got := mustGet(t, s, "t/deep/er/still/x.arrow"); !bytes.Equal(got, []byte{0, 1, 2}) {
		t.Fatalf("deep get = %v", got)
	}
}

func testGetRange(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	data := []byte("0123456789")
	mustPut(t, s, "r/obj", data)
	cases := []struct {
		off, n int64
		want   string
	}{
		{0, 4, "0123"},
		{3, 4, "3456"},
		{6, 100, "6789"}, // runs past the end: cut short
		{9, 1, "9"},
		{10, 5, ""}, // offset at the end
		{25, 5, ""}, // offset past the end
		{4, -1, "456789"},
		{0, -1, "0123456789"},
		{10, -1, ""},
		{2, 0, ""},
	}
	for _, c := range cases {
		got, err := s.GetRange(ctx, "r/obj", c.off, c.n)
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
		}
		if string(got) != c.want {
			t.Fatalf("GetRange(%d, %d) = %q, want %q", c.off, c.n, got, c.want)
		}
	}
	_, err := s.GetRange(ctx, "r/missing", 0, 4)
	RequireClass(t, err, store.ErrNotFound, s, "r/missing")
	_, err = s.GetRange(ctx, "r/obj", -1, 4)
	RequireClass(t, err, store.ErrPermanent, s, "r/obj")
}

func testHead(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	before := time.Now().Add(-time.Minute)
	mustPut(t, s, "h/obj", make([]byte, 1234))
	info, err := s.Head(ctx, "h/obj")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "h/obj" || info.Size != 1234 {
		t.Fatalf("head = %+v, want key h/obj size 1234", info)
	}
	if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
		t.Fatalf("head mod time %v is not about now", info.ModTime)
	}
	_, err = s.Head(ctx, "h/missing")
	RequireClass(t, err, store.ErrNotFound, s, "h/missing")
	// A "directory" of other keys is not an object.
	mustPut(t, s, "h/dir/child", []byte("x"))
	_, err = s.Head(ctx, "h/dir")
	RequireClass(t, err, store.ErrNotFound, s, "h/dir")
}

func testList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Keys chosen so that byte order differs from a per-directory walk order:
	// '-' (0x2d) and '.' (0x2e) sort before '/' (0x2f), '0' (0x30) after it.
	keys := []string{"l/a-c", "l/a/b", "l/a/a/z", "l/a.b", "l/a0", "l/b", "l/_versions/00000000000000000007.manifest",
		"l/_versions/00000000000000000003.manifest", "m/other", "l/a/c"}
	for _, i := range rand.Perm(len(keys)) {
		mustPut(t, s, keys[i], []byte(keys[i]))
	}
	keysOf := func(objs []store.ObjectInfo) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.Key)
		}
		return out
	}
	list := func(prefix string, limit int) []string {
		t.Helper()
		objs, err := s.List(ctx, prefix, limit)
		if err != nil {
			t.Fatalf("list %q %d: %v", prefix, limit, err)
		}
		for _, o := range objs {
			if o.Size != int64(len(o.Key)) {
				t.Fatalf("list %q: %s has size %d, want %d", prefix, o.Key, o.Size, len(o.Key))
			}
		}
		return keysOf(objs)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if got := list("", 0); !slices.Equal(got, want) {
		t.Fatalf("list all = %v, want %v", got, want)
	}
	lwant := want[:len(want)-1] // everything but m/other
	if got := list("l/", 0); !slices.Equal(got, lwant) {
		t.Fatalf("list l/ = %v, want %v", got, lwant)
	}
	if got := list("l/", 1); !slices.Equal(got, lwant[:1]) {
		t.Fatalf("list l/ limit 1 = %v, want %v", got, lwant[:1])
	}
	if got := list("l/", 3); !slices.Equal(got, lwant[:3]) {
		t.Fatalf("list l/ limit 3 = %v, want %v", got, lwant[:3])
	}
	if got := list("l/a", 0); !slices.Equal(got, []string{"l/a-c", "l/a.b", "l/a/a/z", "l/a/b", "l/a/c", "l/a0"}) {
		t.Fatalf("list l/a (partial segment) = %v", got)
	}
	if got := list("l/a/", 0); !slices.Equal(got, []string{"l/a/a/z", "l/a/b", "l/a/c"}) {
		t.Fatalf("list l/a/ = %v", got)
	}
	if got := list("l/_versions/", 1); !slices.Equal(got, []string{"l/_versions/00000000000000000003.manifest"}) {
		t.Fatalf("list l/_versions/ limit 1 = %v", got)
	}
	if got := list("l/zzz", 0); len(got) != 0 {
		t.Fatalf("list of a prefix with no objects = %v", got)
	}
	if got := list("nothing/here/", 5); len(got) != 0 {
		t.Fatalf("list of a missing directory = %v", got)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "d/obj", []byte("x"))
	if err := s.Delete(ctx, "d/obj"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx, "d/obj")
	RequireClass(t, err, store.ErrNotFound, s, "d/obj")
	if err := s.Delete(ctx, "d/obj"); err != nil {
		t.Fatalf("deleting a deleted object: %v", err)
	}
	if err := s.Delete(ctx, "d/never/existed"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	if objs, err := s.List(ctx, "d/", 0); err != nil || len(objs) != 0 {
		t.Fatalf("list after delete = %v, %v", objs, err)
	}
	// A deleted key can be created again with put-if-absent.
	if err := s.PutIfAbsent(ctx, "d/obj", []byte("again")); err != nil {
		t.Fatalf("put-if-absent after delete: %v", err)
	}
}

func testInvalidKeys(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, key := range []string{"", "/abs", "trailing/", "a//b", "a/../b", "./a", "a/.", "nul\x00", "bad\xffutf8"} {
		err := s.Put(ctx, key, []byte("x"))
		RequireClass(t, err, store.ErrPermanent, s, key)
		_, err = s.Get(ctx, key)
		RequireClass(t, err, store.ErrPermanent, s, key)
		err = s.PutIfAbsent(ctx, key, []byte("x"))
		RequireClass(t, err, store.ErrPermanent, s, key)
	}
}

func testPutIfAbsentSequential(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if err := s.PutIfAbsent(ctx, "p/k", []byte("first")); err != nil {
		t.Fatalf("first put-if-absent: %v", err)
	}
	err := s.PutIfAbsent(ctx, "p/k", []byte("second"))
	RequireClass(t, err, store.ErrPreconditionFailed, s, "p/k")
	// Same size, other bytes: decided by reading the object back.
	err = s.PutIfAbsent(ctx, "p/k", []byte("FIRST"))
	RequireClass(t, err, store.ErrPreconditionFailed, s, "p/k")
	if got := mustGet(t, s, "p/k"); string(got) != "first" {
		t.Fatalf("after lost put-if-absent the object is %q, want first", got)
	}
	// Idempotent: the bytes already stored count as success.
	if err := s.PutIfAbsent(ctx, "p/k", []byte("first")); err != nil {
		t.Fatalf("put-if-absent of the stored bytes: %v", err)
	}
	// An unconditional put over it, then put-if-absent still refuses other bytes.
	mustPut(t, s, "p/k", []byte("third"))
	err = s.PutIfAbsent(ctx, "p/k", []byte("first"))
	RequireClass(t, err, store.ErrPreconditionFailed, s, "p/k")
}

func testPutIfAbsentRace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const keys, racers = 50, 8
	type result struct {
		key    int
		racer  int
		err    error
		winner bool
	}
	results := make(chan result, keys*racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for k := range keys {
				err := s.PutIfAbsent(ctx, fmt.Sprintf("race/%03d", k), []byte(fmt.Sprintf("racer-%d-key-%d", r, k)))
				results <- result{key: k, racer: r, err: err, winner: err == nil}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	winners := map[int][]int{}
	for res := range results {
		switch {
		case res.winner:
			winners[res.key] = append(winners[res.key], res.racer)
		case !errors.Is(res.err, store.ErrPreconditionFailed):
			t.Errorf("key %d racer %d: %v, want success or ErrPreconditionFailed", res.key, res.racer, res.err)
		}
	}
	for k := range keys {
		w := winners[k]
		if len(w) != 1 {
			t.Errorf("key %d: %d winners %v, want exactly 1", k, len(w), w)
			continue
		}
		key := fmt.Sprintf("race/%03d", k)
		if got := string(mustGet(t, s, key)); got != fmt.Sprintf("racer-%d-key-%d", w[0], k) {
			t.Errorf("%s holds %q, but racer %d won", key, got, w[0])
		}
	}
}

func testLargeConditional(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a := RandomBytes(t, LargeObjectSize)
	b := bytes.Clone(a)
	b[len(b)/2] ^= 0xff // same size, one byte apart: only a full read-back tells them apart
	if err := s.PutIfAbsent(ctx, "big/obj", a); err != nil {
		t.Fatalf("large put-if-absent: %v", err)
	}
	err := s.PutIfAbsent(ctx, "big/obj", b)
	RequireClass(t, err, store.ErrPreconditionFailed, s, "big/obj")
	if got := mustGet(t, s, "big/obj"); !bytes.Equal(got, a) {
		t.Fatalf("the large object was overwritten by the losing put-if-absent")
	}
	// Two concurrent large writers: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, data := range [][]byte{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.PutIfAbsent(ctx, "big/raced", data)
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			if got := mustGet(t, s, "big/raced"); !bytes.Equal(got, [][]byte{a, b}[i]) {
				t.Fatalf("big/raced does not hold the winner's bytes")
			}
		case !errors.Is(err, store.ErrPreconditionFailed):
			t.Fatalf("large racer %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d large racers won, want 1 (%v)", won, errs)
	}
}

// requireDelta fails unless the requests made by f are exactly want (by op) and the bytes
// moved are as given (-1 = not checked).
func requireDelta(t testing.TB, s store.Store, what string, want map[store.Op]int64, read, written int64, f func()) {
	t.Helper()
	before := s.Counters().Snapshot()
	f()
	d := s.Counters().Snapshot().Sub(before)
	if len(d.ByOp) != len(want) {
		t.Fatalf("%s made requests %v, want %v", what, d, want)
	}
	for op, n := range want {
		if d.ByOp[op] != n {
			t.Fatalf("%s made requests %v, want %v", what, d, want)
		}
	}
	if read >= 0 && d.BytesRead != read {
		t.Fatalf("%s read %d bytes, want %d", what, d.BytesRead, read)
	}
	if written >= 0 && d.BytesWritten != written {
		t.Fatalf("%s wrote %d bytes, want %d", what, d.BytesWritten, written)
	}
}

func testCounters(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if r := s.Counters().Snapshot(); r.Total() != 0 || r.BytesRead != 0 || r.BytesWritten != 0 {
		t.Fatalf("a freshly opened store has counts %v (read %d, wrote %d), want none", r, r.BytesRead, r.BytesWritten)
	}
	data := []byte("0123456789")
	requireDelta(t, s, "put", map[store.Op]int64{store.OpPut: 1}, 0, 10, func() { mustPut(t, s, "c/a", data) })
	mustPut(t, s, "c/b", data)
	mustPut(t, s, "c/c", data)
	requireDelta(t, s, "get", map[store.Op]int64{store.OpGet: 1}, 10, 0, func() { mustGet(t, s, "c/a") })
	requireDelta(t, s, "get range", map[store.Op]int64{store.OpGetRange: 1}, 3, 0, func() {
		if _, err := s.GetRange(ctx, "c/a", 2, 3); err != nil {
			t.Fatal(err)
		}
	})
	requireDelta(t, s, "head", map[store.Op]int64{store.OpHead: 1}, 0, 0, func() {
		if _, err := s.Head(ctx, "c/a"); err != nil {
			t.Fatal(err)
		}
	})
	requireDelta(t, s, "list limit 1", map[store.Op]int64{store.OpList: 1}, 0, 0, func() {
		if objs, err := s.List(ctx, "c/", 1); err != nil || len(objs) != 1 || objs[0].Key != "c/a" {
			t.Fatalf("list c/ limit 1 = %v, %v", objs, err)
		}
	})
	requireDelta(t, s, "list all", map[store.Op]int64{store.OpList: 1}, 0, 0, func() {
		if objs, err := s.List(ctx, "c/", 0); err != nil || len(objs) != 3 {
			t.Fatalf("list c/ = %v, %v", objs, err)
		}
	})
	requireDelta(t, s, "get of a missing key", map[store.Op]int64{store.OpGet: 1}, 0, 0, func() {
		if _, err := s.Get(ctx, "c/missing"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get missing: %v", err)
		}
	})
	requireDelta(t, s, "winning put-if-absent", map[store.Op]int64{store.OpPutIfAbsent: 1}, 0, 10, func() {
		if err := s.PutIfAbsent(ctx, "c/p", data); err != nil {
			t.Fatal(err)
		}
	})
	requireDelta(t, s, "put-if-absent lost to a different size", map[store.Op]int64{store.OpPutIfAbsent: 1, store.OpHead: 1}, 0, 0, func() {
		if err := s.PutIfAbsent(ctx, "c/p", []byte("other")); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Fatalf("lost put-if-absent: %v", err)
		}
	})
	requireDelta(t, s, "delete", map[store.Op]int64{store.OpDelete: 1}, 0, 0, func() {
		if err := s.Delete(ctx, "c/p"); err != nil {
			t.Fatal(err)
		}
	})
}

// RandomBytes returns n pseudo-random bytes from a seed it logs (so a failure can be
// replayed).
func RandomBytes(t testing.TB, n int) []byte {
	t.Helper()
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], rand.Uint64())
	t.Logf("random bytes seed %x", seed[:8])
	b := make([]byte, n)
	rand.NewChaCha8(seed).Read(b)
	return b
}
