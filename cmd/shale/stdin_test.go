package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportStdinStreamsAndSpoolsOnlyWhatNeedsSeeking: import - reads standard input:
// CSV (with a byte order mark), JSON Lines and Arrow IPC streams from a pipe, the Arrow
// IPC file format and Parquet from a pipe (through a temporary file, removed after), and
// stdin redirected from a regular file. It needs --format and --table (usage errors), and
// has no derived idempotency key, so the same input imported twice appends twice.
func TestImportStdinStreamsAndSpoolsOnlyWhatNeedsSeeking(t *testing.T) {
	e := sharedEnv(t)
	tmp := t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	src := e.table("stdinsrc")
	e.ok("import", e.file("s.csv", "id,name\n1,a\n2,b\n3,\n"), "--table", src)
	want := e.ok("query", src, "--format", "csv")
	arrowStream := e.ok("query", src, "--format", "arrow")
	parquetFile := filepath.Join(e.dir, "s.parquet")
	arrowFile := filepath.Join(e.dir, "s.arrow")
	e.ok("export", src, "--format", "parquet", "-o", parquetFile)
	e.ok("export", src, "--format", "arrow", "-o", arrowFile)
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// Streamed formats get a $TMPDIR that does not exist, so spooling them would fail.
	streamEnv := []string{"TMPDIR=" + filepath.Join(tmp, "missing")}
	cases := []struct {
		name, format, input string
		spooled             bool
	}{
		{"csv with a byte order mark", "csv", "\ufeffid,name\n1,a\n2,b\n3,\n", false},
		{"jsonl", "jsonl", `{"id":1,"name":"a"}` + "\n" + `{"id":2,"name":"b"}` + "\n" + `{"id":3,"name":null}` + "\n", false},
		{"arrow stream", "arrow", arrowStream, false},
		{"arrow file", "arrow", read(arrowFile), true},
		{"parquet", "parquet", read(parquetFile), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := env
			if !c.spooled {
				env = streamEnv
			}
			tbl := e.table("stdin")
			r := e.runIO(strings.NewReader(c.input), nil, env, "import", "-", "--format", c.format, "--table", tbl)
			if r.code != 0 || !strings.Contains(r.stdout, "imported 3 rows from stdin") {
				t.Fatalf("import -: %v", r)
			}
			if got := e.ok("query", tbl, "--format", "csv"); got != want {
				t.Fatalf("rows\n%s\nwant\n%s", got, want)
			}
			// No key: the same input again appends again.
			if r := e.runIO(strings.NewReader(c.input), nil, env, "import", "-", "--format", c.format, "--table", tbl); r.code != 0 ||
				!strings.Contains(r.stdout, "Appended 3 rows to "+tbl+" from stdin") {
				t.Fatalf("second import -: %v", r)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("temporary files left in $TMPDIR: %v", left)
			}
		})
	}
	t.Run("redirected regular file", func(t *testing.T) {
		f, err := os.Open(parquetFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tbl := e.table("stdin")
		if r := e.runIO(f, nil, env, "import", "-", "--format", "parquet", "--table", tbl, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"rows": 3`) {
			t.Fatalf("import - < file: %v", r)
		}
		if got := e.ok("query", tbl, "--format", "csv"); got != want {
			t.Fatalf("rows\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("with an idempotency key", func(t *testing.T) {
		tbl := e.table("stdin")
		for range 2 {
			if r := e.runIO(strings.NewReader(cases[0].input), nil, env, "import", "-", "--format", "csv", "--table", tbl, "--idempotency-key", "k1"); r.code != 0 {
				t.Fatalf("import -: %v", r)
			}
		}
		if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "3 rows") {
			t.Fatalf("a keyed import - twice: %s", out)
		}
	})
	e.fails(exitUsage, []string{"import - reads standard input: it needs --format", "--table"}, "import", "-", "--table", "x")
	e.fails(exitUsage, []string{"import - reads standard input: it needs --format", "--table"}, "import", "-", "--format", "csv")
}
