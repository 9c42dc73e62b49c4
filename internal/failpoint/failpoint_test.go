package failpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
)

var (
	seamA   = failpoint.Seam("failpoint_test.a")
	seamB   = failpoint.Seam("failpoint_test.b")
	errBoom = errors.New("boom")
	bg      = context.Background()
)

// seamName declares a seam named after the test, so tests never share hit counts.
func seamName(t *testing.T) *failpoint.Point {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '/' {
			return r
		}
		return '_'
	}, t.Name())
	return failpoint.Seam("failpoint_test/" + name)
}

// waitFor polls cond until it holds or a 10 s deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDisabledSeamDoesNothing(t *testing.T) {
	for range 3 {
		if err := seamA.Inject(bg); err != nil {
			t.Fatalf("disabled seam returned %v", err)
		}
	}
	if h := failpoint.Hits(seamA.Name()); h != 0 {
		t.Fatalf("Hits of a never-enabled seam = %d, want 0", h)
	}
	if slices.Contains(failpoint.Enabled(), seamA.Name()) {
		t.Fatalf("Enabled() lists %s", seamA.Name())
	}
}

func TestError(t *testing.T) {
	p := seamName(t)
	disable := failpoint.Enable(p.Name(), failpoint.Error(errBoom))
	err := p.Inject(bg)
	if !errors.Is(err, errBoom) || !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Inject = %v, want errBoom and ErrInjected", err)
	}
	var ie *failpoint.InjectedError
	if !errors.As(err, &ie) || ie.Seam != p.Name() {
		t.Fatalf("Inject = %#v, want *InjectedError naming %s", err, p.Name())
	}
	if err := seamB.Inject(bg); err != nil {
		t.Fatalf("another seam returned %v", err)
	}
	disable()
	if err := p.Inject(bg); err != nil {
		t.Fatalf("after disable: %v", err)
	}
	if h := failpoint.Hits(p.Name()); h != 1 {
		t.Fatalf("Hits = %d, want 1 (the hit after disable does not count)", h)
	}
}

func TestAfterTimesOnce(t *testing.T) {
	cases := []struct {
		action failpoint.Action
		fires  []bool // per hit
	}{
		{failpoint.Error(errBoom).Once(), []bool{true, false, false}},
		{failpoint.Error(errBoom).Times(2), []bool{true, true, false, false}},
		{failpoint.Error(errBoom).After(2), []bool{false, false, true, true}},
		{failpoint.Error(errBoom).After(2).Times(2), []bool{false, false, true, true, false}},
		{failpoint.Error(errBoom).Once().After(1), []bool{false, true, false}},
	}
	for _, c := range cases {
		t.Run(c.action.String(), func(t *testing.T) {
			p := seamName(t)
			t.Cleanup(failpoint.Enable(p.Name(), c.action))
			for i, want := range c.fires {
				err := p.Inject(bg)
				if got := err != nil; got != want {
					t.Fatalf("hit %d: fired=%v (err %v), want %v", i+1, got, err, want)
				}
			}
			if h := failpoint.Hits(p.Name()); h != len(c.fires) {
				t.Fatalf("Hits = %d, want %d", h, len(c.fires))
			}
		})
	}
}

func TestCount(t *testing.T) {
	p := seamName(t)
	t.Cleanup(failpoint.Enable(p.Name(), failpoint.Count()))
	for range 5 {
		if err := p.Inject(bg); err != nil {
			t.Fatal(err)
		}
	}
	if h := failpoint.Hits(p.Name()); h != 5 {
		t.Fatalf("Hits = %d, want 5", h)
	}
}

func TestPanic(t *testing.T) {
	p := seamName(t)
	t.Cleanup(failpoint.Enable(p.Name(), failpoint.Panic("stop here")))
	defer func() {
		r := recover()
		ie, ok := r.(*failpoint.InjectedError)
		if !ok || ie.Seam != p.Name() || ie.Err.Error() != "stop here" || !errors.Is(ie, failpoint.ErrInjected) {
			t.Fatalf("recovered %#v, want *InjectedError{Seam: %s, Err: stop here}", r, p.Name())
		}
	}()
	p.Inject(bg)
	t.Fatal("Inject returned instead of panicking")
}

func TestSleep(t *testing.T) {
	p := seamName(t)
	const d = 20 * time.Millisecond
	t.Cleanup(failpoint.Enable(p.Name(), failpoint.Sleep(d)))
	start := time.Now()
	if err := p.Inject(bg); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < d {
		t.Fatalf("Sleep(%v) returned after %v", d, el)
	}

	// A context that ends cuts the sleep short with the context's error.
	failpoint.Enable(p.Name(), failpoint.Sleep(time.Hour))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	err := p.Inject(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Inject with a cancelled context = %v, want context.Canceled", err)
	}
}

// runBlocked starts Inject on a goroutine and checks it is still blocked once the seam
// was hit; it returns the channel of Inject's result.
func runBlocked(t *testing.T, ctx context.Context, p *failpoint.Point) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Inject(ctx) }()
	waitFor(t, "the seam to be hit", func() bool { return failpoint.Hits(p.Name()) == 1 })
	select {
	case err := <-done:
		t.Fatalf("Inject returned %v before being released", err)
	case <-time.After(20 * time.Millisecond): // a released seam returns within microseconds
	}
	return done
}

func waitResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Inject still blocked 10 s after release")
		return nil
	}
}

func TestBlockUntilFile(t *testing.T) {
	p := seamName(t)
	path := filepath.Join(t.TempDir(), "release")
	t.Cleanup(failpoint.Enable(p.Name(), failpoint.BlockUntilFile(path)))
	done := runBlocked(t, bg, p)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := waitResult(t, done); err != nil {
		t.Fatalf("released seam returned %v", err)
	}

	failpoint.Enable(p.Name(), failpoint.BlockUntilFile(filepath.Join(t.TempDir(), "never")))
	ctx, cancel := context.WithCancel(bg)
	done = runBlocked(t, ctx, p)
	cancel()
	if err := waitResult(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled block returned %v, want context.Canceled", err)
	}
}

func TestBlockUntilClosed(t *testing.T) {
	p := seamName(t)
	ch := make(chan struct{})
	t.Cleanup(failpoint.Enable(p.Name(), failpoint.BlockUntilClosed(ch)))
	done := runBlocked(t, bg, p)
	close(ch)
	if err := waitResult(t, done); err != nil {
		t.Fatalf("released seam returned %v", err)
	}

	failpoint.Enable(p.Name(), failpoint.BlockUntilClosed(make(chan struct{})))
	ctx, cancel := context.WithTimeout(bg, time.Hour)
	done = runBlocked(t, ctx, p)
	cancel()
	if err := waitResult(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled block returned %v, want context.Canceled", err)
	}
}

type ctxKey struct{}

func TestCall(t *testing.T) {
	p := seamName(t)
	var got any
	t.Cleanup(failpoint.Enable(p.Name(), failpoint.Call(func(ctx context.Context) error {
		got = ctx.Value(ctxKey{})
		return nil
	})))
	if err := p.Inject(context.WithValue(bg, ctxKey{}, "v")); err != nil {
		t.Fatal(err)
	}
	if got != "v" {
		t.Fatalf("Call's function saw context value %v, want the seam's context", got)
	}
	failpoint.Enable(p.Name(), failpoint.Call(func(context.Context) error { return errBoom }))
	if err := p.Inject(bg); !errors.Is(err, errBoom) || !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("Inject = %v, want the function's error wrapped", err)
	}
}

func TestEnableReplacesAndStaleDisableIsNoop(t *testing.T) {
	p := seamName(t)
	errOther := errors.New("other")
	off1 := failpoint.Enable(p.Name(), failpoint.Error(errBoom))
	p.Inject(bg)
	off2 := failpoint.Enable(p.Name(), failpoint.Error(errOther))
	if h := failpoint.Hits(p.Name()); h != 0 {
		t.Fatalf("Hits after a new Enable = %d, want 0", h)
	}
	off1() // stale: must not disable the second action
	if err := p.Inject(bg); !errors.Is(err, errOther) {
		t.Fatalf("after a stale disable, Inject = %v, want %v", err, errOther)
	}
	if !slices.Contains(failpoint.Enabled(), p.Name()) {
		t.Fatalf("Enabled() = %v, want it to list %s", failpoint.Enabled(), p.Name())
	}
	off2()
	if err := p.Inject(bg); err != nil {
		t.Fatalf("after disable: %v", err)
	}
	failpoint.Enable(p.Name(), failpoint.Error(errBoom))
	failpoint.Disable(p.Name())
	if err := p.Inject(bg); err != nil {
		t.Fatalf("after Disable: %v", err)
	}
	failpoint.Enable(p.Name(), failpoint.Error(errBoom))
	failpoint.Enable(seamB.Name(), failpoint.Error(errBoom))
	failpoint.DisableAll()
	if err := errors.Join(p.Inject(bg), seamB.Inject(bg)); err != nil {
		t.Fatalf("after DisableAll: %v", err)
	}
}

func TestNamesAndVerify(t *testing.T) {
	names := failpoint.Names()
	if !slices.Contains(names, seamA.Name()) || !slices.Contains(names, seamB.Name()) || !slices.IsSorted(names) {
		t.Fatalf("Names() = %v, want the declared seams, sorted", names)
	}
	if failpoint.Seam(seamA.Name()) != seamA {
		t.Fatal("declaring a seam twice gave a different Point")
	}
	if err := failpoint.Verify(); err != nil {
		t.Fatalf("Verify with nothing undeclared enabled: %v", err)
	}

	const typo = "failpoint_test.never_declared"
	off := failpoint.Enable(typo, failpoint.Kill())
	if slices.Contains(failpoint.Names(), typo) {
		t.Fatal("Names() lists a seam that was only enabled")
	}
	err := failpoint.Verify()
	if !errors.Is(err, failpoint.ErrUndeclared) || !containsAll(err.Error(), typo, seamA.Name()) {
		t.Fatalf("Verify = %v, want ErrUndeclared naming %s and the declared seams", err, typo)
	}
	off()

	// Declaring a seam after its action was enabled (SHALE_FAILPOINTS is parsed before
	// other packages declare their seams) arms it.
	const late = "failpoint_test.declared_late"
	t.Cleanup(failpoint.Enable(late, failpoint.Error(errBoom)))
	if err := failpoint.Seam(late).Inject(bg); !errors.Is(err, errBoom) {
		t.Fatalf("seam declared after Enable: Inject = %v, want errBoom", err)
	}
}

func TestBadNamesPanic(t *testing.T) {
	for _, name := range []string{"", "a=b", "a;b", "a b", "a(b)"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Seam(%q) did not panic", name)
				}
			}()
			failpoint.Seam(name)
		}()
	}
}

// TestConcurrent runs seams on many goroutines while actions are enabled, checked and
// replaced (run with -race): modifiers must fire on exactly the right number of hits.
func TestConcurrent(t *testing.T) {
	p := seamName(t)
	const goroutines, perG, after, times = 8, 500, 100, 1000
	t.Cleanup(failpoint.Enable(p.Name(), failpoint.Error(errBoom).After(after).Times(times)))
	var fired atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Meanwhile, toggle another seam and read the registry.
	var toggles sync.WaitGroup
	toggles.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			off := failpoint.Enable(seamB.Name(), failpoint.Count())
			_ = failpoint.Names()
			_ = failpoint.Hits(seamB.Name())
			off()
		}
	})
	for range goroutines {
		wg.Go(func() {
			for range perG {
				if err := p.Inject(bg); err != nil {
					fired.Add(1)
				}
				seamB.Inject(bg)
			}
		})
	}
	wg.Wait()
	close(stop)
	toggles.Wait()
	if fired.Load() != times {
		t.Fatalf("action took effect %d times, want exactly %d", fired.Load(), times)
	}
	if h := failpoint.Hits(p.Name()); h != goroutines*perG {
		t.Fatalf("Hits = %d, want %d", h, goroutines*perG)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
