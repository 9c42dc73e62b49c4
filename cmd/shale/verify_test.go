package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyCommand(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("ver")
	e.ok("import", e.file("v.csv", "a,b\n1,x\n2,y\n3,z\n"), "--table", tbl)
	e.ok("delete", tbl, "--where", "a = 2")
	if out := e.ok("verify", tbl); !strings.Contains(out, tbl) {
		t.Fatalf("verify output: %s", out)
	}
	// Flip a byte in the table's data file: verify names it and exits 1.
	files, _ := filepath.Glob(filepath.Join(e.home, "store", tbl, "data", "*.arrow"))
	if len(files) != 1 {
		t.Fatalf("data files %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.run("verify", tbl)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, filepath.Base(files[0])) {
		t.Fatalf("verify of a corrupt file: %v", r)
	}
}
