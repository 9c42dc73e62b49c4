package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestParseSchema(t *testing.T) {
	s, err := parseSchema(" id:int64! , name:string,at:timestamp[us],d:date32,f:FLOAT32,b:bool,s:int16,i:int32,x:float64")
	if err != nil {
		t.Fatal(err)
	}
	want := "schema:\n  fields: 9\n    - id: type=int64\n    - name: type=utf8, nullable\n    - at: type=timestamp[us], nullable\n" +
		"    - d: type=date32, nullable\n    - f: type=float32, nullable\n    - b: type=bool, nullable\n    - s: type=int16, nullable\n" +
		"    - i: type=int32, nullable\n    - x: type=float64, nullable"
	if s.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", s, want)
	}
	for spec, msg := range map[string]string{
		"":                 "empty schema",
		"id":               `"id": want name:type`,
		"id:int64,id:bool": `"id" appears twice`,
		"id:uint8":         `unknown type "uint8"`,
		":int64":           "want name:type",
	} {
		if _, err := parseSchema(spec); err == nil || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%q: error %v, want %q", spec, err, msg)
		}
	}
}

func TestInferCSVSchema(t *testing.T) {
	s := &csvSample{header: []string{"i", "f", "b", "d", "ts", "s", "empty", "mixed"}, rows: [][]string{
		{"1", "1", "true", "2024-01-02", "2024-01-02 03:04:05", "x", "", "1"},
		{"-2", "2.5", "False", "2024-12-31", "2024-01-02T03:04:05.123456", "", "", "2024-01-02"},
		{"", "1e3", "", "", "", "3", "", "x"},
	}}
	got := inferCSVSchema(s)
	want := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean,
		arrow.FixedWidthTypes.Date32, &arrow.TimestampType{Unit: arrow.Microsecond}, arrow.BinaryTypes.String,
		arrow.BinaryTypes.String, arrow.BinaryTypes.String}
	for i, w := range want {
		if f := got.Field(i); !arrow.TypeEqual(f.Type, w) || !f.Nullable {
			t.Fatalf("column %s: %s (nullable %v), want %s", f.Name, f.Type, f.Nullable, w)
		}
	}
}

func TestInferJSONLSchema(t *testing.T) {
	in := `{"a":1,"b":"2024-01-02","c":null}
{"b":"2024-01-03","a":2.5,"d":true}

{"a":-3,"c":"x","e":"2024-01-02 00:00:00"}
`
	s, err := inferJSONLSchema(strings.NewReader(in), 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.Fields() {
		got = append(got, f.Name+" "+f.Type.String())
	}
	if want := "a float64,b date32,c utf8,d bool,e timestamp[us]"; strings.Join(got, ",") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	for in, msg := range map[string]string{
		`{"a":{"x":1}}`:                `key "a" holds an object or array (object 1)`,
		`{"a":1}` + "\n" + `[1]`:       "object 2: want one JSON object per line",
		`{"a":1}` + "\n" + `{"a":"x"}`: "mixed JSON types",
		``:                             "no JSON objects",
		`{"a":`:                        "object 1",
	} {
		if _, err := inferJSONLSchema(strings.NewReader(in), 10); err == nil || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%q: error %v, want %q", in, err, msg)
		}
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 3000000: "3,000,000", -1234567: "-1,234,567"} {
		if got := thousands(n); got != want {
			t.Fatalf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{999: "999 B", 1000: "1.0 kB", 13493022: "13.5 MB"} {
		if got := humanBytes(n); got != want {
			t.Fatalf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got := oneLine("a\n  b\r\nc"); got != "a; b; c" {
		t.Fatalf("oneLine: %q", got)
	}
	for name, want := range map[string]string{"x.PARQUET": formatParquet, "x.arrows": formatArrow, "x.ndjson": formatJSONL, "x.tsv": formatTSV} {
		if got, err := formatFromName(name); err != nil || got != want {
			t.Fatalf("formatFromName(%q) = %q, %v", name, got, err)
		}
	}
}

// TestJoinExistingEtcd runs a command with --etcd against the shared home's running etcd
// (from a different state directory): it sees the same published versions.
func TestJoinExistingEtcd(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("join")
	e.ok("create", tbl, "--schema", "id:int64")
	b, err := os.ReadFile(filepath.Join(e.home, "etcd", "endpoint"))
	if err != nil {
		t.Fatal(err)
	}
	var ep struct{ Endpoints []string }
	if err := json.Unmarshal(b, &ep); err != nil || len(ep.Endpoints) == 0 {
		t.Fatalf("endpoint file %q: %v", b, err)
	}
	other := &env{t: t, home: t.TempDir(), dir: e.dir}
	store := "file://" + filepath.Join(e.home, "store")
	eps := strings.Join(ep.Endpoints, ",")
	other.ok("import", other.file("j.csv", "id\n1\n2\n"), "--table", tbl, "--etcd", eps, "--store", store)
	if vs := e.versions(tbl); len(vs) != 2 || !vs[1].Published || vs[1].Rows != 2 {
		t.Fatalf("versions seen through the shared home: %+v", vs)
	}
	if _, err := os.Stat(filepath.Join(other.home, "etcd")); !os.IsNotExist(err) {
		t.Fatalf("--etcd started an embedded etcd in %s: %v", other.home, err)
	}
	other.fails(1, []string{"cannot connect to etcd"}, "status", "--etcd", "127.0.0.1:1", "--store", store)
}

// TestPluralAndThousands: counts in CLI output take the singular only for one, and
// thousands separators from 1,000 on.
func TestPluralAndThousands(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{plural(0, "row"), "0 rows"},
		{plural(1, "row"), "1 row"},
		{plural(2, "data file"), "2 data files"},
		{plural(int64(1501), "row"), "1,501 rows"},
		{plural(uint64(3_000_000), "version"), "3,000,000 versions"},
		{plural(uint64(1<<63), "byte"), "9,223,372,036,854,775,808 bytes"},
		{plural(-1, "row"), "-1 rows"},
		{pluralWord(1, "version"), "version"},
		{pluralWord(3, "version"), "versions"},
	} {
		if tc.got != tc.want {
			t.Fatalf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestTimestampHintSaysTheOffset: a timestamp column with a zone takes only values with
// their offset ("2020-01-01 00:00:00" is refused); the hint says so, and the zone-less one
// does not ask for it.
func TestTimestampHintSaysTheOffset(t *testing.T) {
	if h := typeHint(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}); !strings.Contains(h, "Z or ±hh:mm") {
		t.Errorf("hint for timestamp[us, tz=UTC]: %q, want it to ask for the offset", h)
	}
	if h := typeHint(&arrow.TimestampType{Unit: arrow.Microsecond}); strings.Contains(h, "offset") {
		t.Errorf("hint for timestamp[us]: %q, want no offset", h)
	}
}
