package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/shale-db/shale/manifest"
)

func TestExitCodes(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("codes")
	e.ok("create", tbl, "--schema", "id:int64,name:string")

	usage := [][]string{
		{},                                     // no command
		{"bogus"},                              // unknown command
		{"query"},                              // missing argument
		{"query", tbl, "extra"},                // extra argument
		{"query", tbl, "--bogus"},              // unknown flag
		{"--bogus", "status"},                  // unknown global flag
		{"create", tbl + "x"},                  // missing required --schema
		{"create", "t", "--schema", "a:int99"}, // bad flag value
		{"query", tbl, "--format", "xml"},      // bad flag value
		{"query", tbl, "--limit", "many"},      // flag value of the wrong type
		{"delete", tbl},                        // missing --where
		{"import", "x.csv", "--format", "xls"},
	}
	for _, args := range usage {
		e.fails(2, []string{"see 'shale"}, args...)
	}
	for _, args := range [][]string{{"--help"}, {"query", "--help"}, {"status"}, {"versions", tbl}} {
		if r := e.run(args...); r.code != 0 {
			t.Fatalf("shale %q: %v", args, r)
		}
	}
	e.fails(1, []string{"table not found", `"nosuch_table"`}, "query", "nosuch_table")
	e.fails(1, []string{tbl, "version 99", "version not found"}, "query", tbl, "--version", "99")
	e.fails(1, []string{"table already exists", tbl}, "create", tbl, "--schema", "id:int64")
}

// TestTableNameWithNUL runs the command line in process: a NUL byte cannot be passed in
// an argument to exec, but the name is refused before any I/O either way (a usage error,
// as every invalid table name is).
func TestTableNameWithNUL(t *testing.T) {
	for _, args := range [][]string{
		{"query", "a\x00b"},
		{"create", "a\x00b", "--schema", "x:int64"},
		{"import", "f.csv", "--table", "a\x00b"},
		{"delete", "a\x00b", "--where", "true"},
		{"versions", "a\x00b"},
		{"inspect", "a\x00b"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"--home", t.TempDir()}, args...), &out, &errb)
		if code != exitUsage {
			t.Fatalf("%q: exit %d, want %d; stderr %q", args, code, exitUsage, errb.String())
		}
		if !strings.Contains(errb.String(), manifest.ErrInvalidTableName.Error()) || !strings.Contains(errb.String(), "NUL") {
			t.Fatalf("%q: stderr %q", args, errb.String())
		}
		if strings.Count(errb.String(), "\n") != 1 {
			t.Fatalf("%q: want one line, got %q", args, errb.String())
		}
	}
}

func TestQueryFormats(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("formats")
	e.ok("create", tbl, "--schema", "id:int64!,city:string,fare:float64,paid:bool,at:timestamp[us],day:date32,n:int32")
	csvIn := e.file("rides.csv", `id,city,fare,paid,at,day,n
1,Oslo,12.5,true,2024-01-02 03:04:05,2024-01-02,7
2,"Rio, Brazil",,false,2024-02-03 04:05:06.123456,2024-02-03,
3,Lima,3.25,,,,-2
`)
	out := e.ok("import", csvIn, "--table", tbl)
	if !strings.Contains(out, "Appended 3 rows") || !strings.Contains(out, "version 2") {
		t.Fatalf("import output %q", out)
	}

	// table: aligned text with a header and a footer.
	out = e.ok("query", tbl)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "id") || !strings.HasPrefix(lines[1], "--") ||
		!strings.Contains(lines[3], "Rio, Brazil") || !strings.Contains(lines[5], "3 rows, version 2") {
		t.Fatalf("table output:\n%s", out)
	}
	if !strings.Contains(lines[4], "null") {
		t.Fatalf("nulls should print as null: %q", lines[4])
	}
	// Columns line up: every row has "city" values starting at the header's offset.
	col := strings.Index(lines[0], "city")
	for _, l := range lines[2:5] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Fatalf("misaligned row %q (city at %d)", l, col)
		}
	}

	// csv: the input comes back (nulls as empty fields).
	out = e.ok("query", tbl, "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"id", "city", "fare", "paid", "at", "day", "n"},
		{"1", "Oslo", "12.5", "true", "2024-01-02 03:04:05", "2024-01-02", "7"},
		{"2", "Rio, Brazil", "", "false", "2024-02-03 04:05:06.123456", "2024-02-03", ""},
		{"3", "Lima", "3.25", "", "", "", "-2"},
	}
	if !equalRecords(recs, want) {
		t.Fatalf("csv output %q, want %q", recs, want)
	}

	// json: JSON Lines with keys in column order, numbers as numbers, nulls as null.
	out = e.ok("query", tbl, "--format", "json", "--where", "id >= 2", "--columns", "n,city,fare")
	if got := strings.Split(strings.TrimSpace(out), "\n"); len(got) != 2 ||
		got[0] != `{"n":null,"city":"Rio, Brazil","fare":null}` || got[1] != `{"n":-2,"city":"Lima","fare":3.25}` {
		t.Fatalf("json output %q", out)
	}
	// --json alone selects JSON Lines too; --limit stops early.
	if rows := jsonLines(t, e.ok("query", tbl, "--json", "--limit", "1")); len(rows) != 1 || rows[0]["id"] != 1.0 {
		t.Fatalf("--json --limit 1: %v", rows)
	}

	// arrow: an IPC stream with the table's schema.
	r := e.run("query", tbl, "--format", "arrow", "--where", "paid")
	if r.code != 0 {
		t.Fatal(r)
	}
	rdr, err := ipc.NewReader(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if f := rdr.Schema().Field(4); f.Name != "at" || !arrow.TypeEqual(f.Type, &arrow.TimestampType{Unit: arrow.Microsecond}) {
		t.Fatalf("arrow schema %v", rdr.Schema())
	}
	var ids []int64
	for rdr.Next() {
		ids = append(ids, rdr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if rdr.Err() != nil || len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("arrow rows %v (err %v)", ids, rdr.Err())
	}

	// Time travel: version 1 is the empty table.
	if out := e.ok("query", tbl, "--version", "1", "--format", "csv"); out != "id,city,fare,paid,at,day,n\n" {
		t.Fatalf("version 1: %q", out)
	}
}

func TestDeleteVersionsInspectStatus(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("dvis")
	e.ok("import", e.file("pts.jsonl", `{"k":1,"v":"a"}
{"k":2,"v":"b"}
{"k":3,"v":"c"}
`), "--table", tbl)
	out := e.ok("delete", tbl, "--where", "k = 2")
	if !strings.Contains(out, "Deleted 1 row from") || !strings.Contains(out, "version 3") {
		t.Fatalf("delete: %q", out)
	}
	// Deleting nothing commits nothing.
	if out := e.ok("delete", tbl, "--where", "k = 2"); !strings.Contains(out, "nothing committed (version 3)") {
		t.Fatalf("second delete: %q", out)
	}
	vs := e.versions(tbl)
	if len(vs) != 3 || vs[0].Operation != "create" || vs[1].Operation != "append" || vs[2].Operation != "delete" ||
		vs[1].Rows != 3 || vs[2].Rows != 2 || !vs[2].Published {
		t.Fatalf("versions %+v", vs)
	}
	if out := e.ok("versions", tbl); !strings.Contains(out, "VERSION") || strings.Count(out, "\n") != 4 {
		t.Fatalf("versions table:\n%s", out)
	}

	var in inspection
	if err := json.Unmarshal([]byte(e.ok("inspect", tbl, "--json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.Version != 3 || in.Published != 3 || in.Rows.Live != 2 || in.Rows.Deleted != 1 || len(in.Fragments) != 1 ||
		in.Fragments[0].Deletion == nil || in.Fragments[0].Deletion.Deleted != 1 || len(in.Fragments[0].Files) != 1 ||
		in.Fragments[0].Files[0].Rows != 3 || in.Fragments[0].Files[0].Size <= 0 || in.Transaction.Predicate != "k = 2" {
		t.Fatalf("inspect: %+v", in)
	}
	if len(in.Columns) != 2 || in.Columns[0].Name != "k" || in.Columns[0].Min != "1" || in.Columns[0].Max != "3" ||
		in.Columns[1].Min != `"a"` || in.Columns[1].Max != `"c"` {
		t.Fatalf("column statistics: %+v", in.Columns)
	}
	out = e.ok("inspect", tbl, "--version", "2")
	for _, w := range []string{"version 2 (published version 3)", "Deletion vectors\n  none", "_versions/", "data/"} {
		if !strings.Contains(out, w) {
			t.Fatalf("inspect --version 2 lacks %q:\n%s", w, out)
		}
	}

	var st struct {
		Tables []struct {
			Table           string
			Head, Published uint64
		}
	}
	if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range st.Tables {
		if s.Table == tbl {
			found = s.Head == 3 && s.Published == 3
		}
	}
	if !found {
		t.Fatalf("status lacks %s at 3/3: %+v", tbl, st)
	}
}

func equalRecords(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x1f") != strings.Join(b[i], "\x1f") {
			return false
		}
	}
	return true
}

// TestOutputCountsReadAsEnglish: a count of one takes the singular ("1 row", "1 fragment",
// "1 column", never "1 rows" or "1 data file(s)"), larger counts have thousands
// separators, and a rate is not printed for an import too small to have one.
func TestOutputCountsReadAsEnglish(t *testing.T) {
	e := sharedEnv(t)
	one, many := e.table("one"), e.table("many")
	checks := []struct {
		args []string
		want []string
	}{
		{[]string{"create", one, "--schema", "a:int64"}, []string{"(version 1, 1 column)"}},
		{[]string{"import", e.file("one.csv", "a\n7\n"), "--table", one}, []string{"Appended 1 row to " + one}},
		{[]string{"query", one}, []string{"(1 row, version 2,"}},
		{[]string{"inspect", one}, []string{"1 fragment, 1 data file (", "0 deletion vectors"}},
		{[]string{"compact", one, "--dry-run"}, []string{"(version 2, 1 fragment)"}},
		{[]string{"verify", one}, []string{"2 manifests; read version 2: 1 data file, 0 deletion vectors,", "verified 1 table: no faults"}},
		{[]string{"delete", one, "--where", "a = 7"}, []string{"Deleted 1 row from " + one}},
		{[]string{"import", e.bigCSV("many.csv", 1500), "--table", many}, []string{"imported 1,500 rows", "rows/s"}},
		{[]string{"update", many, "--set", "n = n + 1", "--where", "n < 1200"}, []string{"Updated 1,200 rows of " + many}},
		{[]string{"drop", one}, []string{" objects deleted)"}},
	}
	for _, c := range checks {
		out := e.ok(c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("shale %q: %q lacks %q", c.args, out, w)
			}
		}
		for _, bad := range []string{"(s)", " 1 rows", " 1 fragments", " 1 columns", " 1 data files", " 0 rows/s"} {
			if strings.Contains(out, bad) {
				t.Fatalf("shale %q says %q: %s", c.args, bad, out)
			}
		}
	}
}
