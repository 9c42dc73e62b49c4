package main

import (
	"strings"
	"testing"
)

func TestUpdateAndDrop(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("upd")
	e.ok("import", e.file("u.csv", "a,b\n1,x\n2,y\n3,z\n"), "--table", tbl)
	out := e.ok("update", tbl, "--set", "a=a*10", "--set", "b='q'", "--where", "a >= 2")
	if !strings.Contains(out, "Updated 2 rows") {
		t.Fatalf("update output: %s", out)
	}
	got := e.ok("query", tbl, "--format", "csv")
	if got != "a,b\n1,x\n20,q\n30,q\n" {
		t.Fatalf("after update:\n%s", got)
	}
	// Usage errors exit 2 and commit nothing; a bad expression exits 1 and commits nothing.
	before := e.manifests(tbl)
	e.fails(2, []string{"COLUMN=EXPRESSION"}, "update", tbl, "--set", "a", "--where", "true")
	e.fails(2, []string{"--where"}, "update", tbl, "--set", "a=1")
	e.fails(1, []string{tbl}, "update", tbl, "--set", "a='not a number'", "--where", "true")
	if after := e.manifests(tbl); after != before {
		t.Fatalf("failed updates committed: %d -> %d manifests", before, after)
	}
	e.ok("drop", tbl)
	e.fails(1, []string{"not found"}, "query", tbl)
}
