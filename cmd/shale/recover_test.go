package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestRecoverActsAtOnceWhenTheHolderExited: a compaction killed (SIGKILL) after its
// commit and before its publish leaves drift covered by its sidecar, and a hold whose
// lease lives 15 s more. Its holder is a process of this host that has exited, so status
// calls the operation pending, not running, and `shale recover` at once (no waiting, no
// --min-age) releases the hold and rolls the compaction forward; verify finds no fault,
// a second recover has nothing to do, and status is in sync.
func TestRecoverActsAtOnceWhenTheHolderExited(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("rec")
	for i := 0; i < 3; i++ {
		e.ok("import", e.file("r.csv", "a,b\n1,x\n2,y\n"), "--table", tbl, "--idempotency-key", fmt.Sprint(i))
	}
	want := e.ok("query", tbl, "--format", "csv")
	e.killedAt("compaction.before_publish", "compact", tbl)
	out := e.ok("status")
	if l := e.statusLine(out, tbl); !strings.Contains(l, "1 unpublished version") || !strings.Contains(l, "1 recovery sidecar pending") ||
		!strings.Contains(l, "whose process exited") || strings.Contains(l, "running") {
		t.Fatalf("status after the kill:\n%s", out)
	}
	out = e.ok("recover")
	if !strings.Contains(out, tbl+": released the hold of compaction") || !strings.Contains(out, "has exited") ||
		!strings.Contains(out, "rolled forward") {
		t.Fatalf("recover right after the kill: %s", out)
	}
	e.ok("verify", tbl)
	if got := e.ok("query", tbl, "--format", "csv"); got != want {
		t.Fatalf("rows changed:\n%s\nwant\n%s", got, want)
	}
	if out := e.ok("recover"); !strings.Contains(out, "No recovery sidecars") {
		t.Fatalf("second recover: %s", out)
	}
	if row, _ := e.statusOf(tbl); row.State != "in sync" || len(row.Holds) != 0 {
		t.Fatalf("status after recover: %+v", row)
	}
}

// TestRecoverRollBackSaysWhatItCommitted: a compaction killed before its version put
// committed nothing; recover rolls it back, and says that it committed an abort version
// fencing the operation's transactions besides deleting its files. `recover nosuch` is
// "table not found" (exit 1), as for every other command.
func TestRecoverRollBackSaysWhatItCommitted(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("rollback")
	for i := 0; i < 3; i++ {
		e.ok("import", e.file("r.csv", "a,b\n1,x\n2,y\n"), "--table", tbl, "--idempotency-key", fmt.Sprint(i))
	}
	e.killedAt("manifest.before_version_put", "compact", tbl)
	out := e.ok("recover", tbl)
	if !strings.Contains(out, "rolled back: it committed nothing; abort version 5 fences its transactions") ||
		!strings.Contains(out, "1 data file deleted") || strings.Contains(out, "(s)") {
		t.Fatalf("recover: %s", out)
	}
	if vs := e.versions(tbl); len(vs) != 5 || vs[4].Operation != "abort" {
		t.Fatalf("versions after the roll back: %+v", vs)
	}
	e.ok("verify", tbl)
	e.fails(1, []string{"table not found", "nosuch_recover"}, "recover", "nosuch_recover")
}
