package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fileCodecs returns the codec of each data file of table's current version, in fragment
// order, as `shale inspect --json` reports them.
func fileCodecs(e *env, table string) []string {
	e.t.Helper()
	var in inspection
	if err := json.Unmarshal([]byte(e.ok("inspect", table, "--json")), &in); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, f := range in.Fragments {
		for _, df := range f.Files {
			out = append(out, df.Compression)
		}
	}
	return out
}

// operations lists the operation of each of table's versions, oldest first.
func operations(e *env, table string) []string {
	e.t.Helper()
	vs := e.versions(table)
	slices.SortFunc(vs, func(a, b versionJSON) int { return int(a.Version) - int(b.Version) })
	var ops []string
	for _, v := range vs {
		ops = append(ops, v.Operation)
	}
	return ops
}

// configOf is `shale config TABLE --json`.
func configOf(e *env, table string) configJSON {
	e.t.Helper()
	var c configJSON
	if err := json.Unmarshal([]byte(e.ok("config", table, "--json")), &c); err != nil {
		e.t.Fatal(err)
	}
	if c.Table != table || c.Config == nil {
		e.t.Fatalf("config --json: %+v", c)
	}
	return c
}

func csvRows(n int) string {
	var b strings.Builder
	b.WriteString("id,city,fare\n")
	cities := []string{"Oslo", "Lima", "Pune", "Kobe"}
	for i := range n {
		fmt.Fprintf(&b, "%d,%s,%d.%02d\n", i, cities[i%len(cities)], i%97, i%100)
	}
	return b.String()
}

// TestConfigShowSetUnsetRoundTrip: `shale config TABLE` shows nothing for a new table;
// KEY=VALUE and --unset commit one update_config version each, printed; the shown
// configuration is sorted "key = value" lines and the --json object; a codec set with
// shale config applies to the next import (earlier files keep theirs).
func TestConfigShowSetUnsetRoundTrip(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("cfg")
	e.ok("import", e.file("a.csv", csvRows(50)), "--table", tbl) // versions 1 (create), 2 (append)

	if out := e.ok("config", tbl); !strings.Contains(out, "no configuration at version 2") {
		t.Fatalf("config of a new table: %q", out)
	}
	if c := configOf(e, tbl); c.Version != 2 || len(c.Config) != 0 {
		t.Fatalf("config --json of a new table: %+v", c)
	}

	out := e.ok("config", tbl, "shale.write.compression=lz4", "app.owner=ops team")
	if want := "Set app.owner=ops team, shale.write.compression=lz4 on " + tbl + ": version 3\n"; out != want {
		t.Fatalf("config set: %q, want %q", out, want)
	}
	if out := e.ok("config", tbl); out != "app.owner = ops team\nshale.write.compression = lz4\n" {
		t.Fatalf("config after set: %q", out)
	}

	var ch configChangeJSON
	if err := json.Unmarshal([]byte(e.ok("config", tbl, "shale.write.compression_level=9", "--unset", "app.owner", "--unset", "nosuch.key", "--json")), &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Version != 4 || ch.Set["shale.write.compression_level"] != "9" || !slices.Equal(ch.Unset, []string{"app.owner", "nosuch.key"}) ||
		len(ch.Config) != 2 || ch.Config["shale.write.compression"] != "lz4" || ch.Config["shale.write.compression_level"] != "9" {
		t.Fatalf("config set and unset --json: %+v", ch)
	}
	if c := configOf(e, tbl); c.Version != 4 || len(c.Config) != 2 || c.Config["shale.write.compression_level"] != "9" {
		t.Fatalf("config --json after the change: %+v", c)
	}
	out = e.ok("config", tbl, "--unset", "shale.write.compression_level")
	if want := "Unset shale.write.compression_level on " + tbl + ": version 5\n"; out != want {
		t.Fatalf("config unset: %q, want %q", out, want)
	}
	if got, want := operations(e, tbl), []string{"create", "append", "update_config", "update_config", "update_config"}; !slices.Equal(got, want) {
		t.Fatalf("versions: %q, want %q", got, want)
	}

	// The next write stores LZ4 files; the first import's file keeps ZSTD.
	e.ok("import", e.file("b.csv", csvRows(30)), "--table", tbl)
	if got := fileCodecs(e, tbl); !slices.Equal(got, []string{"zstd", "lz4"}) {
		t.Fatalf("codecs after config lz4 and a second import: %q", got)
	}
	if out := e.ok("query", tbl, "--count"); !strings.Contains(out, "80 rows") {
		t.Fatalf("count: %q", out)
	}
}

// TestConfigBadValuesAndMalformedArgumentsCommitNothing: a value the engine refuses
// fails with its ErrInvalidConfig message naming the key (exit 1, kind invalid_input),
// a malformed argument is a usage error (exit 2), and neither commits a version.
// Unknown keys are stored, as the engine allows; a "shale." one with a note.
func TestConfigBadValuesAndMalformedArgumentsCommitNothing(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("cfgbad")
	e.ok("create", tbl, "--schema", "id:int64")
	e.ok("config", tbl, "shale.write.compression=lz4")
	before := len(e.versions(tbl))

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"shale.write.compression=brotli"}, []string{"invalid configuration change", "shale.write.compression", `"brotli"`, "zstd, lz4 or none", tbl, "nothing was committed"}},
		{[]string{"shale.write.compression_level=99"}, []string{"shale.write.compression_level", `"99"`, "1 to 22"}},
		{[]string{"shale.write.compression_level=fast"}, []string{"shale.write.compression_level", `"fast"`}},
		{[]string{"app.x=1", "shale.write.compression_level=0"}, []string{"shale.write.compression_level", `"0"`}}, // a good key beside does not commit
	} {
		e.fails(exitError, c.want, append([]string{"config", tbl}, c.args...)...)
		r := e.run(append([]string{"config", tbl, "--json"}, c.args...)...)
		if got := jsonErrorOf(t, "config "+strings.Join(c.args, " "), r.stderr); r.code != exitError || got.Error.Kind != kindInvalidInput || r.stdout != "" {
			t.Fatalf("config %q --json: %v (%+v)", c.args, r, got)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"shale.write.compression"}, "want KEY=VALUE"},
		{[]string{"=lz4"}, "key before \"=\" is empty"},
		{[]string{"a=1", "a=2"}, `key "a" is given twice`},
		{[]string{"a=1", "--unset", "a"}, `key "a" is both set and unset`},
		{[]string{"--unset", ""}, "--unset needs a key"},
	} {
		e.fails(exitUsage, []string{c.want, "see 'shale config --help'"}, append([]string{"config", tbl}, c.args...)...)
	}
	e.fails(exitUsage, []string{"config needs TABLE"}, "config")
	e.fails(exitError, []string{"table not found"}, "config", e.table("nosuch"), "a=1")
	if n := len(e.versions(tbl)); n != before {
		t.Fatalf("%d versions after refused changes, want %d", n, before)
	}
	if out := e.ok("config", tbl); out != "shale.write.compression = lz4\n" {
		t.Fatalf("config after refused changes: %q", out)
	}

	// Unknown keys: stored as given; one under "shale." gets a note on stderr.
	r := e.run("config", tbl, "shale.write.compresion=none", "myapp.retention=30d")
	if r.code != 0 || !strings.Contains(r.stderr, "note: shale.write.compresion is not a key this build of shale reads") || strings.Contains(r.stderr, "myapp") {
		t.Fatalf("config with unknown keys: %v", r)
	}
	if c := configOf(e, tbl); c.Config["shale.write.compresion"] != "none" || c.Config["myapp.retention"] != "30d" || c.Config["shale.write.compression"] != "lz4" {
		t.Fatalf("config after unknown keys: %+v", c.Config)
	}
}

// TestImportCompressionLZ4: `import --compression lz4` creates the table with the codec
// in its first version (create, append), every data file is LZ4,
// and queries return what the same import into a ZSTD table returns.
func TestImportCompressionLZ4(t *testing.T) {
	e := sharedEnv(t)
	lz, zs := e.table("lz4"), e.table("zstd")
	csv := e.file("rides.csv", csvRows(3000))

	out := e.ok("import", csv, "--table", lz, "--compression", "lz4")
	if want := "Created " + lz + " (shale.write.compression=lz4) and imported 3,000 rows from rides.csv: version 2"; !strings.HasPrefix(out, want) {
		t.Fatalf("import --compression lz4: %q, want it to start %q", out, want)
	}
	e.ok("import", csv, "--table", zs)
	if got := operations(e, lz); !slices.Equal(got, []string{"create", "append"}) {
		t.Fatalf("versions of the LZ4 table: %q", got)
	}
	if got := e.ok("inspect", lz, "--version", "1"); !strings.Contains(got, "shale.write.compression = lz4") {
		t.Fatalf("the LZ4 table at version 1 (its create): %q", got)
	}
	if got := fileCodecs(e, lz); len(got) == 0 || slices.ContainsFunc(got, func(c string) bool { return c != "lz4" }) {
		t.Fatalf("codecs of the LZ4 table: %q", got)
	}
	if got := fileCodecs(e, zs); len(got) == 0 || slices.ContainsFunc(got, func(c string) bool { return c != "zstd" }) {
		t.Fatalf("codecs of the ZSTD table: %q", got)
	}
	if c := configOf(e, lz); c.Version != 2 || len(c.Config) != 1 || c.Config["shale.write.compression"] != "lz4" {
		t.Fatalf("config of the LZ4 table: %+v", c)
	}
	for _, q := range [][]string{{"--format", "csv"}, {"--format", "csv", "--where", "city = 'Pune' AND fare > 50"}} {
		a, b := e.ok(append([]string{"query", lz}, q...)...), e.ok(append([]string{"query", zs}, q...)...)
		if a != b || strings.Count(a, "\n") < 2 {
			t.Fatalf("query %q: the LZ4 table gives %d lines, the ZSTD table %d (or they differ)", q, strings.Count(a, "\n"), strings.Count(b, "\n"))
		}
	}

	// --json reports the configuration of the table it created.
	var res importResult
	if err := json.Unmarshal([]byte(e.ok("import", csv, "--table", e.table("lvl"), "--compression-level", "7", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Version != 2 || len(res.Config) != 1 || res.Config["shale.write.compression_level"] != "7" {
		t.Fatalf("import --compression-level 7 --json: %+v", res)
	}
}

// TestCompressionFlagsOnExistingTablesAndBadValues: --compression for a table that
// exists is refused (exit 2, pointing to shale config, nothing committed) unless the
// table has that codec already (the same import run again); bad values are usage errors
// found before anything is written; create --compression configures version 1.
func TestCompressionFlagsOnExistingTablesAndBadValues(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("exist")
	csv := e.file("x.csv", csvRows(20))
	e.ok("import", csv, "--table", tbl)
	before := len(e.versions(tbl))
	e.fails(exitUsage, []string{"table " + tbl + " exists", "shale config " + tbl + " shale.write.compression=lz4", "nothing was written"},
		"import", e.file("y.csv", csvRows(5)), "--table", tbl, "--compression", "lz4")
	e.fails(exitUsage, []string{"shale config"}, "import", csv, "--table", tbl, "--overwrite", "--compression", "none")
	e.fails(exitUsage, []string{"shale config"}, "import", csv, "--table", tbl, "--compression-level", "3")
	if n := len(e.versions(tbl)); n != before {
		t.Fatalf("%d versions after refused imports, want %d", n, before)
	}

	// The same import with the same flags, run again, is a duplicate, not a refusal.
	lz := e.table("again")
	e.ok("import", csv, "--table", lz, "--compression", "lz4")
	if out := e.ok("import", csv, "--table", lz, "--compression", "lz4"); !strings.Contains(out, "Already imported") {
		t.Fatalf("the same import again: %q", out)
	}

	// Bad values: usage errors before any I/O; no table is created.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--compression", "brotli"}, []string{"--compression brotli", "shale.write.compression", "zstd, lz4 or none"}},
		{[]string{"--compression-level", "99"}, []string{"--compression-level 99", "shale.write.compression_level", "1 to 22"}},
		{[]string{"--compression", "lz4", "--compression-level", "3"}, []string{"applies to zstd only"}},
	} {
		name := e.table("bad")
		e.fails(exitUsage, c.want, append([]string{"import", csv, "--table", name}, c.args...)...)
		e.fails(exitUsage, c.want, append([]string{"create", name, "--schema", "id:int64"}, c.args...)...)
		e.fails(exitError, []string{"table not found"}, "config", name)
	}

	// An import that creates a configured table and then fails drops it again.
	var sb strings.Builder
	sb.WriteString("n\n")
	for i := range 70000 { // past the first batch, read before the table is created
		fmt.Fprintf(&sb, "%d\n", i)
	}
	sb.WriteString("seven\n")
	failed := e.table("failcfg")
	e.fails(exitError, []string{`"seven" is not an int64`, "table " + failed + ", which this import had created, was dropped again"},
		"import", e.file("bad.csv", sb.String()), "--table", failed, "--compression", "lz4")
	e.fails(exitError, []string{"the table was dropped (drop marker at version 2)"}, "config", failed)

	// create --compression: the configuration is in version 1.
	cr := e.table("created")
	out := e.ok("create", cr, "--schema", "id:int64,city:string", "--compression", "none")
	if !strings.HasPrefix(out, "Created table "+cr+" (version 1, 2 columns, shale.write.compression=none)") {
		t.Fatalf("create --compression none: %q", out)
	}
	if got := operations(e, cr); !slices.Equal(got, []string{"create"}) {
		t.Fatalf("versions after create --compression: %q", got)
	}
	e.ok("import", e.file("z.csv", "id,city\n1,Oslo\n2,Lima\n"), "--table", cr)
	if got := fileCodecs(e, cr); !slices.Equal(got, []string{"none"}) {
		t.Fatalf("codecs after create --compression none and an import: %q", got)
	}
}
