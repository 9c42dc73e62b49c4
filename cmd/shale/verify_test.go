package main

import (
	"encoding/json"
	"fmt"
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
	files, _ := filepath.Glob(filepath.Join(e.home, "store", tbl, "data", "*", "*.arrow"))
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
	// The fault line and the summary give the damaged file's size in the store, not 0.
	size := fmt.Sprintf("%d bytes", len(b))
	if !strings.Contains(r.stdout, filepath.Base(files[0])+" ("+size+"): data file") ||
		!strings.Contains(r.stdout, "1 data file, 1 deletion vector, ") || strings.Contains(r.stdout, "deletion vector, 0 B") {
		t.Fatalf("verify of a corrupt file does not give its size %s:\n%v", size, r)
	}
	// Truncated: the fault gives the stored size and the manifest's.
	if err := os.WriteFile(files[0], b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Faults []struct {
			Key     string `json:"key"`
			Problem string `json:"problem"`
			Size    *int64 `json:"size"`
		} `json:"faults"`
	}
	r = e.run("verify", tbl, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 {
		t.Fatalf("verify --json: %v\n%v", err, r)
	}
	if len(rep.Faults) != 1 || rep.Faults[0].Size == nil || *rep.Faults[0].Size != int64(len(b)/2) ||
		!strings.Contains(rep.Faults[0].Problem, fmt.Sprintf("the manifest says %d bytes", len(b))) {
		t.Fatalf("verify --json of a truncated file:\n%s", r.stdout)
	}
}
