package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// interruptAt runs shale args with the failpoint spec armed, waits until ready() holds
// (the command has reached the point the test wants), sends it SIGINT as Ctrl-C does, and
// returns its result.
func (e *env) interruptAt(spec string, ready func() bool, args ...string) result {
	e.t.Helper()
	cmd := exec.Command(shaleBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s", "SHALE_FAILPOINTS="+spec)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for !ready() {
		select {
		case err := <-done:
			e.t.Fatalf("shale %q ended before it was interrupted: %v\n%s\n%s", args, err, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			e.t.Fatalf("shale %q never reached the point to interrupt", args)
		}
		time.Sleep(20 * time.Millisecond) // polling the store for the command's progress
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		e.t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		e.t.Fatalf("shale %q did not end within a minute of SIGINT", args)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// count returns a function counting the files matching a glob under the env's store.
func (e *env) count(glob string) func() int {
	return func() int {
		m, err := filepath.Glob(filepath.Join(e.home, "store", glob))
		if err != nil {
			e.t.Fatal(err)
		}
		return len(m)
	}
}

// bigCSV writes a one-column CSV of n rows: more than one data file's worth (2^20 rows)
// makes an import store a data file before it ends.
func (e *env) bigCSV(name string, n int) string {
	var sb strings.Builder
	sb.WriteString("n\n")
	for i := range n {
		fmt.Fprintf(&sb, "%d\n", i)
	}
	return e.file(name, sb.String())
}

// TestInterruptedImportCleansUpAndSaysInterrupted: Ctrl-C during an import (after it
// stored its first data file, or while its commit is in flight but before its version is
// put) says "interrupted", never "transient store error: context canceled", and leaves
// nothing: a table the import created is dropped again, and into an existing table the
// files it wrote are deleted and no version is added. Ctrl-C after the version was put
// (the process is told the outcome is unknown) finds the version and publishes it.
func TestInterruptedImportCleansUpAndSaysInterrupted(t *testing.T) {
	e := sharedEnv(t)
	big := e.bigCSV("big.csv", 1<<20+1000)
	// The writer encodes 16 batches of 65,536 rows into its first data file and stores
	// it; the 17th batch blocks until the interrupt.
	const afterFirstFile = "fragment.encode_batch=after(16)->block(/nonexistent)"

	t.Run("new table", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		tbl := e.table("intnew")
		files := e.count(tbl + "/data/*/*.arrow")
		r := e.interruptAt(afterFirstFile, func() bool { return files() == 1 }, "import", big, "--table", tbl)
		if r.code != 1 || !strings.Contains(r.stderr, "shale: error: interrupted: nothing was imported; table "+tbl+", which this import had created, was dropped again") ||
			strings.Contains(r.stderr, "context canceled") {
			t.Fatalf("interrupted import into a new table: %v", r)
		}
		if n := files(); n != 0 {
			t.Fatalf("%d data files left", n)
		}
		e.fails(1, []string{"not found"}, "query", tbl)
	})

	existing := e.table("intold")
	e.ok("import", e.file("one.csv", "n\n-1\n"), "--table", existing)
	files := e.count(existing + "/data/*/*.arrow")
	records := e.count(existing + "/_txn/*.txn")
	want := e.ok("query", existing, "--format", "csv")
	for _, tc := range []struct {
		name, spec, said string
		ready            func() bool
	}{
		{"after the first data file", afterFirstFile, "the data file it had written was deleted", func() bool { return files() == 2 }},
		{"commit in flight", "manifest.before_version_put=block(/nonexistent)", "the 2 data files it had written were deleted",
			func() bool { return records() == 3 }},
	} {
		t.Run("existing table, "+tc.name, func(t *testing.T) {
			e := &env{t: t, home: e.home, dir: e.dir}
			r := e.interruptAt(tc.spec, tc.ready, "import", big, "--table", existing)
			if r.code != 1 || !strings.Contains(r.stderr, "shale: error: interrupted: nothing was imported; "+tc.said) ||
				strings.Contains(r.stderr, "context canceled") {
				t.Fatalf("interrupted import into an existing table: %v", r)
			}
			if n := files(); n != 1 {
				t.Fatalf("%d data files, want the table's 1", n)
			}
			if got := e.ok("query", existing, "--format", "csv"); got != want || len(e.versions(existing)) != 2 {
				t.Fatalf("the table changed: %q, %+v", got, e.versions(existing))
			}
		})
	}

	for _, created := range []bool{false, true} {
		t.Run(fmt.Sprintf("after the version was put, new table %v", created), func(t *testing.T) {
			e := &env{t: t, home: e.home, dir: e.dir}
			tbl := e.table("intlanded")
			before, verb, wantRows := 1, "Appended 1,049,576 rows to "+tbl, int64(1<<20+1001)
			spec := "manifest.after_version_put=block(/nonexistent)"
			if created {
				// The table's creation puts a version first: let it pass.
				before, verb, wantRows = 0, "Created "+tbl+" and imported 1,049,576 rows", 1<<20+1000
				spec = "manifest.after_version_put=after(1)->block(/nonexistent)"
			} else {
				e.ok("import", e.file("one.csv", "n\n-1\n"), "--table", tbl)
			}
			manifests := func() int { return e.manifests(tbl) }
			r := e.interruptAt(spec, func() bool { return manifests() == before+2 },
				"import", big, "--table", tbl)
			if r.code != 0 || !strings.Contains(r.stderr, fmt.Sprintf("note: interrupted, but it had committed already, as version %d of %s", before+2, tbl)) ||
				!strings.Contains(r.stdout, verb) {
				t.Fatalf("import interrupted after its version was put: %v", r)
			}
			if vs := e.versions(tbl); len(vs) != before+2 || !vs[before+1].Published || vs[before+1].Rows != wantRows {
				t.Fatalf("versions: %+v", vs)
			}
		})
	}
}

// TestFailedImportOfNewTableLeavesNoTable: an import that creates its table and then
// fails (a value past the first batch that does not parse) drops the table again and
// deletes what it wrote; into an existing table it deletes its files and adds no version.
func TestFailedImportOfNewTableLeavesNoTable(t *testing.T) {
	e := sharedEnv(t)
	var sb strings.Builder
	sb.WriteString("n\n")
	for i := range 70000 { // past the first batch (65,536 rows), read before the table is created
		fmt.Fprintf(&sb, "%d\n", i)
	}
	sb.WriteString("seven\n")
	bad := e.file("bad.csv", sb.String())
	tbl := e.table("failnew")
	e.fails(1, []string{`line 70,002, column "n": "seven" is not an int64`, "table " + tbl + ", which this import had created, was dropped again"},
		"import", bad, "--table", tbl)
	e.fails(1, []string{"not found"}, "query", tbl)
	if m, _ := filepath.Glob(filepath.Join(e.home, "store", tbl, "data", "*", "*")); len(m) != 0 {
		t.Fatalf("files left: %v", m)
	}

	old := e.table("failold")
	e.ok("import", e.file("one.csv", "n\n-1\n"), "--table", old)
	e.fails(1, []string{`line 70,002, column "n"`, "nothing was imported"}, "import", bad, "--table", old)
	if vs := e.versions(old); len(vs) != 2 {
		t.Fatalf("versions after a failed append: %+v", vs)
	}
	if m, _ := filepath.Glob(filepath.Join(e.home, "store", old, "data", "*", "*")); len(m) != 1 {
		t.Fatalf("data files after a failed append: %v, want the table's one", m)
	}
}

// TestInterruptedCommandsSayInterruptedAndWhatTheyLeft: Ctrl-C during a compaction, a
// delete or an update says "interrupted" and what the interruption left, never the
// operation the cancellation happened to cut short ('WHERE "…": greater_equal kernel:
// interrupt signal received', 'filter deleted rows of <key>: …'), and leaves the table
// as it was. An interrupted compaction resolves its own recovery sidecar at once (its
// abort version fences it; its files are deleted): status shows nothing pending and
// 'shale recover' need not be run after waiting for --min-age.
func TestInterruptedCommandsSayInterruptedAndWhatTheyLeft(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("intcmd")
	for i := range 3 {
		e.ok("import", e.file(fmt.Sprintf("p%d.csv", i), fmt.Sprintf("id,v\n%d,1\n%d,2\n", 2*i, 2*i+1)), "--table", tbl)
	}
	want := e.ok("query", tbl, "--format", "csv")
	versions := len(e.versions(tbl))
	sidecars := e.count("_recovery/*.json")
	records := e.count(tbl + "/_txn/*.txn")

	t.Run("compact", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		r := e.interruptAt("compaction.read_batch=block(/nonexistent)", func() bool { return sidecars() == 1 }, "compact", tbl)
		if r.code != 1 || !strings.Contains(r.stderr, "shale: error: interrupted: nothing was compacted: "+tbl+" is unchanged (abort version") ||
			strings.Contains(r.stderr, "interrupt signal received") {
			t.Fatalf("interrupted compaction: %v", r)
		}
		if n := sidecars(); n != 0 {
			t.Fatalf("%d recovery sidecars left", n)
		}
		if out := e.ok("status"); !strings.Contains(out, "in sync") || strings.Contains(out, "pending") {
			t.Fatalf("status after an interrupted compaction:\n%s", out)
		}
		versions++ // the abort version
	})
	for _, c := range []struct {
		name, spec string
		args       []string
	}{
		{"delete", "manifest.before_version_put=block(/nonexistent)", []string{"delete", tbl, "--where", "v > 1"}},
		{"update", "manifest.before_version_put=block(/nonexistent)", []string{"update", tbl, "--set", "v = v + 1", "--where", "v > 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &env{t: t, home: e.home, dir: e.dir}
			before := records()
			r := e.interruptAt(c.spec, func() bool { return records() > before }, c.args...)
			if r.code != 1 || !strings.Contains(r.stderr, "shale: error: interrupted: nothing was committed: "+tbl+" is unchanged") ||
				strings.Contains(r.stderr, "WHERE") || strings.Contains(r.stderr, "interrupt signal received") {
				t.Fatalf("interrupted %s: %v", c.name, r)
			}
		})
	}
	if got := e.ok("query", tbl, "--format", "csv"); got != want || len(e.versions(tbl)) != versions {
		t.Fatalf("the table changed: %q, %d versions, want %d", got, len(e.versions(tbl)), versions)
	}
}
