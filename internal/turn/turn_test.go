//go:build unix

package turn

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestTakeOrdersHolders: a second Take waits for the holder; after the holder releases it
// has the turn.
func TestTakeOrdersHolders(t *testing.T) {
	ctx := context.Background()
	l := New(t.TempDir())
	release, had := l.Take(ctx, "t")
	if !had {
		t.Fatal("the first Take did not have the turn")
	}
	got := make(chan bool, 1)
	go func() {
		r, had := New(l.dir).Take(ctx, "t")
		r()
		got <- had
	}()
	select {
	case <-got:
		t.Fatal("a second Take had the turn while the first held it")
	case <-time.After(20 * time.Millisecond): // a bounded look for a wrong early answer
	}
	release()
	if !<-got {
		t.Fatal("the waiting Take did not have the turn once it was released")
	}
	// Other tables have their own turns.
	r1, had1 := l.Take(ctx, "a")
	r2, had2 := l.Take(ctx, "b")
	r1()
	r2()
	if !had1 || !had2 {
		t.Fatal("turns of two tables excluded each other")
	}
}

// TestStuckHolderCostsOneBoundedWait: a holder that never lets go (a paused process) makes
// Take give up after Wait, and then not wait at all for Skip; the taker goes ahead
// without the turn.
func TestStuckHolderCostsOneBoundedWait(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stuck, had := New(dir).Take(ctx, "t")
	if !had {
		t.Fatal("no turn")
	}
	defer stuck()
	l := New(dir)
	l.Wait, l.Skip = 30*time.Millisecond, time.Hour
	start := time.Now()
	if _, had := l.Take(ctx, "t"); had {
		t.Fatal("had the turn a stuck holder holds")
	}
	if d := time.Since(start); d < l.Wait {
		t.Fatalf("gave up after %v, before Wait %v", d, l.Wait)
	}
	start = time.Now()
	if _, had := l.Take(ctx, "t"); had {
		t.Fatal("had the turn a stuck holder holds")
	}
	if d := time.Since(start); d >= l.Wait {
		t.Fatalf("waited %v again within Skip", d)
	}
	// An ended context gives up at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	l2 := New(dir)
	if _, had := l2.Take(cctx, "t"); had {
		t.Fatal("had the turn a stuck holder holds")
	}
}

// TestRemovedLockFileIsTakenAgain: a lock file removed while held (temp files collected)
// is created again; a Take never fails for it.
func TestRemovedLockFileIsTakenAgain(t *testing.T) {
	ctx := context.Background()
	l := New(t.TempDir())
	release, had := l.Take(ctx, "t")
	if !had {
		t.Fatal("no turn")
	}
	if err := os.Remove(l.path("t")); err != nil {
		t.Fatal(err)
	}
	r2, had := New(l.dir).Take(ctx, "t")
	if !had {
		t.Fatal("no turn on the lock file created again")
	}
	r2()
	release()
	// A directory that cannot be made: no turn, no error, no wait.
	bad := New("/proc/no-such-dir/turns")
	if _, had := bad.Take(ctx, "t"); had {
		t.Fatal("had a turn without a lock file")
	}
}

// TestTimedOutWaitsLeaveNothingBehind: waits that give up on a stuck holder leave no
// descriptor and no goroutine behind (a holder paused for hours must not make the other
// writers pile up threads and files, one per timed-out wait).
func TestTimedOutWaitsLeaveNothingBehind(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stuck, had := New(dir).Take(ctx, "t")
	if !had {
		t.Fatal("no turn")
	}
	defer stuck()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(ents)
	}
	l := New(dir)
	l.Wait, l.Skip = 2*time.Millisecond, time.Nanosecond // wait, and time out, every time
	fd0, g0 := fds(), runtime.NumGoroutine()
	for range 50 {
		if _, had := l.Take(ctx, "t"); had {
			t.Fatal("had the turn a stuck holder holds")
		}
	}
	if fd1, g1 := fds(), runtime.NumGoroutine(); fd1 > fd0 || g1 > g0 {
		t.Fatalf("after 50 timed-out waits: %d open descriptors (was %d), %d goroutines (was %d)", fd1, fd0, g1, g0)
	}
}
