package main

import (
	"strings"
	"testing"
)

func TestCompactCLI(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("cmp")
	for i := 0; i < 4; i++ {
		e.ok("import", e.file("c.csv", "a,b\n1,x\n2,y\n3,z\n"), "--table", tbl)
	}
	e.ok("delete", tbl, "--where", "a = 2")
	want := e.ok("query", tbl, "--format", "csv")
	before := e.manifests(tbl)
	out := e.ok("compact", tbl, "--dry-run")
	t.Logf("dry run:\n%s", out)
	if !strings.Contains(out, "group 1: 4 fragments") || e.manifests(tbl) != before {
		t.Fatalf("dry run: %s", out)
	}
	t.Logf("json dry run:\n%s", e.ok("compact", tbl, "--dry-run", "--json"))
	out = e.ok("compact", tbl)
	t.Logf("run:\n%s", out)
	if !strings.Contains(out, "4 → 1 fragments") || e.manifests(tbl) != before+1 {
		t.Fatalf("compact: %s", out)
	}
	if got := e.ok("query", tbl, "--format", "csv"); got != want {
		t.Fatalf("after compact:\n%s\nwant\n%s", got, want)
	}
	out = e.ok("compact", tbl)
	if !strings.Contains(out, "Nothing to compact") {
		t.Fatalf("second compact: %s", out)
	}
	e.fails(2, []string{"--target-rows"}, "compact", tbl, "--target-rows", "0")
	e.fails(1, []string{"nosuch"}, "compact", "nosuch_table_x")
	t.Log(e.ok("compact", tbl, "--json"))
}
