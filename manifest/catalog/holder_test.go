//go:build unix

package catalog

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// exitedPID returns the pid of a process of this host that has exited (and been reaped).
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", ":")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestHoldOfExitedHolderIsReleased: a hold whose holder is a process of this host that
// has exited is reported so, and ReleaseExited deletes it at once; holds of this process,
// of a live process and of another host are never released.
func TestHoldOfExitedHolderIsReleased(t *testing.T) {
	ctx := testCtx(t)
	c := newCatalog(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("%s:%d", host, exitedPID(t))
	for holder, exited := range map[string]bool{
		dead:                                     true,
		fmt.Sprintf("%s:%d", host, os.Getpid()):  false, // this process
		fmt.Sprintf("%s:%d", host, os.Getppid()): false, // alive
		"another-host.example:1":                 false,
		"garbage":                                false,
	} {
		if got := HolderExited(holder); got != exited {
			t.Fatalf("HolderExited(%q) = %v, want %v", holder, got, exited)
		}
	}
	for _, h := range []Hold{
		{ID: "gone", Table: "t", Kind: "compaction", Version: 3, Holder: dead},
		{ID: "alive", Table: "t", Kind: "compaction", Version: 3, Holder: "another-host.example:1"},
	} {
		if _, err := c.AcquireHold(ctx, h, 0); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := c.Holds(ctx, "t")
	if err != nil || len(hs) != 2 {
		t.Fatalf("holds %+v %v", hs, err)
	}
	for _, h := range hs {
		released, err := c.ReleaseExited(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if released != (h.ID == "gone") {
			t.Fatalf("ReleaseExited(%s) = %v", h.ID, released)
		}
	}
	if ok, _ := c.HoldExists(ctx, "t", "gone"); ok {
		t.Fatal("the exited holder's hold is still there")
	}
	if ok, _ := c.HoldExists(ctx, "t", "alive"); !ok {
		t.Fatal("a hold of another host was released")
	}
	// A hold stored anew under the same id by another holder is left alone.
	stale := hs[0]
	if stale.ID != "gone" {
		stale = hs[1]
	}
	if _, err := c.AcquireHold(ctx, Hold{ID: "gone", Table: "t", Version: 5, Holder: dead}, 0); err != nil {
		t.Fatal(err)
	}
	if released, err := c.ReleaseExited(ctx, stale); err != nil || released {
		t.Fatalf("ReleaseExited of a replaced hold = %v, %v", released, err)
	}
}
