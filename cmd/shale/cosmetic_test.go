package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyAndQueryOfACorruptManifestReadWell (issue 9 trial, cosmetics): with the
// table's only data-bearing manifest corrupted, verify says "no version read" instead of
// "read versions : 0 data files", counts "1 fault in 1 object" with the plural helper,
// starts notes with one space; query names the table once.
func TestVerifyAndQueryOfACorruptManifestReadWell(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("corruptman")
	e.ok("import", e.file("c.csv", "a\n1\n"), "--table", tbl)
	mans, _ := filepath.Glob(filepath.Join(e.home, "store", tbl, "_versions", "*.manifest"))
	if len(mans) != 2 {
		t.Fatalf("manifests %v", mans)
	}
	for _, m := range mans {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(m, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := e.run("verify", tbl)
	t.Logf("verify: %v", r)
	if r.code != 1 || strings.Contains(r.stdout, "versions :") || strings.Contains(r.stdout+r.stderr, "(s)") ||
		strings.Contains(r.stdout, "note:  ") || !strings.Contains(r.stdout+r.stderr, "no version read") {
		t.Fatalf("verify of a corrupt manifest: %v", r)
	}
	r = e.run("query", tbl)
	t.Logf("query: %v", r)
	if r.code != 1 || strings.Count(r.stderr, tbl) != 1 {
		t.Fatalf("query of a corrupt manifest names the table other than once: %v", r)
	}
}

// TestSmallWordingsFromTheTrial (issue 9 trial, cosmetics): gc of a dropped table says it
// was dropped; export -o of a directory says it is one; a bad table name says which
// letters are allowed (ASCII); an input file without a known extension is a usage error
// (exit 2); the README's bench --suites list names every suite.
func TestSmallWordingsFromTheTrial(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("wording")
	e.ok("import", e.file("w.csv", "a\n1\n"), "--table", tbl)
	dir := filepath.Join(e.dir, "outdir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.fails(1, []string{dir, "is a directory"}, "export", tbl, "-o", dir, "--format", "csv")
	e.ok("drop", tbl)
	e.fails(1, []string{tbl, "was dropped", "drop marker at version"}, "gc", tbl)
	e.fails(2, []string{"ASCII letters"}, "create", "bad name", "--schema", "a:int64")
	e.fails(2, []string{"has no extension", "--format"}, "import", e.file("t1", "a\n1\n"))
	readme, err := os.ReadFile(repoFile("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "--suites import,scan,open,commit,txn,compact,recover,wal]") {
		t.Fatal("README's bench --suites list lacks a suite")
	}
}
