package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runIO runs the binary with stdin and stdout given (nil: empty stdin, captured stdout)
// and extra environment entries; stderr is captured.
func (e *env) runIO(stdin io.Reader, stdout io.Writer, extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, shaleBin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "SHALE_HOME="+e.home, "SHALE_ETCD_IDLE=20s"), extra...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	if stdout != nil {
		cmd.Stdout = stdout
	}
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		e.t.Fatalf("run shale %q: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// TestQueryCountCountsMatchingRowsWithoutAJSONPipe: query --count prints the number of
// live rows (deletions applied), with --where, at --version N, and as one JSON object with
// --json; it refuses flags that shape rows.
func TestQueryCountCountsMatchingRowsWithoutAJSONPipe(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("count")
	var b strings.Builder
	b.WriteString("id,city\n")
	for i := range 1500 {
		fmt.Fprintf(&b, "%d,%s\n", i, []string{"SEA", "SFO", "LAX"}[i%3])
	}
	e.ok("import", e.file("c.csv", b.String()), "--table", tbl) // version 2
	e.ok("delete", tbl, "--where", "city = 'SEA' AND id < 300") // version 3: 100 rows

	if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "1,400 rows (version 3, ") {
		t.Errorf("--count: %q", out)
	}
	if out := e.ok("query", tbl, "--count", "--where", "city = 'SEA'"); !strings.HasPrefix(out, "400 rows (version 3, ") {
		t.Errorf("--count --where: %q", out)
	}
	if out := e.ok("query", tbl, "--count", "--where", "id = 7"); !strings.HasPrefix(out, "1 row (version 3, ") {
		t.Errorf("--count of one row: %q", out)
	}
	if out := e.ok("query", tbl, "--count", "--version", "2", "--where", "city = 'SEA'"); !strings.HasPrefix(out, "500 rows (version 2, ") {
		t.Errorf("--count --version 2: %q", out)
	}
	var got struct {
		Table   string `json:"table"`
		Version uint64 `json:"version"`
		Where   string `json:"where"`
		Count   int64  `json:"count"`
	}
	if err := json.Unmarshal([]byte(e.ok("query", tbl, "--count", "--where", "city <> 'SEA'", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Table != tbl || got.Version != 3 || got.Where != "city <> 'SEA'" || got.Count != 1000 {
		t.Errorf("--count --json: %+v", got)
	}
	for _, flag := range [][]string{{"--limit", "3"}, {"--columns", "id"}, {"--format", "csv"}} {
		e.fails(exitUsage, []string{"--count", flag[0]}, append([]string{"query", tbl, "--count"}, flag...)...)
	}
	e.fails(exitError, []string{"unknown column nope"}, "query", tbl, "--count", "--where", "nope = 1")
}

// TestQueryVersionAboveThePublishedOneGetsANote: reading a committed version readers are
// not directed to (a writer died between its commit and its publish) says so on stderr and
// leaves the rows on stdout clean; the published version and older ones get no note.
func TestQueryVersionAboveThePublishedOneGetsANote(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("unpub")
	csv := e.file("u.csv", "a,b\n1,x\n2,y\n")
	e.ok("import", csv, "--table", tbl)                                                              // version 2, published
	e.killedAt("engine.before_publish", "import", csv, "--table", tbl, "--idempotency-key", "again") // version 3
	r := e.run("query", tbl, "--version", "3", "--format", "csv")
	if r.code != 0 || r.stdout != "a,b\n1,x\n2,y\n1,x\n2,y\n" {
		t.Fatalf("query --version 3: %v", r)
	}
	want := "note: version 3 is above the published version 2 of " + tbl + ": it is committed, but readers are not directed to it yet"
	if !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("stderr %q, want one line starting %q", r.stderr, want)
	}
	if r := e.run("query", tbl, "--version", "3", "--count"); r.code != 0 || !strings.HasPrefix(r.stderr, want) {
		t.Fatalf("query --version 3 --count: %v", r)
	}
	for _, args := range [][]string{{"query", tbl, "--version", "2"}, {"query", tbl}} {
		if r := e.run(args...); r.code != 0 || r.stderr != "" {
			t.Fatalf("%q: %v", args, r)
		}
	}
}

// openPty opens a pseudo-terminal pair (Linux).
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open pts: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// TestQueryArrowToDevNullIsNotATerminal: /dev/null is a character device but not a
// terminal, so --format arrow > /dev/null runs; a real terminal is still refused.
func TestQueryArrowToDevNullIsNotATerminal(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("devnull")
	e.ok("import", e.file("d.csv", "a\n1\n2\n"), "--table", tbl)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, format := range []string{"arrow", "csv"} {
		if r := e.runIO(nil, null, nil, "query", tbl, "--format", format); r.code != 0 || r.stderr != "" {
			t.Fatalf("query --format %s > /dev/null: %v", format, r)
		}
	}
	_, tty := openPty(t)
	r := e.runIO(nil, tty, nil, "query", tbl, "--format", "arrow")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--format arrow writes binary Arrow IPC; redirect stdout") {
		t.Fatalf("query --format arrow to a terminal: %v", r)
	}
}
