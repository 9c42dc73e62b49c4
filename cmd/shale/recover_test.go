package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCompactKilledThenRecover: a compaction killed (SIGKILL) after its commit and before
// its publish leaves drift covered by its sidecar; `shale recover` reports it running
// while its hold's lease lives (about 15 s), then rolls it forward; verify finds no
// fault, and a second recover has nothing to do.
func TestCompactKilledThenRecover(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("rec")
	for i := 0; i < 3; i++ {
		e.ok("import", e.file("r.csv", "a,b\n1,x\n2,y\n"), "--table", tbl)
	}
	want := e.ok("query", tbl, "--format", "csv")
	cmd := exec.Command(shaleBin, "compact", tbl)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s", "SHALE_FAILPOINTS=compaction.before_publish=kill")
	if err := cmd.Run(); err == nil {
		t.Fatal("compaction was not killed at its seam")
	}
	if out := e.ok("status"); !strings.Contains(out, "1 unpublished") {
		t.Fatalf("status after the kill:\n%s", out)
	}
	// The killed compaction's hold lives until its lease expires (15 s after its last
	// keep-alive): until then recover reports the operation as running.
	killed := time.Now()
	out := e.ok("recover", "--min-age", "0")
	if !strings.Contains(out, "still running") {
		t.Fatalf("recover right after the kill: %s", out)
	}
	for strings.Contains(out, "still running") {
		if time.Since(killed) > 45*time.Second {
			t.Fatalf("the dead compaction's hold outlived %s: %s", time.Since(killed), out)
		}
		time.Sleep(500 * time.Millisecond) // polling the condition (lease expiry), with the deadline above
		out = e.ok("recover", "--min-age", "0")
	}
	if !strings.Contains(out, "rolled forward") {
		t.Fatalf("recover: %s", out)
	}
	e.ok("verify", tbl)
	if got := e.ok("query", tbl, "--format", "csv"); got != want {
		t.Fatalf("rows changed:\n%s\nwant\n%s", got, want)
	}
	if out := e.ok("recover", "--min-age", "0"); !strings.Contains(out, "No recovery sidecars") {
		t.Fatalf("second recover: %s", out)
	}
}
