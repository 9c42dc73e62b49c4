package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// txnRecords counts a table's transaction records in the default local store.
func (e *env) txnRecords(table string) int {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.home, "store", table, "_txn"))
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	return len(ents)
}

// TestImportRacingDropSaysDropped (issue 8 item 10): an import into an existing table is
// held at its commit point (SHALE_FAILPOINTS: manifest.before_version_put blocks on a
// file) while `shale drop` drops the table and, in one case, an import creates it again.
// Released, the import fails saying the table was dropped and that its rows are in no
// table (before: "the rows ARE committed, do not import them again", though they were
// gone, or, with the table created again, success with its rows in the new table). The
// new table holds only its own rows.
func TestImportRacingDropSaysDropped(t *testing.T) {
	e := sharedEnv(t)
	for i, recreate := range []bool{false, true} {
		tbl := e.table("dropimp")
		e.ok("import", e.file("a.csv", "a,b\n1,x\n2,y\n"), "--table", tbl)
		gate := filepath.Join(e.dir, "go"+string(rune('0'+i)))
		records := e.txnRecords(tbl)
		late := e.file("late.csv", "a,b\n3,z\n4,w\n")
		done := make(chan result, 1)
		go func() {
			done <- e.runEnv([]string{"SHALE_FAILPOINTS=manifest.before_version_put=block(" + gate + ")"}, "import", late, "--table", tbl)
		}()
		deadline := time.Now().Add(60 * time.Second)
		for e.txnRecords(tbl) == records { // its transaction record: it is at its commit point
			if time.Now().After(deadline) {
				t.Fatal("the import never reached its commit point")
			}
			time.Sleep(10 * time.Millisecond)
		}
		e.ok("drop", tbl)
		if recreate {
			e.ok("import", e.file("new.csv", "a,b\n5,v\n"), "--table", tbl)
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.code != 1 || !strings.Contains(r.stderr, "was dropped while this import ran") || !strings.Contains(r.stderr, "none of the 2 rows is in any table") ||
			strings.Contains(strings.ToLower(r.stderr), "are committed") {
			t.Fatalf("recreate=%v: import racing the drop: %v", recreate, r)
		}
		if !recreate {
			e.fails(1, []string{tbl, "not found"}, "query", tbl)
			continue
		}
		if got := e.ok("query", tbl, "--format", "csv"); got != "a,b\n5,v\n" {
			t.Fatalf("the re-created table holds %q, want only its own row", got)
		}
	}
}

// TestDropHelpSaysWhatItDoes: `shale drop --help` describes the fence and the new
// incarnation, and no longer asks to stop writers first.
func TestDropHelpSaysWhatItDoes(t *testing.T) {
	e := sharedEnv(t)
	out := e.ok("drop", "--help")
	for _, want := range []string{"drop marker", "the table was dropped", "incarnation", "created again"} {
		if !strings.Contains(out, want) {
			t.Errorf("drop --help does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "stop every writer") || strings.Contains(out, "stop writers") {
		t.Errorf("drop --help still asks to stop writers first:\n%s", out)
	}
}
