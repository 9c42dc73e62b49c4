package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/shale-db/shale/manifest"
)

// TestQueryVersionOfAbortedGroup: `shale query --version N` of a version prepared by a
// multi-table transaction that aborted prints the rows of the version below it (not the
// rejected transaction's) and a note on stderr saying so; `shale versions` shows it as
// aborted.
func TestQueryVersionOfAbortedGroup(t *testing.T) {
	e := sharedEnv(t)
	t1, t2 := e.table("abg"), e.table("abg")
	for _, tbl := range []string{t1, t2} {
		e.ok("import", e.file("r.csv", "a,b\n1,x\n2,y\n3,z\n"), "--table", tbl) // v1 create, v2 append
	}
	want := e.ok("query", t1, "--format", "csv")

	// A multi-table transaction (no CLI command makes one) deleting a row of each table,
	// rejected because t2 changed after its snapshot: t1 keeps a prepared version 3.
	ctx := context.Background()
	db := e.engineDB(ctx)
	snap, err := db.Snapshot(ctx, t1, t2)
	if err != nil {
		t.Fatal(err)
	}
	e.ok("delete", t2, "--where", "a = 2")
	w1, err := snap.Tables[t1].PrepareDelete(ctx, "a = 1")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := snap.Tables[t2].PrepareDelete(ctx, "a = 3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(ctx, w1, w2); !errors.Is(err, manifest.ErrConflict) {
		t.Fatalf("multi-table commit: %v, want a conflict", err)
	}
	if head, err := manifest.Head(ctx, db.Store(), t1); err != nil || head != 3 {
		t.Fatalf("%s HEAD %d %v, want the prepared version 3", t1, head, err)
	}

	r := e.run("query", t1, "--version", "3", "--format", "csv")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("query --version 3 of the aborted version: want the rows of version 2\n%s\n%v", want, r)
	}
	if !strings.Contains(r.stderr, "version 3 belongs to an aborted multi-table transaction") || !strings.Contains(r.stderr, "reads as version 2") {
		t.Fatalf("no note on stderr: %v", r)
	}
	if r := e.run("query", t1, "--version", "2", "--format", "csv"); r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Fatalf("query --version 2: %v", r)
	}
	vs := e.versions(t1)
	if len(vs) != 3 || !vs[2].Aborted || vs[2].Published || vs[2].ReadsAs != 2 || vs[2].Rows != 3 || vs[2].Group == "" ||
		vs[1].Aborted || vs[1].ReadsAs != 2 {
		t.Fatalf("versions: %+v", vs)
	}
	if out := e.ok("versions", t1); !strings.Contains(out, "aborted (reads as v2)") {
		t.Fatalf("versions table:\n%s", out)
	}
	// inspect shows the manifest as stored (the rejected delete), saying what it reads as.
	var in inspection
	if err := json.Unmarshal([]byte(e.ok("inspect", t1, "--version", "3", "--json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.Version != 3 || !in.Aborted || in.ReadsAs != 2 || in.Transaction.Operation != "delete" || in.Rows.Live != 2 ||
		in.ManifestKey != manifest.ManifestKey(t1, 3) || in.Checksum == "00000000" {
		t.Fatalf("inspect --version 3: %+v", in)
	}
	if out := e.ok("inspect", t1, "--version", "3"); !strings.Contains(out, "(aborted)") || !strings.Contains(out, "reads as version 2") {
		t.Fatalf("inspect --version 3:\n%s", out)
	}
}
