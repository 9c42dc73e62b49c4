package main

import (
	"bytes"
	stdcsv "encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/shale-db/shale/internal/flightstest"
)

// asJSONLines renders records as 'shale query --format json' does.
func asJSONLines(t *testing.T, schema *arrow.Schema, recs []arrow.RecordBatch) string {
	t.Helper()
	var b bytes.Buffer
	w, err := newRowWriter(outJSON, &b, schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// sameFields compares names, types and nullability (a Parquet reader adds field metadata).
func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		x, y := a.Field(i), b.Field(i)
		if x.Name != y.Name || !arrow.TypeEqual(x.Type, y.Type) || x.Nullable != y.Nullable {
			return false
		}
	}
	return true
}

// readParquet reads a whole Parquet file with pqarrow, as another tool would.
func readParquet(t *testing.T, data []byte) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	return flightstest.ReadParquet(t, bytes.NewReader(data), pqarrow.ArrowReadProperties{BatchSize: 1000})
}

// readArrowFile reads an Arrow IPC file (random access, footer) with ipc.FileReader.
func readArrowFile(t *testing.T, data []byte) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	fr, err := ipc.NewFileReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	var recs []arrow.RecordBatch
	for i := range fr.NumRecords() {
		r, err := fr.RecordBatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return fr.Schema(), recs
}

// TestExportWritesLiveRowsOtherToolsRead: shale export writes the live rows (deletions
// and updates applied) of the published version or of --version N as Parquet (read back
// with pqarrow), an Arrow IPC file (read back with ipc.FileReader) and CSV (read back
// with encoding/csv), to -o FILE or to stdout; each equals 'shale query' of the same
// version, and the table's data files alone still hold the deleted rows.
func TestExportWritesLiveRowsOtherToolsRead(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("export")
	var b strings.Builder
	b.WriteString("id,name,score,ok,day,at\n")
	for i := range 2000 {
		name := fmt.Sprintf("n%d", i)
		if i%7 == 0 {
			name = "" // null
		}
		fmt.Fprintf(&b, "%d,%s,%g,%t,2024-01-%02d,2024-02-03 04:05:%02d.%06d\n", i, name, float64(i)/4, i%2 == 0, i%28+1, i%60, i)
	}
	e.ok("import", e.file("x.csv", b.String()), "--table", tbl)       // version 2
	e.ok("delete", tbl, "--where", "id % 3 = 0")                      // version 3
	e.ok("update", tbl, "--set", "score = -1", "--where", "id < 100") // version 4

	type exported struct {
		schema *arrow.Schema
		recs   []arrow.RecordBatch
	}
	readBack := func(format string, data []byte) exported {
		switch format {
		case "parquet":
			s, r := readParquet(t, data)
			return exported{s, r}
		case "arrow":
			s, r := readArrowFile(t, data)
			return exported{s, r}
		}
		t.Fatalf("format %s", format)
		return exported{}
	}
	for _, version := range []string{"", "2"} {
		query := []string{"query", tbl, "--format", "json"}
		export := []string{"export", tbl}
		if version != "" {
			query = append(query, "--version", version)
			export = append(export, "--version", version)
		}
		want := e.ok(query...)
		wantRows := strings.Count(want, "\n")
		if version == "" && wantRows != 1333 || version == "2" && wantRows != 2000 {
			t.Fatalf("version %q: query gives %d rows", version, wantRows)
		}
		tableSchema := readBack("arrow", []byte(e.ok("export", tbl, "--format", "arrow"))).schema
		for _, format := range []string{"parquet", "arrow"} {
			t.Run(format+" version "+version, func(t *testing.T) {
				path := filepath.Join(e.dir, "out-"+version+"."+format)
				out := e.ok(append(export, "-o", path)...) // the format from the extension
				if !strings.HasPrefix(out, fmt.Sprintf("Exported %s rows of %s version ", thousands(int64(wantRows)), tbl)) {
					t.Errorf("export -o: %q", out)
				}
				fromFile, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				fromStdout := []byte(e.ok(append(export, "--format", format)...))
				for _, data := range [][]byte{fromFile, fromStdout} {
					got := readBack(format, data)
					if !sameFields(got.schema, tableSchema) {
						t.Errorf("schema read back:\n%s\nwant\n%s", got.schema, tableSchema)
					}
					if s := asJSONLines(t, got.schema, got.recs); s != want {
						t.Errorf("rows read back differ from query: %d lines, want %d", strings.Count(s, "\n"), wantRows)
					}
				}
			})
		}
		t.Run("csv version "+version, func(t *testing.T) {
			path := filepath.Join(e.dir, "out-"+version+".csv")
			e.ok(append(export, "-o", path)...)
			fromFile, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fromStdout := e.ok(append(export, "--format", "csv")...)
			if string(fromFile) != fromStdout {
				t.Fatalf("-o FILE and stdout differ")
			}
			if q := e.ok(append(query[:len(query):len(query)], "--format", "csv")...); fromStdout != q {
				t.Fatalf("export csv differs from query --format csv")
			}
			rows, err := stdcsv.NewReader(strings.NewReader(fromStdout)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != wantRows+1 || strings.Join(rows[0], ",") != "id,name,score,ok,day,at" {
				t.Fatalf("csv: %d records, header %v", len(rows), rows[0])
			}
			for _, r := range rows[1:] {
				var id int
				fmt.Sscan(r[0], &id)
				if version == "" && id%3 == 0 {
					t.Fatalf("deleted row %v exported", r)
				}
				if version == "" && id < 100 && r[2] != "-1" {
					t.Fatalf("row %v exported without its update", r)
				}
			}
		})
	}

	// The data files alone include deleted rows: reading them without the deletion
	// vectors gives more rows than the table has.
	var physical int64
	err := filepath.Walk(filepath.Join(e.home, "store", tbl, "data"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, recs := readArrowFile(t, data)
		for _, r := range recs {
			physical += r.NumRows()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if physical != 2000+66 { // the import, plus new copies of the 66 live rows updated
		t.Errorf("data files hold %d rows, want 2,066 (1,333 live)", physical)
	}

	// Selection, refusals and errors.
	if out := e.ok("export", tbl, "--format", "csv", "--columns", "id", "--where", "id < 5"); out != "id\n1\n2\n4\n" {
		t.Errorf("--columns --where: %q", out)
	}
	e.fails(exitUsage, []string{"export needs --format"}, "export", tbl)
	e.fails(exitUsage, []string{"export needs --format"}, "export", tbl, "-o", filepath.Join(e.dir, "x.txt"))
	e.fails(exitUsage, []string{`unknown --format "json"`}, "export", tbl, "--format", "json")
	e.fails(exitError, []string{"table not found"}, "export", e.table("nosuch"), "--format", "csv")
	bad := filepath.Join(e.dir, "bad.parquet")
	e.fails(exitError, []string{"unknown column nope"}, "export", tbl, "--columns", "nope", "-o", bad)
	if left, _ := filepath.Glob(filepath.Join(e.dir, ".bad.parquet.tmp-*")); len(left) != 0 {
		t.Errorf("a failed export left %v", left)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a failed export created %s: %v", bad, err)
	}
	_, tty := openPty(t)
	if r := e.runIO(nil, tty, nil, "export", tbl, "--format", "parquet"); r.code != exitUsage || !strings.Contains(r.stderr, "writes binary data") {
		t.Errorf("export parquet to a terminal: %v", r)
	}
}
