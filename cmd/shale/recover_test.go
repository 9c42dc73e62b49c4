package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCompactKilledThenRecover: a compaction killed (SIGKILL) after its commit and before
// its publish leaves drift covered by its sidecar; `shale recover` rolls it forward, verify
// finds no fault, and a second recover has nothing to do.
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
	if out := e.ok("recover", "--min-age", "0"); !strings.Contains(out, "rolled forward") {
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
