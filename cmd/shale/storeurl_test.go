package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree lists every path under dir (relative), for "nothing was created" checks.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// Read-only commands create nothing: a --store directory that does not exist is
// reported and stays missing; an existing empty one gets neither a temp directory nor
// _shale/store-id; a state directory without a store says so instead of making one.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	e := sharedEnv(t)
	root := t.TempDir()
	missing := filepath.Join(root, "typo", "store")
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	readOnly := [][]string{{"status"}, {"query", "t"}, {"versions", "t"}, {"inspect", "t"}, {"verify"}, {"verify", "t"}, {"index", "list", "t"}, {"wal", "status", "t"}}
	for _, args := range readOnly {
		for _, jsonFlag := range []string{"", "--json"} {
			a := append(append([]string{}, args...), "--store", "file://"+missing)
			if jsonFlag != "" {
				a = append(a, jsonFlag)
			}
			if jsonFlag == "" {
				e.fails(1, []string{"store file://" + missing + " does not exist", "nothing was created"}, a...)
				continue
			}
			// With --json the error is one JSON object on stderr (docs/json.md).
			r := e.run(a...)
			if r.code != 1 || !strings.Contains(r.stderr, `"error"`) || !strings.Contains(r.stderr, "does not exist") || !strings.Contains(r.stderr, "nothing was created") {
				t.Fatalf("shale %q: %v", a, r)
			}
		}
	}
	if got := tree(t, root); len(got) != 1 || got[0] != "empty" {
		t.Fatalf("read-only commands created %v under %s", got, root)
	}

	out := e.ok("status", "--store", "file://"+empty)
	if !strings.Contains(out, "no tables") {
		t.Fatalf("status of an empty store: %s", out)
	}
	e.fails(1, []string{"table not found"}, "query", "t", "--store", "file://"+empty)
	e.fails(1, []string{"table not found"}, "versions", "t", "--store", "file://"+empty)
	e.ok("verify", "--store", "file://"+empty)
	if got := tree(t, empty); len(got) != 0 {
		t.Fatalf("read-only commands on an empty store created %v", got)
	}

	// A fresh state directory: the default store does not exist yet.
	f := freshEnv(t)
	f.fails(1, []string{"no store yet at file://" + filepath.Join(f.home, "store"), "shale create"}, "status")
	if _, err := os.Stat(filepath.Join(f.home, "store")); !os.IsNotExist(err) {
		t.Fatalf("status created the default store: %v", err)
	}
}

// A bare path or a relative file URL is a usage error that says which URL was meant,
// and creates nothing.
func TestStoreURLUsageErrorsSuggestFileURL(t *testing.T) {
	e := sharedEnv(t)
	rel := filepath.Join(e.dir, "relative", "dir")
	for _, c := range []struct {
		store string
		want  []string
	}{
		{"/data/x", []string{"did you mean file:///data/x?"}},
		{"data/x", []string{"did you mean file://" + filepath.Join(e.dir, "data", "x") + "?"}},
		{"file://relative/dir", []string{"did you mean file://" + rel + " (relative to the current directory) or file:///relative/dir?"}},
		{"http://127.0.0.1:9000", []string{"s3://BUCKET?endpoint=http://127.0.0.1:9000&use_path_style=true"}},
		{"gcs://bkt", []string{`unsupported store scheme "gcs"`}},
	} {
		for _, args := range [][]string{{"status"}, {"create", "t", "--schema", "a:int64"}, {"import", "x.csv"}, {"gc"}} {
			a := append(append([]string{}, args...), "--store", c.store)
			e.fails(2, append([]string{"--store " + c.store}, c.want...), a...)
		}
	}
	if got := tree(t, e.dir); len(got) != 0 {
		t.Fatalf("usage errors created %v in the working directory", got)
	}
}
