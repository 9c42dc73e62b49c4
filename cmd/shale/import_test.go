package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// schemaOf returns a table's columns as "name type" strings (from inspect --json).
func (e *env) schemaOf(table string) []string {
	e.t.Helper()
	var in inspection
	if err := json.Unmarshal([]byte(e.ok("inspect", table, "--json")), &in); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, c := range in.Schema {
		out = append(out, c.Name+" "+c.Type)
	}
	return out
}

func TestImportCSVInfersTypesAndRoundTrips(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("csvrt")
	var sb strings.Builder
	sb.WriteString("id,score,name,ok,day,at\n")
	const n = 2500 // more than one inference sample
	for i := 0; i < n; i++ {
		score := fmt.Sprintf("%d.5", i)
		if i%7 == 0 {
			score = "" // null
		}
		fmt.Fprintf(&sb, "%d,%s,\"name %d, \"\"q\"\"\",%v,2024-03-%02d,2024-03-01 10:00:%02d.25\n", i, score, i, i%2 == 0, i%28+1, i%60)
	}
	in := e.file("data.csv", sb.String())
	out := e.ok("import", in, "--table", tbl)
	if !strings.Contains(out, fmt.Sprintf("Created %s and imported 2,500 rows", tbl)) || !strings.Contains(out, "version 2") ||
		!strings.Contains(out, "rows/s") {
		t.Fatalf("import: %q", out)
	}
	want := []string{"id int64", "score float64", "name utf8", "ok bool", "day date32", "at timestamp[us]"}
	if got := e.schemaOf(tbl); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("inferred schema %v, want %v", got, want)
	}
	// The CSV output equals the input, row for row.
	got, err := csv.NewReader(strings.NewReader(e.ok("query", tbl, "--format", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := csv.NewReader(strings.NewReader(sb.String())).ReadAll()
	if !equalRecords(got, orig) {
		t.Fatalf("round trip differs: got %d rows, first %q; want first %q", len(got), got[:2], orig[:2])
	}
	// A second import appends with the table's types (a CSV header in the same order).
	e.ok("import", e.file("more.csv", "id,score,name,ok,day,at\n9999,1,x,true,2024-01-01,2024-01-01 00:00:00\n"), "--table", tbl)
	if rows := jsonLines(t, e.ok("query", tbl, "--where", "id = 9999", "--format", "json")); len(rows) != 1 || rows[0]["score"] != 1.0 {
		t.Fatalf("appended row: %v", rows)
	}
	if vs := e.versions(tbl); len(vs) != 3 || vs[2].Rows != n+1 {
		t.Fatalf("versions %+v", vs)
	}
}

func TestImportJSONLines(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("jsonl")
	lines := []string{
		`{"id":1,"price":2,"tag":"a","flag":true,"when":"2024-05-06 07:08:09"}`,
		`{"id":2,"price":2.5,"tag":null,"flag":false,"when":"2024-05-06 07:08:10.5"}`,
		`{"price":-1e3,"id":3,"flag":null,"tag":"c\"q","extra":null}`,
	}
	in := e.file("rows.jsonl", strings.Join(lines, "\n")+"\n")
	e.ok("import", in, "--table", tbl)
	want := []string{"id int64", "price float64", "tag utf8", "flag bool", "when timestamp[us]", "extra utf8"}
	if got := e.schemaOf(tbl); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("inferred schema %v, want %v", got, want)
	}
	got := e.ok("query", tbl, "--format", "json")
	wantOut := `{"id":1,"price":2,"tag":"a","flag":true,"when":"2024-05-06 07:08:09","extra":null}
{"id":2,"price":2.5,"tag":null,"flag":false,"when":"2024-05-06 07:08:10.5","extra":null}
{"id":3,"price":-1000,"tag":"c\"q","flag":null,"when":null,"extra":null}
`
	if got != wantOut {
		t.Fatalf("json output:\n%s\nwant:\n%s", got, wantOut)
	}
	// The JSON output imports back into the same table (keys matched by name).
	e.ok("import", e.file("back.ndjson", got), "--table", tbl)
	if vs := e.versions(tbl); len(vs) != 3 || vs[2].Rows != 6 {
		t.Fatalf("versions %+v", vs)
	}
}

// writeArrowFixture writes n rows as an Arrow IPC file (several batches) or stream.
func writeArrowFixture(t *testing.T, path string, n int, stream bool) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "delay", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "distance", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "time", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type writer interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	var w writer
	if stream {
		w = ipc.NewWriter(f, ipc.WithSchema(schema))
	} else {
		w, err = ipc.NewFileWriter(f, ipc.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for start := 0; start < n; start += 10000 {
		for i := start; i < min(n, start+10000); i++ {
			b.Field(0).(*array.Int16Builder).Append(int16(i % 300))
			b.Field(1).(*array.Int16Builder).Append(int16(i % 3000))
			b.Field(2).(*array.Float32Builder).Append(float32(i) / 4)
		}
		rec := b.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestImportArrowIPC(t *testing.T) {
	e := sharedEnv(t)
	const n = 45000
	for _, tc := range []struct {
		name   string
		stream bool
	}{{"data.arrow", false}, {"data.arrows", true}} {
		tbl := e.table("ipc")
		path := filepath.Join(e.dir, tc.name)
		writeArrowFixture(t, path, n, tc.stream)
		e.ok("import", path, "--table", tbl)
		if got := e.schemaOf(tbl); strings.Join(got, ",") != "delay int16,distance int16,time float32" {
			t.Fatalf("%s: schema %v", tc.name, got)
		}
		out := e.ok("query", tbl, "--where", "distance = 2999", "--format", "json")
		rows := jsonLines(t, out)
		// i % 3000 == 2999 for i = 2999, 5999, ..., 44999: 15 rows.
		if len(rows) != 15 || rows[0]["time"] != 2999.0/4 || rows[14]["delay"] != float64(44999%300) {
			t.Fatalf("%s: rows %v", tc.name, rows)
		}
		vs := e.versions(tbl)
		if len(vs) != 2 || vs[1].Rows != n {
			t.Fatalf("%s: versions %+v", tc.name, vs)
		}
		// The IPC stream from `query --format arrow` imports into a new table unchanged.
		r := e.run("query", tbl, "--format", "arrow")
		if r.code != 0 {
			t.Fatal(r)
		}
		copyTbl := tbl + "_copy"
		e.ok("import", e.file(copyTbl+".arrow", r.stdout), "--table", copyTbl)
		if a, b := e.ok("query", tbl, "--format", "csv"), e.ok("query", copyTbl, "--format", "csv"); a != b {
			t.Fatalf("%s: copy differs", tc.name)
		}
	}
}

// flightsSlice writes the first n rows of testdata/flights-3m.parquet as a Parquet file.
func flightsSlice(t *testing.T, path string, n int64) {
	t.Helper()
	src, err := os.Open(repoFile("testdata", "flights-3m.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pr, err := file.NewParquetReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: n}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Next() {
		t.Fatalf("no rows: %v", rr.Err())
	}
	rec := rr.RecordBatch()
	if rec.NumRows() > n {
		rec = rec.NewSlice(0, n)
		defer rec.Release()
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w, err := pqarrow.NewFileWriter(rec.Schema(), out,
		parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(20000)),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestImportParquet(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("pq")
	path := filepath.Join(e.dir, "flights-50k.parquet")
	flightsSlice(t, path, 50000)
	var res importResult
	if err := json.Unmarshal([]byte(e.ok("import", path, "--table", tbl, "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Rows != 50000 || !res.Created || res.Version != 2 || res.Format != "parquet" || res.RowsPerS <= 0 {
		t.Fatalf("import result %+v", res)
	}
	want := "date timestamp[us],delay int64,distance int64,origin large_utf8,destination large_utf8"
	if got := e.schemaOf(tbl); strings.Join(got, ",") != want {
		t.Fatalf("schema %v", got)
	}
	// The first rows of the file (as `shale demo` shows them).
	rows := jsonLines(t, e.ok("query", tbl, "--limit", "2", "--json"))
	if len(rows) != 2 || rows[0]["date"] != "2001-01-01 00:01:00" || rows[0]["origin"] != "LAS" || rows[0]["destination"] != "PHL" ||
		rows[0]["delay"] != 33.0 || rows[0]["distance"] != 2176.0 {
		t.Fatalf("first rows %v", rows)
	}
	// Appending the same file doubles every count; the date filter uses timestamps.
	where := "origin = 'SFO' AND date < '2001-01-02'"
	before := len(jsonLines(t, e.ok("query", tbl, "--where", where, "--json")))
	if before == 0 {
		t.Fatal("no SFO flights on 2001-01-01 in the slice")
	}
	e.ok("import", path, "--table", tbl, "--idempotency-key", "second") // the same file again, on purpose
	if after := len(jsonLines(t, e.ok("query", tbl, "--where", where, "--json"))); after != 2*before {
		t.Fatalf("after a second import %d rows, want %d", after, 2*before)
	}
	if vs := e.versions(tbl); len(vs) != 3 || vs[2].Rows != 100000 {
		t.Fatalf("versions %+v", vs)
	}
}

// TestImportJSONLinesRefusesUnknownKeys: a key that first appears after the inference
// sample is refused, not silently dropped, and nothing is committed.
func TestImportJSONLinesRefusesUnknownKeys(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("latekey")
	var b strings.Builder
	for i := 0; i < 1500; i++ {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	b.WriteString("{\"id\":1500,\"secret\":\"kept?\"}\n")
	e.fails(1, []string{"line 1501", "secret", "schema mismatch"}, "import", e.file("late.jsonl", b.String()), "--table", tbl)
	if n := e.manifests(tbl); n > 1 {
		t.Fatalf("%d manifests after a refused import", n)
	}
}

// TestImportKilledBeforePublishThenRunAgainIsIdempotent (issue 8 item 8): an import
// killed between its commit and its publish, run again, commits nothing new: it reports
// the killed run's version (publishing it) instead of doubling the rows. Another
// --idempotency-key imports the rows again on purpose. A write that publishes another
// writer's unpublished version says so.
func TestImportKilledBeforePublishThenRunAgainIsIdempotent(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("idem")
	e.ok("import", e.file("base.csv", "id,name\n1,a\n2,b\n"), "--table", tbl)
	batch := e.file("batch.csv", "id,name\n10,x\n11,y\n12,z\n")
	killed := e.runEnv([]string{"SHALE_FAILPOINTS=engine.before_publish=kill"}, "import", batch, "--table", tbl)
	if killed.code == 0 {
		t.Fatalf("import with a kill before its publish exited 0: %v", killed)
	}
	count := func() int {
		return strings.Count(e.ok("query", tbl, "--format", "csv"), "\n") - 1
	}
	if n := count(); n != 2 {
		t.Fatalf("published rows after the killed import: %d, want 2 (its version is committed, not published)", n)
	}
	out := e.ok("import", batch, "--table", tbl)
	if !strings.Contains(out, "Already imported") || !strings.Contains(out, "version 3") {
		t.Fatalf("the same import run again: %s", out)
	}
	if n := count(); n != 5 {
		t.Fatalf("rows after the import ran again: %d, want 5 (the batch once)", n)
	}
	var res struct {
		Duplicate bool   `json:"duplicate"`
		Version   uint64 `json:"version"`
	}
	if err := json.Unmarshal([]byte(e.ok("import", batch, "--table", tbl, "--json")), &res); err != nil || !res.Duplicate || res.Version != 3 {
		t.Fatalf("third run --json: %+v %v", res, err)
	}
	if out := e.ok("import", batch, "--table", tbl, "--idempotency-key", "again"); strings.Contains(out, "Already") {
		t.Fatalf("a new --idempotency-key: %s", out)
	}
	if n := count(); n != 8 {
		t.Fatalf("rows after importing with a new key: %d, want 8", n)
	}

	// A write killed before its publish leaves its version committed; the next write
	// publishes it and says so.
	other := e.file("other.csv", "id,name\n20,p\n")
	if r := e.runEnv([]string{"SHALE_FAILPOINTS=engine.before_publish=kill"}, "import", other, "--table", tbl); r.code == 0 {
		t.Fatalf("killed import exited 0: %v", r)
	}
	r := e.run("delete", tbl, "--where", "id = 1")
	if r.code != 0 || !strings.Contains(r.stderr, "note: this also published version") || !strings.Contains(r.stderr, "append") {
		t.Fatalf("delete publishing the killed import's version: %v", r)
	}
}

// TestCSVTypeErrorNamesLineColumnAndType: a CSV value that does not parse as its column's
// type is reported with the line an editor shows (the header is line 1), the column's
// name and the type expected, never as "near row 0" with bare strconv text; so are a line
// with the wrong number of fields and malformed quoting. Nothing is created or committed.
func TestCSVTypeErrorNamesLineColumnAndType(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("csverr")
	var sb strings.Builder
	sb.WriteString("id,score,name\n")
	for i := 1; i <= 1500; i++ {
		fmt.Fprintf(&sb, "%d,%d.5,\"n %d\"\n", i, i, i)
	}
	sb.WriteString("1501,abc,x\n")
	in := e.file("scores.csv", sb.String())
	r := e.fails(1, []string{"scores.csv", `line 1,502, column "score": "abc" is not a float64 (a number`}, "import", in, "--table", tbl)
	for _, bad := range []string{"near row", "strconv", "ParseFloat"} {
		if strings.Contains(r.stderr, bad) {
			t.Fatalf("error still says %q: %s", bad, r.stderr)
		}
	}
	if n := e.manifests(tbl); n != 0 {
		t.Fatalf("a failed import created the table (%d manifests)", n)
	}

	// Appending to an existing table parses with its types: an int16 out of range, a
	// line with a field too many, and a bare quote.
	e.ok("create", tbl, "--schema", "id:int16,name:string,day:date32")
	for _, tc := range []struct{ body, want string }{
		{"id,name,day\n1,a,2024-01-01\n\n40000,b,2024-01-02\n", `line 4, column "id": "40000" is out of range for int16`},
		{"id,name,day\n1,a,2024-01-01\n2,\"b\nc\",2024-01-02\n3,c,2024-13-40\n", `line 5, column "day": "2024-13-40" is not a date32 (a date YYYY-MM-DD)`},
		{"id,name,day\n1,a,2024-01-01\n2,b,2024-01-02,extra\n", "line 3 has 4 fields, the header has 3"},
		{"id,name,day\n1,a\"b,2024-01-01\n", `line 2: bare " in non-quoted-field`},
	} {
		e.fails(1, []string{"more.csv", tc.want}, "import", e.file("more.csv", tc.body), "--table", tbl)
	}
	if vs := e.versions(tbl); len(vs) != 1 {
		t.Fatalf("failed appends committed versions: %+v", vs)
	}
}

// TestImportIntegerBeyondInt64KeepsItsDigits: a CSV column holding an integer one past
// int64's maximum is inferred as string, so 9223372036854775808 comes back digit for digit
// (before: float64, 9.223372036854776e+18), and its neighbour with fractions and a huge
// integer too; a JSON Lines number beyond int64 is refused, naming its line and key.
func TestImportIntegerBeyondInt64KeepsItsDigits(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("bigint")
	e.ok("import", e.file("big.csv", "a,b,c\n1,1.5,7\n9223372036854775808,-99999999999999999999,-9223372036854775808\n"), "--table", tbl)
	want := []string{"a utf8", "b utf8", "c int64"}
	if got := e.schemaOf(tbl); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("inferred schema %v, want %v", got, want)
	}
	if out := e.ok("query", tbl, "--format", "csv"); out != "a,b,c\n1,1.5,7\n9223372036854775808,-99999999999999999999,-9223372036854775808\n" {
		t.Fatalf("query: %q", out)
	}
	r := e.fails(1, []string{"key \"a\"", "line 2", "9223372036854775808", "does not fit in int64"},
		"import", e.file("big.jsonl", "{\"a\": 1}\n{\"a\": 9223372036854775808}\n"), "--table", e.table("bigjson"))
	if strings.Contains(r.stderr, "e+18") {
		t.Fatalf("stderr: %s", r.stderr)
	}
}
