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
				return nil, false, timedOut // f is closed by waitLock's goroutine
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

// waitLock waits up to wait (or until ctx ends) for a blocking flock of f: the flock's
// result, or abandoned (timedOut: the wait ran out, not ctx). An abandoned flock is left
// to a goroutine that closes f, so the lock is let go the moment it is had.
func waitLock(ctx context.Context, f *os.File, wait time.Duration) (abandoned, timedOut bool, err error) {
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		return false, false, err
	case <-t.C:
		timedOut = true
	case <-ctx.Done():
	}
	go func() {
		<-done
		f.Close()
	}()
	return true, timedOut, nil
}

// sameFile reports whether f is still the file at path.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
