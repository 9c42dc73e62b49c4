package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// checkJSONObject parses s as exactly one JSON object and checks that no value in it is
// null and that each of lists is a JSON array (possibly empty) under that key.
func checkJSONObject(t *testing.T, what, s string, lists ...string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", what, err, s)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON value:\n%s", what, s)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: a %T, not an object:\n%s", what, v, s)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case nil:
			t.Errorf("%s: %s is null", what, path)
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("", obj)
	for _, k := range lists {
		if _, ok := obj[k].([]any); !ok {
			t.Errorf("%s: %q is %T, want a list:\n%s", what, k, obj[k], s)
		}
	}
	return obj
}

// docMember is one top-level member of a command's --json object as docs/json.md lists it.
type docMember struct{ list, optional bool }

// jsonDocMembers reads the "Members per command" table of docs/json.md: command (the
// first cell, in backquotes) → its top-level members (backquoted names in the second
// cell, outside parentheses; "x[]" a list, "x?" left out when it does not apply).
func jsonDocMembers(t *testing.T) map[string]map[string]docMember {
	t.Helper()
	b, err := os.ReadFile(repoFile("docs", "json.md"))
	if err != nil {
		t.Fatal(err)
	}
	parens := regexp.MustCompile(`\([^)]*\)`)
	ticks := regexp.MustCompile("`([^`]+)`")
	out := map[string]map[string]docMember{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`shale ") {
			continue
		}
		cmd := strings.Trim(strings.TrimSpace(cells[1]), "`")
		members := map[string]docMember{}
		for _, m := range ticks.FindAllStringSubmatch(parens.ReplaceAllString(cells[2], ""), -1) {
			name := m[1]
			var d docMember
			name, d.list = strings.CutSuffix(name, "[]")
			name, d.optional = strings.CutSuffix(name, "?")
			members[name] = d
		}
		out[cmd] = members
	}
	if len(out) < 15 {
		t.Fatalf("docs/json.md: %d command rows", len(out))
	}
	return out
}

// TestJSONOutputIsOneObjectForEveryCommand: with --json every command prints exactly one
// JSON object on stdout, with its lists under named keys ([] when empty) and no null
// anywhere, whose members are the ones docs/json.md lists for it; query's rows are JSON
// Lines, one object per row.
func TestJSONOutputIsOneObjectForEveryCommand(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("shape")
	csv := e.file("shape.csv", "id,name\n1,a\n2,b\n3,\n")
	docs := jsonDocMembers(t)
	cases := []struct {
		name string
		args []string
		doc  string // the command's row in docs/json.md
	}{
		{"create", []string{"create", tbl + "_c", "--schema", "id:int64!,name:string"}, "shale create TABLE"},
		{"import", []string{"import", csv, "--table", tbl}, "shale import FILE"},
		{"import again", []string{"import", csv, "--table", tbl, "--idempotency-key", "2"}, "shale import FILE"},
		{"create --compression", []string{"create", tbl + "_z", "--schema", "id:int64", "--compression", "lz4"}, "shale create TABLE"},
		{"import --compression", []string{"import", csv, "--table", tbl + "_l", "--compression", "lz4"}, "shale import FILE"},
		{"query --count", []string{"query", tbl, "--count"}, "shale query TABLE --count"},
		{"delete", []string{"delete", tbl, "--where", "id = 1"}, "shale delete TABLE"},
		{"delete nothing", []string{"delete", tbl, "--where", "id = 99"}, "shale delete TABLE"},
		{"update", []string{"update", tbl, "--set", "name = 'z'", "--where", "id = 2"}, "shale update TABLE"},
		{"index create", []string{"index", "create", tbl, "--column", "id"}, "shale index create TABLE"},
		{"index update", []string{"index", "update", tbl, "id_idx"}, "shale index update TABLE NAME"},
		{"index list", []string{"index", "list", tbl}, "shale index list TABLE"},
		{"query --explain", []string{"query", tbl, "--where", "id = 3", "--explain"}, "shale query TABLE --explain"},
		{"versions", []string{"versions", tbl}, "shale versions TABLE"},
		{"config", []string{"config", tbl}, "shale config TABLE"},
		{"config set", []string{"config", tbl, "app.k=v"}, "shale config TABLE KEY=VALUE"},
		{"config unset", []string{"config", tbl, "--unset", "app.k"}, "shale config TABLE KEY=VALUE"},
		{"config with keys", []string{"config", tbl + "_z"}, "shale config TABLE"},
		{"inspect", []string{"inspect", tbl}, "shale inspect TABLE"},
		{"index drop", []string{"index", "drop", tbl, "id_idx"}, "shale index drop TABLE NAME"},
		{"status", []string{"status"}, "shale status"},
		{"verify", []string{"verify"}, "shale verify [TABLE]"},
		{"verify TABLE", []string{"verify", tbl}, "shale verify [TABLE]"},
		{"compact --dry-run", []string{"compact", tbl, "--dry-run"}, "shale compact TABLE --dry-run"},
		{"compact", []string{"compact", tbl}, "shale compact TABLE"},
		{"recover", []string{"recover"}, "shale recover [TABLE]"},
		{"repair", []string{"repair"}, "shale repair [TABLE]"},
		{"repair TABLE", []string{"repair", tbl}, "shale repair [TABLE]"},
		{"gc --dry-run", []string{"gc", "--dry-run"}, "shale gc [TABLE]"},
		{"export -o", []string{"export", tbl, "-o", filepath.Join(e.dir, "x.parquet")}, "shale export TABLE -o FILE"},
		{"wal append", []string{"wal", "append", csv, "--table", tbl + "_c"}, "shale wal append FILE"},
		{"wal status", []string{"wal", "status", tbl + "_c"}, "shale wal status TABLE"},
		{"wal scan", []string{"wal", "scan"}, "shale wal scan [TABLE]"},
		{"wal merge", []string{"wal", "merge", tbl + "_c"}, "shale wal merge TABLE"},
		{"wal merge nothing", []string{"wal", "merge", tbl + "_c", "--shard", "0"}, "shale wal merge TABLE"},
		{"status with a WAL", []string{"status"}, "shale status"},
		{"bench", []string{"bench", "--data", "", "--rows", "1000", "--suites", "import", "--reps", "1"}, "shale bench"},
		{"drop", []string{"drop", tbl + "_c"}, "shale drop TABLE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(append(c.args, "--json")...)
			if r.code != 0 {
				t.Fatalf("shale %q --json: %v", c.args, r)
			}
			members, ok := docs[c.doc]
			if !ok {
				t.Fatalf("docs/json.md has no row for %q", c.doc)
			}
			var lists []string
			for k, m := range members {
				if m.list {
					lists = append(lists, k)
				}
			}
			obj := checkJSONObject(t, c.name, r.stdout)
			for k, m := range members {
				v, present := obj[k]
				switch {
				case !present && !m.optional:
					t.Errorf("%s: member %q documented but missing:\n%s", c.name, k, r.stdout)
				case present && m.list:
					if _, ok := v.([]any); !ok {
						t.Errorf("%s: %q is %T, documented as a list", c.name, k, v)
					}
				}
			}
			for k := range obj {
				if _, ok := members[k]; !ok {
					t.Errorf("%s: member %q is not in docs/json.md's row %q", c.name, k, c.doc)
				}
			}
		})
	}
	t.Run("query rows", func(t *testing.T) {
		out := e.ok("query", tbl, "--json")
		rows := jsonLines(t, out)
		if len(rows) != 4 || strings.Count(out, "\n") != 4 {
			t.Fatalf("query --json: want 4 JSON Lines, got\n%s", out)
		}
	})
}

// jsonErrorOf parses stderr as exactly one line holding the --json error object.
func jsonErrorOf(t *testing.T, what, stderr string) jsonError {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Fatalf("%s: stderr is not one line: %q", what, stderr)
	}
	var e jsonError
	dec := json.NewDecoder(strings.NewReader(stderr))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("%s: stderr %q: %v", what, stderr, err)
	}
	if e.Error.Message == "" || e.Error.Kind == "" || strings.HasPrefix(e.Error.Message, "shale: error") {
		t.Fatalf("%s: %+v", what, e)
	}
	return e
}

// TestJSONErrorsAreOneObjectOnStderr: with --json a failing command prints one line on
// stderr, {"error":{"message":…,"kind":…,"exit":N}}, exits with N, and prints nothing on
// stdout unless it has a report to give (verify's faults: the report is on stdout as
// usual). Usage errors found before the flags are parsed are JSON too.
func TestJSONErrorsAreOneObjectOnStderr(t *testing.T) {
	e := freshEnv(t)
	tbl := e.table("errs")
	e.ok("import", e.file("e.csv", "id,name\n1,a\n2,b\n"), "--table", tbl)
	nosuch := e.table("nosuch")
	cases := []struct {
		name string
		args []string
		exit int
		kind string
		msg  string
	}{
		{"unknown flag", []string{"query", tbl, "--bogus"}, exitUsage, kindUsage, "unknown flag: --bogus"},
		{"unknown command", []string{"frobnicate"}, exitUsage, kindUsage, "unknown command"},
		{"create bad schema", []string{"create", tbl + "_x", "--schema", "id:nope"}, exitUsage, kindUsage, "unknown type"},
		{"create existing", []string{"create", tbl, "--schema", "id:int64"}, exitError, kindExists, "exists"},
		{"import missing file", []string{"import", filepath.Join(e.dir, "missing.csv"), "--table", tbl}, exitError, kindNotFound, "missing.csv"},
		{"import stdin without --format", []string{"import", "-", "--table", tbl}, exitUsage, kindUsage, "needs --format"},
		{"query missing table", []string{"query", nosuch}, exitError, kindNotFound, "table not found"},
		{"query bad where", []string{"query", tbl, "--where", "id >"}, exitError, kindInvalidInput, "syntax error"},
		{"delete unknown column", []string{"delete", tbl, "--where", "nope = 1"}, exitError, kindInvalidInput, "unknown column nope"},
		{"query missing version", []string{"query", tbl, "--version", "99"}, exitError, kindNotFound, "no version 99"},
		{"delete without where", []string{"delete", tbl}, exitUsage, kindUsage, "needs --where"},
		{"update unknown column", []string{"update", tbl, "--set", "nope=1", "--where", "true"}, exitError, kindInvalidInput, "unknown column nope"},
		{"versions missing table", []string{"versions", nosuch}, exitError, kindNotFound, "table not found"},
		{"inspect missing table", []string{"inspect", nosuch}, exitError, kindNotFound, "table not found"},
		{"status with an argument", []string{"status", tbl}, exitUsage, kindUsage, "takes no arguments"},
		{"verify missing table", []string{"verify", nosuch}, exitError, kindNotFound, "table not found"},
		{"compact missing table", []string{"compact", nosuch}, exitError, kindNotFound, "table not found"},
		{"recover negative age", []string{"recover", "--min-age", "-1s"}, exitUsage, kindUsage, "--min-age"},
		{"repair --force alone", []string{"repair", tbl, "--force"}, exitUsage, kindUsage, "--force only takes effect with --confirm"},
		{"gc short grace", []string{"gc", "--grace", "1s"}, exitUsage, kindUsage, "--no-writers"},
		{"export missing table", []string{"export", nosuch, "--format", "csv"}, exitError, kindNotFound, "table not found"},
		{"bench unknown suite", []string{"bench", "--suites", "bogus"}, exitUsage, kindUsage, `unknown suite "bogus"`},
		{"bench zero reps", []string{"bench", "--reps", "0"}, exitUsage, kindUsage, "--reps must be at least 1"},
		{"config bad value", []string{"config", tbl, "shale.write.compression=brotli"}, exitError, kindInvalidInput, "shale.write.compression"},
		{"config malformed", []string{"config", tbl, "lz4"}, exitUsage, kindUsage, "want KEY=VALUE"},
		{"import --compression of an existing table", []string{"import", filepath.Join(e.dir, "e.csv"), "--table", tbl, "--compression", "lz4"}, exitUsage, kindUsage, "shale config"},
		{"create bad --compression", []string{"create", tbl + "_y", "--schema", "id:int64", "--compression", "gzip"}, exitUsage, kindUsage, "shale.write.compression"},
		{"drop missing table", []string{"drop", nosuch}, exitError, kindNotFound, "table not found"},
		{"demo", []string{"demo"}, exitUsage, kindUsage, "no --json output"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(append(c.args, "--json")...)
			if r.code != c.exit || r.stdout != "" {
				t.Fatalf("shale %q --json: want exit %d and nothing on stdout, got %v", c.args, c.exit, r)
			}
			got := jsonErrorOf(t, c.name, r.stderr)
			if got.Error.Exit != c.exit || got.Error.Kind != c.kind || !strings.Contains(got.Error.Message, c.msg) {
				t.Fatalf("shale %q --json: error %+v, want exit %d, kind %s, a message with %q", c.args, got.Error, c.exit, c.kind, c.msg)
			}
		})
	}
	t.Run("--json before the command", func(t *testing.T) {
		r := e.run("--json", "query", nosuch)
		if got := jsonErrorOf(t, "--json first", r.stderr); r.code != exitError || got.Error.Kind != kindNotFound {
			t.Fatalf("%v", r)
		}
	})
	t.Run("without --json errors stay text", func(t *testing.T) {
		r := e.run("query", nosuch)
		if !strings.HasPrefix(r.stderr, "shale: error: table not found") {
			t.Fatalf("%v", r)
		}
	})
	t.Run("verify faults: the report on stdout, the error on stderr", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(e.home, "store", tbl, "data", "*", "*.arrow"))
		if err != nil || len(files) == 0 {
			t.Fatalf("data files %v, %v", files, err)
		}
		if err := os.WriteFile(files[0], []byte("not arrow"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := e.run("verify", tbl, "--json")
		if r.code != exitError {
			t.Fatalf("verify of a damaged table: %v", r)
		}
		rep := checkJSONObject(t, "verify report", r.stdout, "tables", "faults", "notes")
		if ok, _ := rep["ok"].(bool); ok || len(rep["faults"].([]any)) == 0 {
			t.Fatalf("verify report: %s", r.stdout)
		}
		if got := jsonErrorOf(t, "verify", r.stderr); got.Error.Kind != kindCorrupt || got.Error.Exit != exitError {
			t.Fatalf("verify error: %+v", got)
		}
	})
}

// TestReportJSONKeysAndNulls: the report writer's rules on their own: snake_case keys for
// untagged Go types, nil slices and maps as [] and {}, null members left out (nulls inside
// lists kept), time.Time encoded by itself.
func TestReportJSONKeysAndNulls(t *testing.T) {
	for in, want := range map[string]string{"StoreURL": "store_url", "LoadStart": "load_start", "P50": "p50",
		"ByOp": "by_op", "GET": "get", "already_snake": "already_snake", "NumCPU": "num_cpu", "HTTPServer": "http_server"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
	type inner struct {
		Names []string
		Ptr   *int
	}
	v := struct {
		List  []inner
		Map   map[string][]int
		Any   any
		Inner inner
		Vals  []any
		When  time.Time
	}{List: []inner{{}}, Map: map[string][]int{"k": nil}, Vals: []any{1, nil}, When: time.Unix(0, 0).UTC()}
	var b strings.Builder
	if err := writeReport(&b, v, true); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatal(err)
	}
	want := `{"inner":{"names":[]},"list":[{"names":[]}],"map":{"k":[]},"vals":[1,null],"when":"1970-01-01T00:00:00Z"}`
	if g, _ := json.Marshal(got); string(g) != want {
		t.Errorf("report\n got  %s\n want %s", g, want)
	}
}
