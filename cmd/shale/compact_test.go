package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestCompactCLI(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("cmp")
	for i := 0; i < 4; i++ {
		e.ok("import", e.file("c.csv", "a,b\n1,x\n2,y\n3,z\n"), "--table", tbl, "--idempotency-key", fmt.Sprint(i))
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
	if !strings.Contains(out, "4 fragments → 1 fragment (") || e.manifests(tbl) != before+1 {
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

// TestConcurrentCompactsAndDeleteLeaveTableInSync (issue 8 item 9): two `shale compact`
// processes and a `shale delete` race on one table (their commits slowed so that they
// interleave and the compactions replan). When every command has succeeded the table is
// in sync: HEAD equals the published version, with no unpublished abort version left for
// `shale repair`.
func TestConcurrentCompactsAndDeleteLeaveTableInSync(t *testing.T) {
	e := sharedEnv(t)
	for round := 0; round < 3; round++ {
		tbl := e.table("cmprace")
		for i := 0; i < 4; i++ {
			e.ok("import", e.file("c.csv", fmt.Sprintf("a,b\n%d,x\n%d,y\n%d,z\n", 10*i, 10*i+1, 10*i+2)), "--table", tbl)
		}
		slow := []string{"SHALE_FAILPOINTS=manifest.before_version_put=sleep(150ms)"}
		var wg sync.WaitGroup
		res := make([]result, 3)
		for i, args := range [][]string{{"compact", tbl}, {"compact", tbl}, {"delete", tbl, "--where", "a = 11"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i] = e.runEnv(slow, args...)
			}()
		}
		wg.Wait()
		for i, r := range res {
			if r.code != 0 {
				t.Fatalf("round %d, command %d: %v", round, i, r)
			}
		}
		var st struct {
			Tables []struct {
				Table           string
				Head, Published uint64
				State           string
			}
		}
		if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Tables {
			if s.Table == tbl && (s.Head != s.Published || s.Head == 0) {
				t.Fatalf("round %d: %s HEAD %d, published %d (%s) after every command succeeded:\n%s\n%s\n%s",
					round, tbl, s.Head, s.Published, s.State, res[0], res[1], res[2])
			}
		}
		if got := e.ok("query", tbl, "--where", "a = 11", "--format", "csv"); strings.Count(got, "\n") != 1 {
			t.Fatalf("round %d: the deleted row is back: %q", round, got)
		}
	}
}
