package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unchanged asserts that a command left a table's versions as they were: the same
// manifest objects in the store and (when the table still reads) the same version list.
func (e *env) unchanged(table string, manifests int, versions int) {
	e.t.Helper()
	if got := e.manifests(table); got != manifests {
		e.t.Fatalf("table %s: %d manifests, want %d", table, got, manifests)
	}
	if versions >= 0 {
		if got := len(e.versions(table)); got != versions {
			e.t.Fatalf("table %s: %d versions, want %d", table, got, versions)
		}
	}
}

func TestBadInputsFailCleanly(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("bad")
	csvIn := e.file("good.csv", "id,name\n1,a\n2,b\n")
	e.ok("import", csvIn, "--table", tbl)
	const m, v = 2, 2 // create + append

	t.Run("missing file", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		e.fails(1, []string{"nope.csv", "no such file"}, "import", "nope.csv", "--table", tbl)
		e.unchanged(tbl, m, v)
		// A missing file never creates its table.
		e.fails(1, []string{"no such file"}, "import", "nope.parquet", "--table", tbl+"_new")
		if n := e.manifests(tbl + "_new"); n != 0 {
			t.Fatalf("%d manifests for a table whose import failed", n)
		}
	})
	t.Run("unsupported format", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		xls := e.file("sheet.xlsx", "PK\x03\x04 not a spreadsheet reader")
		e.fails(2, []string{"unsupported input format", `".xlsx"`, "sheet.xlsx"}, "import", xls, "--table", tbl)
		e.unchanged(tbl, m, v)
		// A file that is not what its extension says: nothing is created.
		fake := e.file("fake.parquet", "id,name\n1,a\n")
		e.fails(1, []string{"fake.parquet", "parquet"}, "import", fake, "--table", tbl+"_fake")
		if n := e.manifests(tbl + "_fake"); n != 0 {
			t.Fatalf("%d manifests for a table whose import failed", n)
		}
		fakeArrow := e.file("fake.arrow", "not arrow at all")
		e.fails(1, []string{"fake.arrow"}, "import", fakeArrow, "--table", tbl)
		e.unchanged(tbl, m, v)
	})
	t.Run("schema mismatch", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		other := e.file("other.csv", "id,title\n3,c\n")
		e.fails(1, []string{"schema mismatch", "title", tbl}, "import", other, "--table", tbl)
		wider := e.file("wider.jsonl", `{"id":3,"name":"c","extra":1}`+"\n")
		e.fails(1, []string{"schema mismatch", "extra"}, "import", wider, "--table", tbl)
		// Same names, other types (an Arrow IPC file of int16/float32 columns).
		path := filepath.Join(e.dir, "types.arrow")
		writeArrowFixture(t, path, 10, false)
		e.fails(1, []string{"schema mismatch", tbl}, "import", path, "--table", tbl)
		// Values that do not parse as the table's types.
		badVals := e.file("badvals.csv", "id,name\nseven,c\n")
		e.fails(1, []string{"badvals.csv", "seven"}, "import", badVals, "--table", tbl)
		e.unchanged(tbl, m, v)
	})
	t.Run("malformed where", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		for _, w := range []string{"id >", "id = = 1", "id = 1; DROP TABLE x", "name LIKE"} {
			e.fails(1, []string{tbl, "WHERE", "syntax error"}, "query", tbl, "--where", w)
			e.fails(1, []string{tbl, "WHERE", "syntax error"}, "delete", tbl, "--where", w)
		}
		e.unchanged(tbl, m, v)
	})
	t.Run("unknown column", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		e.fails(1, []string{"unknown column", "nosuch"}, "query", tbl, "--where", "nosuch = 1")
		e.fails(1, []string{"unknown column", "nosuch"}, "query", tbl, "--columns", "id,nosuch")
		e.fails(1, []string{"unknown column", "nosuch"}, "delete", tbl, "--where", "nosuch > 0")
		e.unchanged(tbl, m, v)
	})
	t.Run("bad table names", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		for _, name := range []string{"a..b", "..", "../" + tbl, "a/b", tbl + "/x", "/abs"} {
			e.fails(2, []string{"invalid table name"}, "create", name, "--schema", "id:int64")
			e.fails(2, []string{"invalid table name"}, "import", csvIn, "--table", name)
			e.fails(2, []string{"invalid table name"}, "query", name)
			e.fails(2, []string{"invalid table name"}, "delete", name, "--where", "true")
		}
		// Nothing was written outside the store's tables.
		ents, err := os.ReadDir(filepath.Join(e.home, "store"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range ents {
			if strings.HasPrefix(ent.Name(), "a") && len(ent.Name()) <= 4 {
				t.Fatalf("store holds %q", ent.Name())
			}
		}
		if _, err := os.Stat(filepath.Join(e.home, tbl)); !os.IsNotExist(err) {
			t.Fatalf("a table directory appeared outside the store: %v", err)
		}
		e.unchanged(tbl, m, v)
	})
}

func TestCorruptObjectsAreNamed(t *testing.T) {
	e := sharedEnv(t)
	t.Run("flipped byte in a manifest", func(t *testing.T) {
		// Its own state directory: a store with a corrupt published manifest makes
		// every later status fail, which other tests of the shared store would see.
		e := freshEnv(t)
		tbl := e.table("flip")
		e.ok("import", e.file("a.csv", "id,name\n1,a\n2,b\n"), "--table", tbl)
		dir := filepath.Join(e.home, "store", tbl, "_versions")
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) != 2 {
			t.Fatalf("versions dir: %v %v", ents, err)
		}
		head := ents[0].Name() // the first name is HEAD (inverted version numbers)
		p := filepath.Join(dir, head)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x01
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		key := tbl + "/_versions/" + head
		e.fails(1, []string{key, "corrupt"}, "query", tbl)
		e.fails(1, []string{key}, "delete", tbl, "--where", "id = 1")
		e.fails(1, []string{key}, "import", e.file("b.csv", "id,name\n3,c\n"), "--table", tbl)
		e.fails(1, []string{key}, "inspect", tbl)
		e.fails(1, []string{key}, "versions", tbl)
		e.unchanged(tbl, 2, -1)
	})
	t.Run("truncated data file", func(t *testing.T) {
		e := &env{t: t, home: e.home, dir: e.dir}
		tbl := e.table("trunc")
		e.ok("import", e.file("a.csv", "id,name\n1,a\n2,b\n"), "--table", tbl)
		// Data files live under the directory of the transaction that wrote them.
		files, err := filepath.Glob(filepath.Join(e.home, "store", tbl, "data", "*", "*.arrow"))
		if err != nil || len(files) != 1 {
			t.Fatalf("data files: %v %v", files, err)
		}
		p := files[0]
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, st.Size()/2); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Join(e.home, "store"), p)
		key := filepath.ToSlash(rel)
		e.fails(1, []string{key}, "query", tbl)
		e.fails(1, []string{key}, "delete", tbl, "--where", "id = 1")
		e.unchanged(tbl, 2, 2)
	})
}

// TestTableNameEmptyOrDashIsUsageError: `--table ""` does not fall back to the file's
// name, and a name starting with '-' (which no later command could name without "--")
// is refused by every command; both are usage errors that create nothing.
func TestTableNameEmptyOrDashIsUsageError(t *testing.T) {
	e := sharedEnv(t)
	base := e.table("dash")
	in := e.file(base+".csv", "a\n1\n")
	e.fails(2, []string{"--table needs a table name"}, "import", in, "--table", "")
	e.fails(2, []string{"--table needs a table name"}, "import", in, "-t", "")
	if n := e.manifests(base); n != 0 {
		t.Fatalf("import --table \"\" created table %s (%d manifests)", base, n)
	}
	dashFile := e.file("-"+base+".csv", "a\n1\n")
	for _, args := range [][]string{
		{"import", in, "--table", "-" + base},
		{"import", in, "--table=-" + base},
		{"import", "--", dashFile}, // the default name, from the file, starts with '-'
		{"create", "--schema", "a:int64", "--", "-" + base},
		{"query", "--", "-" + base},
		{"drop", "--", "-" + base},
		{"demo", "--table", "-" + base, "--data", in},
	} {
		e.fails(2, []string{"invalid table name", "starts with '-'"}, args...)
	}
	if n := e.manifests("-" + base); n != 0 {
		t.Fatalf("table -%s was created (%d manifests)", base, n)
	}
}
