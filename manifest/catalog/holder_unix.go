//go:build unix

package catalog

import (
	"errors"
	"syscall"
)

// processGone reports whether no process has pid (kill(pid, 0) fails with ESRCH; EPERM
// means one exists that we may not signal).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
