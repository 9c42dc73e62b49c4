package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGC: `shale gc --dry-run` reports and deletes nothing; `shale gc` expires all but
// the --keep-last newest versions, deletes an abandoned data file older than --grace and
// keeps a younger one; rows and verify (gaps allowed) are unchanged; flags are checked.
func TestGC(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("gc")
	for i := 0; i < 4; i++ {
		e.ok("import", e.file("g.csv", "a,b\n1,x\n2,y\n3,z\n"), "--table", tbl)
	}
	e.ok("delete", tbl, "--where", "a = 2")
	want := e.ok("query", tbl, "--format", "csv")
	n := e.manifests(tbl)
	if n < 5 {
		t.Fatalf("%d versions before gc", n)
	}
	store := filepath.Join(e.home, "store")
	plantFile := func(key string, age time.Duration) {
		p := filepath.Join(store, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("abandoned"), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	old, young := tbl+"/data/KILLEDIMPORTOLD.arrow", tbl+"/data/KILLEDIMPORTYOUNG.arrow"
	plantFile(old, 2*time.Hour)
	plantFile(young, time.Minute)

	var dry struct {
		DryRun bool `json:"dry_run"`
		Tables []struct {
			Table   string   `json:"table"`
			Expired []uint64 `json:"expired"`
			Deleted []struct {
				Key   string `json:"key"`
				Bytes int64  `json:"bytes"`
			} `json:"deleted"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(e.ok("gc", tbl, "--keep-last", "2", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || len(dry.Tables) != 1 || len(dry.Tables[0].Expired) != n-2 {
		t.Fatalf("dry run: %+v (want %d expired)", dry, n-2)
	}
	if got := e.manifests(tbl); got != n {
		t.Fatalf("dry run deleted manifests: %d left of %d", got, n)
	}
	if _, err := os.Stat(filepath.Join(store, old)); err != nil {
		t.Fatalf("dry run deleted %s: %v", old, err)
	}

	out := e.ok("gc", tbl, "--keep-last", "2", "--grace", "1h")
	t.Logf("shale gc:\n%s", out)
	if !strings.Contains(out, "expired "+strconv.Itoa(n-2)+" version(s)") || !strings.Contains(out, old) || strings.Contains(out, young) {
		t.Fatalf("gc output:\n%s", out)
	}
	if vs := e.versions(tbl); len(vs) != 2 {
		t.Fatalf("%d versions after gc --keep-last 2: %+v", len(vs), vs)
	}
	if _, err := os.Stat(filepath.Join(store, old)); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", old, err)
	}
	if _, err := os.Stat(filepath.Join(store, young)); err != nil {
		t.Fatalf("young file %s deleted: %v", young, err)
	}
	if got := e.ok("query", tbl, "--format", "csv"); got != want {
		t.Fatalf("rows changed by gc:\n%s\nwant\n%s", got, want)
	}
	e.ok("verify", tbl, "--all-versions")

	e.fails(2, []string{"--keep-last"}, "gc", tbl, "--keep-last", "0")
	e.fails(2, []string{"--grace"}, "gc", tbl, "--grace", "-1s")
	e.fails(2, []string{"--no-writers"}, "gc", tbl, "--grace", "10s")
	e.fails(1, []string{"not found"}, "gc", "nosuch")
	e.ok("gc", tbl, "--grace", "0", "--no-writers", "--dry-run")
}
