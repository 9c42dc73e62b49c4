package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
)

// spreadCSV writes rows [from, to) of a CSV with columns id, k, s: k is a permutation of
// the ids (7919 is prime to 140,000), so every record batch spans nearly every k and
// statistics cannot prune a condition on it.
func (e *env) spreadCSV(name string, from, to int) string {
	var b strings.Builder
	b.WriteString("id,k,s\n")
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%d,%d,r%d\n", i, i*7919%140000, i)
	}
	return e.file(name, b.String())
}

// spreadRows is more than two record batches of an import (65,536 rows each) and more than
// four BTree pages, so a point lookup on k uses an index.
const spreadRows = 140000

// explainOf runs query --explain --json with args and parses it.
func (e *env) explainOf(args ...string) explainJSON {
	e.t.Helper()
	out := e.ok(append(append([]string{"query"}, args...), "--explain", "--json")...)
	checkJSONObject(e.t, "explain", out, "objects")
	var x explainJSON
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		e.t.Fatalf("%v\n%s", err, out)
	}
	return x
}

func (x explainJSON) reads(kind string) objectReads {
	for _, o := range x.Objects {
		if o.Kind == kind {
			return o
		}
	}
	return objectReads{}
}

// indexList runs index list --json.
func (e *env) indexList(table string) []engine.IndexInfo {
	e.t.Helper()
	out := e.ok("index", "list", table, "--json")
	checkJSONObject(e.t, "index list", out, "indexes")
	var l struct {
		Table   string             `json:"table"`
		Indexes []engine.IndexInfo `json:"indexes"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Table != table {
		e.t.Fatalf("index list --json: %v\n%s", err, out)
	}
	return l.Indexes
}

// TestIndexCommands (issue 10 item 7): index create with progress, list with coverage,
// update after an append, drop; inspect shows the indexes; every answer is the same with
// and without the index.
func TestIndexCommands(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("ix")
	e.ok("import", e.spreadCSV("a.csv", 0, spreadRows), "--table", tbl)
	if out := e.ok("index", "list", tbl); !strings.Contains(out, "has no indexes at version 2") {
		t.Fatalf("index list of a table without indexes: %q", out)
	}
	if l := e.indexList(tbl); len(l) != 0 {
		t.Fatalf("index list --json: %+v", l)
	}

	r := e.run("index", "create", tbl, "--column", "k")
	if r.code != 0 || !strings.Contains(r.stdout, "Built index k_idx (btree on k) of "+tbl+": version 3, 140,000 rows indexed, 1 of 1 fragment covered") {
		t.Fatalf("index create: %v", r)
	}
	// stderr is not a terminal: a plain progress line once the rows are read.
	if !strings.Contains(r.stderr, "indexing k (btree): 140,000 rows read") || !strings.Contains(r.stderr, "sorting and storing") {
		t.Fatalf("index create progress: %q", r.stderr)
	}
	l := e.indexList(tbl)
	if len(l) != 1 || l[0].Name != "k_idx" || l[0].Kind != "btree" || strings.Join(l[0].Columns, ",") != "k" ||
		l[0].FragmentsCovered != 1 || l[0].Fragments != 1 || l[0].RowsCovered != spreadRows || l[0].BuiltFrom != 2 || l[0].Bytes <= 0 {
		t.Fatalf("index list --json: %+v", l)
	}
	out := e.ok("index", "list", tbl)
	for _, w := range []string{"Indexes of " + tbl + ", version 3", "k_idx", "btree", "1 of 1", "140,000 of 140,000", "version 2"} {
		if !strings.Contains(out, w) {
			t.Fatalf("index list lacks %q:\n%s", w, out)
		}
	}

	// A zone map over two columns, by another name; a name taken is refused without
	// --replace and replaced with it.
	out = e.ok("index", "create", tbl, "--kind", "zonemap", "--column", "id,s", "--name", "zm")
	if !strings.Contains(out, "Built index zm (zonemap on id, s)") {
		t.Fatalf("zonemap create: %q", out)
	}
	e.fails(1, []string{"index already exists", `"zm"`, "--replace"}, "index", "create", tbl, "--kind", "zonemap", "--column", "id", "--name", "zm")
	out = e.ok("index", "create", tbl, "--kind", "zonemap", "--column", "id", "--name", "zm", "--replace")
	if !strings.Contains(out, "Replaced index zm (zonemap on id)") {
		t.Fatalf("replace: %q", out)
	}

	// Appended rows are uncovered (and still returned) until index update.
	e.ok("import", e.spreadCSV("b.csv", spreadRows, spreadRows+1000), "--table", tbl)
	out = e.ok("index", "list", tbl)
	if !strings.Contains(out, "1 of 2") || !strings.Contains(out, "note: k_idx does not cover 1 fragment (1,000 rows, scanned): 'shale index update "+tbl+" k_idx' indexes it") {
		t.Fatalf("index list after an append:\n%s", out)
	}
	if got := e.ok("query", tbl, "--where", fmt.Sprintf("id = %d", spreadRows+7), "--format", "csv"); !strings.Contains(got, fmt.Sprintf("%d,", spreadRows+7)) {
		t.Fatalf("an appended row is not returned: %q", got)
	}
	out = e.ok("index", "update", tbl, "k_idx")
	if !strings.Contains(out, "Built index k_idx (btree on k) of "+tbl+": version 7, 1,000 rows indexed, 2 of 2 fragments covered") {
		t.Fatalf("index update: %q", out)
	}
	if out := e.ok("index", "update", tbl, "k_idx"); !strings.Contains(out, "already covers every fragment (2 fragments): nothing committed (version 7)") {
		t.Fatalf("second index update: %q", out)
	}
	if l := e.indexList(tbl); len(l) != 2 || l[0].Name != "k_idx" || l[0].Segments != 2 || l[0].FragmentsCovered != 2 || l[1].Name != "zm" || l[1].FragmentsCovered != 1 {
		t.Fatalf("index list after the update: %+v", l)
	}

	// inspect shows them, in text and JSON.
	out = e.ok("inspect", tbl)
	if !strings.Contains(out, "\nIndexes\n") || !strings.Contains(out, "k_idx") || !strings.Contains(out, "lookup.btree") || !strings.Contains(out, "zones.zonemap") {
		t.Fatalf("inspect lacks the indexes:\n%s", out)
	}
	var in inspection
	if err := json.Unmarshal([]byte(e.ok("inspect", tbl, "--json")), &in); err != nil {
		t.Fatal(err)
	}
	if len(in.Indexes) != 2 || len(in.IndexSegments) != 3 || in.IndexSegments[0].Name == "" || len(in.IndexSegments[0].Files) == 0 {
		t.Fatalf("inspect --json indexes %+v, segments %+v", in.Indexes, in.IndexSegments)
	}

	// A delete planned through the index deletes what a scan finds.
	before := e.ok("query", tbl, "--where", "k = 5 OR k = 6", "--format", "csv", "--no-index")
	if strings.Count(before, "\n") != 3 {
		t.Fatalf("rows with k in (5, 6): %q", before)
	}
	if out := e.ok("delete", tbl, "--where", "k = 5 OR k = 6"); !strings.Contains(out, "Deleted 2 rows") {
		t.Fatalf("delete: %q", out)
	}
	if n := e.ok("query", tbl, "--count", "--no-index"); !strings.HasPrefix(n, "140,998 rows") {
		t.Fatalf("count after the delete: %q", n)
	}

	// Dropped, queries scan; older versions still list it.
	out = e.ok("index", "drop", tbl, "k_idx")
	if !strings.Contains(out, "Dropped index k_idx of "+tbl+": version 9") {
		t.Fatalf("index drop: %q", out)
	}
	if l := e.indexList(tbl); len(l) != 1 || l[0].Name != "zm" {
		t.Fatalf("after the drop: %+v", l)
	}
	if out := e.ok("index", "list", tbl, "--version", "8"); !strings.Contains(out, "k_idx") {
		t.Fatalf("index list --version 8: %q", out)
	}
	e.fails(1, []string{"index not found", `"k_idx"`, "has index zm"}, "index", "drop", tbl, "k_idx")
}

// TestQueryExplain (issue 10 item 5): --explain runs the query and says which index it
// used or why not, what statistics and the index skipped, and the requests and bytes by
// kind of object; the rows are the same with and without the index and --no-index.
func TestQueryExplain(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("explain")
	e.ok("import", e.spreadCSV("a.csv", 0, spreadRows), "--table", tbl)
	const where = "k = 777"

	out := e.ok("query", tbl, "--where", where, "--explain")
	for _, w := range []string{"Plan of " + tbl + ", version 2 (the query ran", "filter     k = 777", "3 of the 3 record batches of those fragments read",
		"indexes    none", "1 row returned", "object requests", "data files"} {
		if !strings.Contains(out, w) {
			t.Fatalf("explain without indexes lacks %q:\n%s", w, out)
		}
	}
	scan := e.explainOf(tbl, "--where", where)
	if !scan.Executed || scan.Rows != 1 || scan.Plan.BatchesRead != 3 || scan.reads(objIndex).Requests != 0 || scan.reads(objData).Requests < 3 ||
		scan.Requests.Total < scan.reads(objData).Requests || scan.Requests.BytesRead <= 0 {
		t.Fatalf("explain of a scan: %+v", scan)
	}

	e.ok("index", "create", tbl, "--column", "k")
	out = e.ok("query", tbl, "--where", where, "--explain")
	for _, w := range []string{"k_idx (btree): used for 1 fragment", "pages read", "1 candidate row", "1 of the 3 record batches of those fragments read",
		"0 skipped by statistics, 2 by indexes", "index objects"} {
		if !strings.Contains(out, w) {
			t.Fatalf("explain with the index lacks %q:\n%s", w, out)
		}
	}
	ix := e.explainOf(tbl, "--where", where)
	if ix.Rows != 1 || ix.Plan.BatchesRead != 1 || ix.Plan.BatchesPrunedByIndex != 2 || len(ix.Plan.Indexes) != 1 || !ix.Plan.Indexes[0].Used ||
		ix.reads(objIndex).Requests == 0 || ix.reads(objData).Requests >= scan.reads(objData).Requests || ix.reads(objData).Bytes >= scan.reads(objData).Bytes {
		t.Fatalf("explain with the index: %+v\nwithout: %+v", ix, scan)
	}
	noix := e.explainOf(tbl, "--where", where, "--no-index")
	if !noix.NoIndex || noix.Plan.BatchesRead != 3 || noix.reads(objIndex).Requests != 0 || noix.Rows != 1 {
		t.Fatalf("explain --no-index: %+v", noix)
	}
	if out := e.ok("query", tbl, "--where", where, "--explain", "--no-index"); !strings.Contains(out, "indexes    not used (--no-index)") {
		t.Fatalf("explain --no-index: %s", out)
	}
	// A condition the index cannot serve says why.
	if x := e.explainOf(tbl, "--where", "s = 'r5'"); x.Plan.Indexes[0].Used || !strings.Contains(x.Plan.Indexes[0].Reason, "no condition on k") || x.Rows != 1 {
		t.Fatalf("explain of a condition on another column: %+v", x.Plan)
	}
	// --count explains the count; --limit stops the scan.
	if x := e.explainOf(tbl, "--where", "k < 1000", "--count"); !x.Count || x.Rows != 1000 {
		t.Fatalf("explain --count: %+v", x)
	}
	if x := e.explainOf(tbl, "--where", "k >= 0", "--limit", "5"); x.Rows != 5 || x.Limit != 5 {
		t.Fatalf("explain --limit: %+v", x)
	}
	// The rows themselves are the same with and without the index.
	for _, w := range []string{where, "k IN (1, 2, 3) OR k > 139990", "k BETWEEN 500 AND 600 AND s != 'r1'"} {
		with := e.ok("query", tbl, "--where", w, "--format", "csv")
		without := e.ok("query", tbl, "--where", w, "--format", "csv", "--no-index")
		if with != without || strings.Count(with, "\n") < 2 {
			t.Fatalf("WHERE %s: with the index %q, without %q", w, with, without)
		}
		if a, b := e.ok("query", tbl, "--where", w, "--count"), e.ok("query", tbl, "--where", w, "--count", "--no-index"); strings.Fields(a)[0] != strings.Fields(b)[0] {
			t.Fatalf("WHERE %s: count %q with the index, %q without", w, a, b)
		}
	}
	e.fails(2, []string{"--explain prints the plan"}, "query", tbl, "--explain", "--format", "csv")
	if out := e.ok("query", "--help"); !strings.Contains(out, "EXPLAIN ANALYZE") || !strings.Contains(out, "--no-index") {
		t.Fatalf("query --help does not document --explain:\n%s", out)
	}
}

// writeListFixture writes an Arrow IPC file with an int64 column and a list column.
func writeListFixture(t *testing.T, path string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range 10 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		lb := b.Field(1).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// indexObjects counts the objects under a table's _indices/ in the default local store.
func (e *env) indexObjects(table string) int {
	e.t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(e.home, "store", table, "_indices"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestIndexBadInput (issue 10 item 7): an unknown column, an unsupported type, a duplicate
// name, an unknown table, an unknown index, a table dropped, a table being indexed that a
// drop must not pull away, and malformed command lines: each a one-line error with the
// right exit status and --json kind, and nothing changed (no version, no index object).
func TestIndexBadInput(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("ixbad")
	lists := e.table("ixlist")
	e.ok("import", e.file("a.csv", "id,name\n1,a\n2,b\n"), "--table", tbl)
	e.ok("index", "create", tbl, "--column", "id")
	path := filepath.Join(e.dir, "lists.arrow")
	writeListFixture(t, path)
	e.ok("import", path, "--table", lists)
	nosuch := e.table("nosuch")
	manifests, objects := e.manifests(tbl), e.indexObjects(tbl)

	cases := []struct {
		name string
		args []string
		exit int
		kind string
		msg  []string
	}{
		{"unknown column", []string{"index", "create", tbl, "--column", "nope"}, exitError, kindInvalidInput, []string{"unknown column nope", "columns: id, name"}},
		{"unsupported type", []string{"index", "create", lists, "--column", "tags"}, exitError, kindInvalidInput, []string{"column type cannot be indexed", "list<item: int64"}},
		{"duplicate name", []string{"index", "create", tbl, "--column", "id"}, exitError, kindExists, []string{"index already exists", `"id_idx"`}},
		{"duplicate given name", []string{"index", "create", tbl, "--column", "name", "--name", "id_idx"}, exitError, kindExists, []string{"index already exists"}},
		{"unknown table", []string{"index", "create", nosuch, "--column", "id"}, exitError, kindNotFound, []string{"table not found", nosuch}},
		{"list unknown table", []string{"index", "list", nosuch}, exitError, kindNotFound, []string{"table not found"}},
		{"drop unknown index", []string{"index", "drop", tbl, "nope"}, exitError, kindNotFound, []string{"index not found", `"nope"`, "has index id_idx"}},
		{"update unknown index", []string{"index", "update", tbl, "nope"}, exitError, kindNotFound, []string{"index not found", "has index id_idx"}},
		{"drop index of unknown table", []string{"index", "drop", nosuch, "x"}, exitError, kindNotFound, []string{"table not found"}},
		{"unknown kind", []string{"index", "create", tbl, "--column", "id", "--kind", "hash"}, exitUsage, kindUsage, []string{`unknown --kind "hash"`}},
		{"btree of two columns", []string{"index", "create", tbl, "--column", "id,name"}, exitUsage, kindUsage, []string{"a btree indexes one column, got 2"}},
		{"no column", []string{"index", "create", tbl}, exitUsage, kindUsage, []string{`"column" not set`}},
		{"bad name", []string{"index", "create", tbl, "--column", "name", "--name", "a/b"}, exitUsage, kindUsage, []string{`invalid index name "a/b": contains '/'`}},
		{"no subcommand", []string{"index"}, exitUsage, kindUsage, []string{"index needs a command"}},
		{"unknown subcommand", []string{"index", "frob"}, exitUsage, kindUsage, []string{`unknown index command "frob"`}},
		{"drop without a name", []string{"index", "drop", tbl}, exitUsage, kindUsage, []string{"drop needs TABLE NAME"}},
		{"bad table name", []string{"index", "create", "a/b", "--column", "id"}, exitUsage, kindUsage, []string{"invalid table name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.fails(c.exit, c.msg, c.args...)
			r := e.run(append(c.args, "--json")...)
			if got := jsonErrorOf(t, c.name, r.stderr); r.code != c.exit || got.Error.Kind != c.kind || r.stdout != "" {
				t.Fatalf("--json: exit %d, error %+v, stdout %q; want exit %d, kind %s", r.code, got.Error, r.stdout, c.exit, c.kind)
			}
		})
	}
	if m, o := e.manifests(tbl), e.indexObjects(tbl); m != manifests || o != objects {
		t.Fatalf("bad input changed the table: %d manifests (was %d), %d index objects (was %d)", m, manifests, o, objects)
	}
	if l := e.indexList(lists); len(l) != 0 {
		t.Fatalf("an index on an unsupported type was committed: %+v", l)
	}

	// A table being indexed cannot be dropped from under the build: the build's hold makes
	// the drop refuse (nothing dropped), and the build then commits.
	gate := filepath.Join(e.dir, "gate")
	done := make(chan result, 1)
	go func() {
		done <- e.runEnv([]string{"SHALE_FAILPOINTS=engine.index_commit=block(" + gate + ")"}, "index", "create", tbl, "--column", "name")
	}()
	deadline := time.Now().Add(60 * time.Second)
	for e.indexObjects(tbl) < objects+2 { // the build's lookup and pages are stored: it is at its commit seam
		if time.Now().After(deadline) {
			t.Fatal("the index build never stored its objects")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := e.run("drop", tbl)
	if r.code != exitError || !strings.Contains(r.stderr, "table is in use") || !strings.Contains(r.stderr, "index") {
		t.Fatalf("drop while an index build holds the table: %v", r)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.code != 0 || !strings.Contains(r.stdout, "Built index name_idx") {
		t.Fatalf("the held build: %v", r)
	}
	// Dropped, the table's name is not found: nothing to index.
	e.ok("drop", tbl)
	e.fails(1, []string{"not found", "the table was dropped"}, "index", "create", tbl, "--column", "id")
	e.fails(1, []string{"not found"}, "index", "list", tbl)
}

// TestIndexCreateInterrupted: Ctrl-C while an index build holds its written objects before
// its commit ends it saying nothing was committed; the table keeps its version and has no
// index, no recovery sidecar is left, and gc deletes the build's objects.
func TestIndexCreateInterrupted(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("ixint")
	e.ok("import", e.spreadCSV("a.csv", 0, 20000), "--table", tbl)
	before := e.manifests(tbl)
	gate := filepath.Join(e.dir, "never") // never created: the build waits until interrupted
	r := e.interruptAt("engine.index_commit=block("+gate+")", func() bool { return e.indexObjects(tbl) >= 2 },
		"index", "create", tbl, "--column", "k")
	if r.code != exitError || !strings.Contains(r.stderr, "shale: error: interrupted: no index was committed; the objects the build wrote are deleted by 'shale gc'") {
		t.Fatalf("interrupted index create: %v", r)
	}
	if m := e.manifests(tbl); m != before {
		t.Fatalf("%d manifests after the interrupted build, %d before", m, before)
	}
	if l := e.indexList(tbl); len(l) != 0 {
		t.Fatalf("indexes after the interrupted build: %+v", l)
	}
	if n := e.count("_recovery/*")(); n != 0 {
		t.Fatalf("%d recovery sidecars left", n)
	}
	e.ok("gc", tbl, "--grace", "0s", "--no-writers")
	if n := e.indexObjects(tbl); n != 0 {
		t.Fatalf("%d index objects left after gc", n)
	}
	e.ok("verify", tbl)
}
