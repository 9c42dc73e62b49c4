package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
		e.ok("import", e.file("g.csv", "a,b\n1,x\n2,y\n3,z\n"), "--table", tbl, "--idempotency-key", fmt.Sprint(i))
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
	if !strings.Contains(out, "expired "+strconv.Itoa(n-2)+" versions") || !strings.Contains(out, old) || strings.Contains(out, young) {
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

// TestGCDroppedLeftoversJSON: `shale gc --json` over every table deletes an old file
// left under a dropped table's prefix, keeps a young one and the live table's files,
// and prints [] (never null) for empty lists, with the recovery step's results under
// "outcomes" as `shale recover --json` prints them.
func TestGCDroppedLeftoversJSON(t *testing.T) {
	e := freshEnv(t)
	e.ok("import", e.file("a.csv", "a,b\n1,x\n2,y\n"), "--table", "live")
	e.ok("import", e.file("a.csv", "a,b\n1,x\n2,y\n"), "--table", "gone")
	e.ok("drop", "gone")
	store := filepath.Join(e.home, "store")
	plant := func(key string, age time.Duration) {
		p := filepath.Join(store, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("raced the drop"), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	old, young := "gone/data/RACEDDROP.arrow", "gone/data/YOUNG.arrow"
	plant(old, 2*time.Hour)
	plant(young, time.Minute)
	// Recovery claims whose sidecar is gone: an old one is collected, a young one kept.
	oldClaim, youngClaim := "_recovery/01DEADRECOVERY.claim", "_recovery/01JUSTRELEASING.claim"
	plant(oldClaim, time.Hour)
	plant(youngClaim, 0)
	liveRows := e.ok("query", "live", "--format", "csv")

	out := e.ok("gc", "--json")
	if strings.Contains(out, "null") {
		t.Fatalf("null in shale gc --json:\n%s", out)
	}
	var rep struct {
		Outcomes         []json.RawMessage `json:"outcomes"`
		DroppedLeftovers []struct {
			Key   string `json:"key"`
			Bytes int64  `json:"bytes"`
		} `json:"dropped_leftovers"`
		DroppedKept  int `json:"dropped_kept"`
		OrphanClaims []struct {
			Key string `json:"key"`
		} `json:"orphan_claims"`
		OrphanClaimsKept int `json:"orphan_claims_kept"`
		Tables           []struct {
			Table   string            `json:"table"`
			Deleted []json.RawMessage `json:"deleted"`
			Expired []uint64          `json:"expired"`
			Holds   []json.RawMessage `json:"holds"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Outcomes == nil || len(rep.DroppedLeftovers) != 1 || rep.DroppedLeftovers[0].Key != old ||
		rep.DroppedLeftovers[0].Bytes != int64(len("raced the drop")) || rep.DroppedKept != 1 {
		t.Fatalf("shale gc --json:\n%s", out)
	}
	if len(rep.Tables) != 1 || rep.Tables[0].Table != "live" || rep.Tables[0].Deleted == nil || rep.Tables[0].Holds == nil || len(rep.Tables[0].Deleted) != 0 {
		t.Fatalf("tables in shale gc --json:\n%s", out)
	}
	if len(rep.OrphanClaims) != 1 || rep.OrphanClaims[0].Key != oldClaim || rep.OrphanClaimsKept != 1 {
		t.Fatalf("orphaned claims in shale gc --json:\n%s", out)
	}
	for _, k := range []string{old, oldClaim} {
		if _, err := os.Stat(filepath.Join(store, k)); !os.IsNotExist(err) {
			t.Fatalf("%s still there: %v", k, err)
		}
	}
	for _, k := range []string{young, youngClaim} {
		if _, err := os.Stat(filepath.Join(store, k)); err != nil {
			t.Fatalf("young %s deleted: %v", k, err)
		}
	}
	if got := e.ok("query", "live", "--format", "csv"); got != liveRows {
		t.Fatalf("live rows changed by gc:\n%s\nwant\n%s", got, liveRows)
	}
	text := e.ok("gc", "--dry-run")
	if !strings.Contains(text, "dropped tables' leftovers: would delete 0") || !strings.Contains(text, "kept 1") ||
		!strings.Contains(text, "kept 1 recovery claim whose sidecar is gone") {
		t.Fatalf("shale gc --dry-run:\n%s", text)
	}
	plant(youngClaim, time.Hour)
	if text := e.ok("gc"); !strings.Contains(text, "deleted "+youngClaim) || !strings.Contains(text, "a recovery claim whose sidecar is gone") {
		t.Fatalf("shale gc:\n%s", text)
	}
}

// TestImportPausedPastGCFailsCleanly (issue 8 item 1, as a user meets it): `shale import`
// into an existing table is paused (SIGSTOP) after writing its data file; a little over a
// minute later by the files' clocks, `shale gc TABLE --grace 1m` collects the file; then
// SIGCONT. The import must fail (exit 1) saying nothing was imported, and every query of
// the table still works: no version names the deleted file.
func TestImportPausedPastGCFailsCleanly(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("paused")
	e.ok("import", e.file("base.csv", "id,name\n1,a\n2,b\n"), "--table", tbl)
	gate := filepath.Join(t.TempDir(), "go")
	cmd := exec.Command(shaleBin, "import", e.file("more.csv", "id,name\n3,c\n4,d\n"), "--table", tbl)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s",
		"SHALE_FAILPOINTS=manifest.before_txn_put=block("+gate+")")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	// Its data file appears under a directory named by its transaction.
	dataDir := filepath.Join(e.home, "store", tbl, "data")
	var files []string
	for deadline := time.Now().Add(30 * time.Second); len(files) < 2; {
		files, _ = filepath.Glob(filepath.Join(dataDir, "*", "*.arrow"))
		if time.Now().After(deadline) {
			t.Fatalf("the import wrote no data file: %v\n%s", files, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	for _, f := range files {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	gcOut := e.ok("gc", tbl, "--grace", "1m")
	if !strings.Contains(gcOut, "fenced 1 uncommitted transaction") {
		t.Fatalf("gc did not fence the paused import:\n%s", gcOut)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the import did not finish:\n%s", out.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out.String(), "nothing was imported") {
		t.Fatalf("the resumed import: %v\n%s", err, out.String())
	}
	if got := e.ok("query", tbl, "--format", "csv"); got != "id,name\n1,a\n2,b\n" {
		t.Fatalf("table after the failed import:\n%s", got)
	}
	e.ok("verify", tbl, "--all-versions")
}
