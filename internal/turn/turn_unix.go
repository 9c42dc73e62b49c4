//go:build unix

package turn

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// take locks path (creating it and dir as needed) within wait. timedOut reports a wait
// that ran out while another holder kept the lock (0 wait: one that was busy).
func take(ctx context.Context, dir, path string, wait time.Duration) (release func(), had, timedOut bool) {
	for range 3 { // a lock file replaced while we waited (see sameFile) is taken again
		f, err := open(dir, path)
		if err != nil {
			return nil, false, false
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if wait <= 0 {
				f.Close()
				return nil, false, false
			}
			var abandoned bool
			abandoned, timedOut, err = waitLock(ctx, f, wait)
			if abandoned {
				f.Close()
				return nil, false, timedOut
			}
		}
		if err != nil {
			f.Close()
			return nil, false, false
		}
		if !sameFile(f, path) {
			// The file was removed (the store's temp files are collected) or replaced
			// while we took it: a holder of the new file would not see our lock.
			f.Close()
			continue
		}
		return func() { f.Close() }, true, false
	}
	return nil, false, false
}

func open(dir, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		}
	}
	return f, err
}

// waitLock waits up to wait (or until ctx ends) for the flock of f, trying it without
// blocking at growing intervals (20 µs doubling to pollMax): the flock's result, or
// abandoned (timedOut: the wait ran out, not ctx; the caller closes f). A blocking
// flock(2) cannot be cancelled, so a wait that gave up would leave a goroutine, an OS
// thread and a descriptor behind for as long as the holder keeps the lock: a holder
// paused for hours would make every other writer pile them up. Polling leaves nothing.
func waitLock(ctx context.Context, f *os.File, wait time.Duration) (abandoned, timedOut bool, err error) {
	deadline := time.Now().Add(wait)
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for d := 20 * time.Microsecond; ; d = min(2*d, pollMax) {
		left := time.Until(deadline)
		if left <= 0 {
			return true, true, nil
		}
		t.Reset(min(d, left))
		select {
		case <-ctx.Done():
			return true, false, nil
		case <-t.C:
		}
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return false, false, err
		}
	}
}

// pollMax is the longest interval between two tries of a busy turn: a commit holds the
// turn for a few milliseconds, so a waiter comes in at most this late.
const pollMax = 200 * time.Microsecond

// sameFile reports whether f is still the file at path.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
