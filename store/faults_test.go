package store_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requireOps fails unless the requests since before are exactly want.
func requireOps(t *testing.T, s store.Store, before store.Requests, want map[store.Op]int64) {
	t.Helper()
	d := s.Counters().Snapshot().Sub(before)
	ok := len(d.ByOp) == len(want)
	for op, n := range want {
		ok = ok && d.ByOp[op] == n
	}
	if !ok {
		t.Fatalf("requests %v, want %v", d, want)
	}
}

// A ≥16 MiB conditional object goes multipart; the client sends If-None-Match on
// CompleteMultipartUpload and the server's refusal makes the losing write fail.
func TestS3LargeConditionalObjectIsMultipartAndGuarded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, storetest.FastOptions)
	a := storetest.RandomBytes(t, storetest.LargeObjectSize)
	b := bytes.Clone(a)
	b[0] ^= 1
	if err := s.PutIfAbsent(ctx, "big", a); err != nil {
		t.Fatal(err)
	}
	if c, r := srv.ConditionalCompletes(), srv.RefusedCompletes(); c != 1 || r != 0 {
		t.Fatalf("after the first large put-if-absent: %d conditional completes, %d refused; want 1, 0", c, r)
	}
	err := s.PutIfAbsent(ctx, "big", b)
	storetest.RequireClass(t, err, store.ErrPreconditionFailed, s, "big")
	if c, r := srv.ConditionalCompletes(), srv.RefusedCompletes(); c != 2 || r != 1 {
		t.Fatalf("after the losing large put-if-absent: %d conditional completes, %d refused; want 2, 1", c, r)
	}
	got, err := s.Get(ctx, "big")
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("large object changed by the losing write (err %v)", err)
	}
	// Below the threshold there is no multipart upload.
	if err := s.PutIfAbsent(ctx, "small", a[:1<<20]); err != nil {
		t.Fatal(err)
	}
	if c := srv.ConditionalCompletes(); c != 2 {
		t.Fatalf("a 1 MiB put-if-absent made a multipart completion (%d)", c)
	}
}

// Documents why the guard exists: gofakes3 alone ignores If-None-Match on
// CompleteMultipartUpload. If this starts failing, gofakes3 has fixed it and the guard
// can go.
func TestS3FakeWithoutGuardOverwritesLargeObjects(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{NoMultipartGuard: true})
	s := srv.Open(t, storetest.FastOptions)
	a := storetest.RandomBytes(t, storetest.LargeObjectSize)
	b := bytes.Clone(a)
	b[0] ^= 1
	if err := s.PutIfAbsent(ctx, "big", a); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "big", b); err != nil {
		t.Fatalf("unguarded gofakes3 refused a large conditional overwrite (%v): drop the guard?", err)
	}
	if got, _ := s.Get(ctx, "big"); !bytes.Equal(got, b) {
		t.Fatal("unguarded gofakes3 kept the first object")
	}
}

func TestS3TransientErrorsAreRetried(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, storetest.FastOptions)
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests} {
		srv.Faults.Clear()
		put := srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Times: 3, Status: status})
		get := srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3GetObject), Times: 2, Status: status})
		list := srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3ListObjects), Times: 1, Status: status})
		before := s.Counters().Snapshot()
		if err := s.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatalf("%d: put: %v", status, err)
		}
		if got, err := s.Get(ctx, "k"); err != nil || string(got) != "v" {
			t.Fatalf("%d: get = %q, %v", status, got, err)
		}
		if objs, err := s.List(ctx, "", 1); err != nil || len(objs) != 1 {
			t.Fatalf("%d: list = %v, %v", status, objs, err)
		}
		requireOps(t, s, before, map[store.Op]int64{store.OpPut: 4, store.OpGet: 3, store.OpList: 2})
		if put.Hits() != 3 || get.Hits() != 2 || list.Hits() != 1 {
			t.Fatalf("%d: fault hits put %d get %d list %d", status, put.Hits(), get.Hits(), list.Hits())
		}
	}
}

func TestS3TransientErrorsExhaustRetries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, store.Options{Retries: 3, BaseBackoff: time.Millisecond, SkipLargeProbe: true})
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3GetObject), Status: http.StatusServiceUnavailable})
	before := s.Counters().Snapshot()
	_, err := s.Get(ctx, "k")
	storetest.RequireClass(t, err, store.ErrTransient, s, "k")
	requireOps(t, s, before, map[store.Op]int64{store.OpGet: 4})
}

func TestS3PermanentErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, storetest.FastOptions)
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3GetObject), Status: http.StatusForbidden})
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Status: http.StatusBadRequest})
	before := s.Counters().Snapshot()
	_, err := s.Get(ctx, "k")
	storetest.RequireClass(t, err, store.ErrPermanent, s, "k")
	err = s.Put(ctx, "k", []byte("v"))
	storetest.RequireClass(t, err, store.ErrPermanent, s, "k")
	requireOps(t, s, before, map[store.Op]int64{store.OpGet: 1, store.OpPut: 1})
}

// The response to a put-if-absent that landed is lost; the retry finds the key taken and
// the read-back finds our bytes: success, not a false "lost".
func TestS3DroppedResponseAfterLandedPutIfAbsent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, storetest.FastOptions)
	drop := srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Times: 1, Drop: true})
	before := s.Counters().Snapshot()
	if err := s.PutIfAbsent(ctx, "commit", []byte("ours")); err != nil {
		t.Fatalf("put-if-absent whose response was dropped: %v", err)
	}
	if drop.Hits() != 1 {
		t.Fatalf("drop fault hit %d times", drop.Hits())
	}
	// attempt 1 landed (response dropped), attempt 2 got 412, then head + get decided.
	requireOps(t, s, before, map[store.Op]int64{store.OpPutIfAbsent: 2, store.OpHead: 1, store.OpGet: 1})
	// A competitor with other bytes still loses.
	err := s.PutIfAbsent(ctx, "commit", []byte("them"))
	storetest.RequireClass(t, err, store.ErrPreconditionFailed, s, "commit")
}

// The same with a competitor: our dropped attempt did not land because the key was
// already taken, so the read-back must report a loss, not a win.
func TestS3DroppedResponseOnLosingPutIfAbsent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, storetest.FastOptions)
	if err := s.PutIfAbsent(ctx, "commit", []byte("them")); err != nil {
		t.Fatal(err)
	}
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Times: 1, Drop: true})
	err := s.PutIfAbsent(ctx, "commit", []byte("ours"))
	storetest.RequireClass(t, err, store.ErrPreconditionFailed, s, "commit")
}

// A landed write whose response is lost, then 503s until the retries run out: the final
// read-back still decides it.
func TestS3DroppedThenUnavailableDecidedByReadBack(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, storetest.FastOptions)
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Times: 1, Drop: true})
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Status: http.StatusServiceUnavailable})
	before := s.Counters().Snapshot()
	if err := s.PutIfAbsent(ctx, "commit", []byte("ours")); err != nil {
		t.Fatalf("put-if-absent: %v", err)
	}
	requireOps(t, s, before, map[store.Op]int64{store.OpPutIfAbsent: 6, store.OpHead: 1, store.OpGet: 1})
}

// When neither the write nor the read-back can get an answer, the outcome is unknown.
func TestS3OutcomeUnknown(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, store.Options{Retries: 2, BaseBackoff: time.Millisecond, SkipLargeProbe: true})
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Drop: true})
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3HeadObject, storetest.S3GetObject), Status: http.StatusServiceUnavailable})
	err := s.PutIfAbsent(ctx, "commit", []byte("ours"))
	storetest.RequireClass(t, err, store.ErrOutcomeUnknown, s, "commit")
	// An unconditional put whose responses are all lost is of unknown outcome too.
	err = s.Put(ctx, "plain", []byte("x"))
	storetest.RequireClass(t, err, store.ErrOutcomeUnknown, s, "plain")

	// The caller's deadline ends while the write is in flight.
	srv.Faults.Clear()
	srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3PutObject), Delay: 10 * time.Second})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = s.PutIfAbsent(short, "slow", []byte("x"))
	storetest.RequireClass(t, err, store.ErrOutcomeUnknown, s, "slow")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v does not wrap context.DeadlineExceeded", err)
	}
}

// An attempt that exceeds Options.AttemptTimeout is abandoned and retried.
func TestS3AttemptTimeoutRetries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	s := srv.Open(t, store.Options{AttemptTimeout: 200 * time.Millisecond, BaseBackoff: time.Millisecond, SkipLargeProbe: true})
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	slow := srv.Faults.Add(storetest.Fault{Match: storetest.OnS3(storetest.S3GetObject), Times: 1, Delay: 10 * time.Second})
	before := s.Counters().Snapshot()
	start := time.Now()
	if got, err := s.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("get = %q, %v", got, err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("get took %v: the slow attempt was not abandoned", el)
	}
	requireOps(t, s, before, map[store.Op]int64{store.OpGet: 2})
	if slow.Hits() != 1 {
		t.Fatalf("delay fault hit %d times", slow.Hits())
	}
}

// A store that accepts a second put-if-absent is refused at Open.
func TestOpenRefusesStoreThatIgnoresPreconditions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{IgnorePreconditions: true})
	s, err := store.Open(ctx, srv.StoreURL, storetest.FastOptions)
	if !errors.Is(err, store.ErrPreconditionsIgnored) || s != nil {
		t.Fatalf("Open = %v, %v; want ErrPreconditionsIgnored", s, err)
	}
	var e *store.Error
	if !errors.As(err, &e) || e.Store == "" || e.Key == "" {
		t.Fatalf("error %v does not name the store and the probe key", err)
	}
	// Read-only use does not need preconditions.
	ro, err := store.Open(ctx, srv.StoreURL, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	ro.Close()
}

// The small probe cannot see a store that drops If-None-Match only on multipart
// completion; the large-object check of a writable open can. It records what it found,
// so the next open refuses the store without probing again, while reads still work.
func TestWritableOpenRefusesStoreIgnoringLargePreconditions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	gap := storetest.NewS3Server(t, storetest.S3Options{NoMultipartGuard: true})
	s, err := store.Open(ctx, gap.StoreURL, storetest.FastOptions) // SkipLargeProbe
	if err != nil {
		t.Fatalf("small probe refused the store: %v", err)
	}
	if err := s.Put(ctx, "t/data", []byte("rows")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	opts := storetest.FastOptions
	opts.SkipLargeProbe = false
	for i := range 2 {
		multipart := gap.Faults.Add(storetest.Fault{Match: func(r *http.Request) bool {
			return storetest.S3Op(r) == storetest.S3CreateMultipartUpload
		}, Delay: time.Nanosecond})
		s, err := store.Open(ctx, gap.StoreURL, opts)
		if !errors.Is(err, store.ErrLargePreconditionsIgnored) || !errors.Is(err, store.ErrPreconditionsIgnored) {
			t.Fatalf("open %d over the multipart gap: %v, %v; want ErrLargePreconditionsIgnored", i, s, err)
		}
		if !strings.Contains(err.Error(), "refused for writing (reading works)") || !strings.Contains(err.Error(), "CompleteMultipartUpload") {
			t.Fatalf("error does not say what to do: %v", err)
		}
		switch {
		case i == 0 && multipart.Hits() == 0:
			t.Fatal("the first writable open did not probe with a multipart upload")
		case i == 1 && multipart.Hits() != 0:
			t.Fatalf("the second open probed again (%d multipart uploads) instead of reading the record", multipart.Hits())
		case i == 1 && !strings.Contains(err.Error(), store.PreconditionsKey):
			t.Fatalf("the second refusal does not name the record: %v", err)
		}
	}
	ro, err := store.Open(ctx, gap.StoreURL, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	defer ro.Close()
	rec, err := store.ReadPreconditions(ctx, ro)
	if err != nil || rec.LargeObjects || rec.ProbeBytes != store.LargeProbeSize || rec.Checked.IsZero() {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if b, err := ro.Get(ctx, "t/data"); err != nil || string(b) != "rows" {
		t.Fatalf("read through the refused store: %q, %v", b, err)
	}
}

// On a store that keeps preconditions on large objects the check probes once, records
// the result, leaves nothing else behind and is not counted; later opens read the record.
func TestLargePreconditionProbeRunsOnceAndIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	opts := storetest.FastOptions
	opts.SkipLargeProbe = false
	s, err := store.Open(ctx, srv.StoreURL, opts)
	if err != nil {
		t.Fatalf("the check refused a store that keeps preconditions: %v", err)
	}
	defer s.Close()
	if srv.ConditionalCompletes() == 0 {
		t.Fatal("the first writable open did not probe with a conditional multipart upload")
	}
	if r := s.Counters().Snapshot(); r.Total() != 0 {
		t.Fatalf("the probe's requests were counted: %v", r)
	}
	objs, err := s.List(ctx, "", 0)
	if err != nil || len(objs) != 1 || objs[0].Key != store.PreconditionsKey {
		t.Fatalf("after the probe the store holds %v, %v; want only the record", objs, err)
	}
	rec, err := store.ReadPreconditions(ctx, s)
	if err != nil || !rec.LargeObjects {
		t.Fatalf("record %+v, %v", rec, err)
	}
	before := srv.ConditionalCompletes()
	s2, err := store.Open(ctx, srv.StoreURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if srv.ConditionalCompletes() != before {
		t.Fatal("a later open probed again")
	}
	if !store.LargeWritePath(s) || !store.LargeWritePath(storetest.GCS(t)) || store.LargeWritePath(storetest.Mem(t)) || store.LargeWritePath(storetest.Local(t)) {
		t.Fatal("LargeWritePath: want S3 and GCS only")
	}
	g := storetest.GCS(t)
	if err := store.CheckLargePreconditions(ctx, g); err != nil {
		t.Fatalf("fake GCS (resumable uploads keep ifGenerationMatch=0): %v", err)
	}
	if rec, err := store.ReadPreconditions(ctx, g); err != nil || !rec.LargeObjects {
		t.Fatalf("GCS record %+v, %v", rec, err)
	}
}
