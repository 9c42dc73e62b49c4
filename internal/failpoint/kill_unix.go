//go:build unix

package failpoint

import (
	"os"
	"syscall"
	"time"
)

// killSelf sends SIGKILL to this process and never returns.
func killSelf() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for { // SIGKILL to oneself is delivered before kill(2) returns; never run on regardless
		time.Sleep(time.Hour)
	}
}
