package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// dictFixture is a file of dictRows rows: id int64 (the row number), city
// dictionary<values=string, indices=int8> and num dictionary<values=int64,
// indices=int32>, both with null indices and, in Arrow IPC files, a null value in the
// dictionary too (pqarrow's writer refuses those).
type dictFixture struct {
	format string // "parquet", "arrow" (IPC file) or "arrows" (IPC stream)
	cities []*string
	nums   []*int64
}

const dictRows = 4000

func newDictFixture(format string) dictFixture {
	s := func(v string) *string { return &v }
	n := func(v int64) *int64 { return &v }
	f := dictFixture{format: format,
		cities: []*string{s("SEA"), s("LAX"), s("PDX"), s("BOS")},
		nums:   []*int64{n(10), n(20), n(30)}}
	if format != "parquet" {
		f.cities[2], f.nums[1] = nil, nil
	}
	return f
}

// row returns row i's city and num (nil: null): a null index every 10th (city) and 7th
// (num) row, else the value the index i%4 (i%3) selects.
func (f dictFixture) row(i int) (*string, *int64) {
	var city *string
	var num *int64
	if i%10 != 9 {
		city = f.cities[i%4]
	}
	if i%7 != 6 {
		num = f.nums[i%3]
	}
	return city, num
}

// ids returns the rows where keep is true.
func (f dictFixture) ids(keep func(city *string, num *int64) bool) []int64 {
	var out []int64
	for i := range dictRows {
		if keep(f.row(i)) {
			out = append(out, int64(i))
		}
	}
	return out
}

// write writes the fixture to path: four batches (IPC) or row groups of 1,500 rows
// (Parquet, with the Arrow schema stored, as pyarrow writes it).
func (f dictFixture) write(t *testing.T, path string) {
	t.Helper()
	mem := memory.DefaultAllocator
	cityType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	numType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Int64}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "city", Type: cityType, Nullable: true},
		{Name: "num", Type: numType, Nullable: true},
	}, nil)
	sb := array.NewStringBuilder(mem)
	for _, c := range f.cities {
		if c == nil {
			sb.AppendNull()
		} else {
			sb.Append(*c)
		}
	}
	cityValues := sb.NewArray()
	defer cityValues.Release()
	nb := array.NewInt64Builder(mem)
	for _, n := range f.nums {
		if n == nil {
			nb.AppendNull()
		} else {
			nb.Append(*n)
		}
	}
	numValues := nb.NewArray()
	defer numValues.Release()

	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	type writer interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	var w writer
	switch f.format {
	case "parquet":
		w, err = pqarrow.NewFileWriter(schema, out, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1500)),
			pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	case "arrow":
		w, err = ipc.NewFileWriter(out, ipc.WithSchema(schema))
	default:
		w = ipc.NewWriter(out, ipc.WithSchema(schema))
	}
	if err != nil {
		t.Fatal(err)
	}
	const batch = dictRows / 4
	for start := 0; start < dictRows; start += batch {
		ids := array.NewInt64Builder(mem)
		ci := array.NewInt8Builder(mem)
		ni := array.NewInt32Builder(mem)
		for i := start; i < start+batch; i++ {
			ids.Append(int64(i))
			if i%10 == 9 {
				ci.AppendNull()
			} else {
				ci.Append(int8(i % 4))
			}
			if i%7 == 6 {
				ni.AppendNull()
			} else {
				ni.Append(int32(i % 3))
			}
		}
		idArr, cIdx, nIdx := ids.NewArray(), ci.NewArray(), ni.NewArray()
		cols := []arrow.Array{idArr, array.NewDictionaryArray(cityType, cIdx, cityValues), array.NewDictionaryArray(numType, nIdx, numValues)}
		rec := array.NewRecordBatch(schema, cols, batch)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		for _, a := range append(cols, cIdx, nIdx) {
			a.Release()
		}
		ids.Release()
		ci.Release()
		ni.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// selected returns the ids `query TABLE --where WHERE` prints, in order.
func (e *env) selected(table, where string) []int64 {
	e.t.Helper()
	var out []int64
	for _, r := range jsonLines(e.t, e.ok("query", table, "--where", where, "--columns", "id", "--json")) {
		out = append(out, int64(r["id"].(float64)))
	}
	slices.Sort(out)
	return out
}

// checkDictRows: filters on the imported dictionary columns select exactly the fixture's
// rows (copies times each).
func (e *env) checkDictRows(table string, f dictFixture, copies int) {
	e.t.Helper()
	eq := func(a, b *string) bool { return a != nil && b != nil && *a == *b }
	for _, tc := range []struct {
		where string
		keep  func(*string, *int64) bool
	}{
		{"city = 'SEA'", func(c *string, _ *int64) bool { return eq(c, f.cities[0]) }},
		{"city IN ('LAX', 'BOS')", func(c *string, _ *int64) bool { return eq(c, f.cities[1]) || eq(c, f.cities[3]) }},
		{"city IS NULL", func(c *string, _ *int64) bool { return c == nil }},
		{"num = 30", func(_ *string, n *int64) bool { return n != nil && *n == 30 }},
		{"num >= 20", func(_ *string, n *int64) bool { return n != nil && *n >= 20 }},
		{"num IS NULL", func(_ *string, n *int64) bool { return n == nil }},
		{"city = 'LAX' AND num = 10", func(c *string, n *int64) bool { return eq(c, f.cities[1]) && n != nil && *n == 10 }},
	} {
		var want []int64
		for _, id := range f.ids(tc.keep) {
			for range copies {
				want = append(want, id)
			}
		}
		if len(want) == 0 {
			e.t.Fatalf("%s: the fixture selects no row", tc.where)
		}
		if got := e.selected(table, tc.where); !slices.Equal(got, want) {
			e.t.Fatalf("%s %s: %d rows %v..., want %d %v...", table, tc.where, len(got), got[:min(len(got), 8)], len(want), want[:min(len(want), 8)])
		}
	}
}

// TestImportDictionaryColumnsAsValues: a Parquet or Arrow IPC file whose columns have
// Arrow dictionary types (pandas categoricals) imports them as their value types, nulls
// kept (a null index and a null dictionary value), so filters on them select the right
// rows; such a file appends to a table with the plain types, and the table created from
// it takes an append of another format's dictionary file.
func TestImportDictionaryColumnsAsValues(t *testing.T) {
	e := sharedEnv(t)
	for _, format := range []string{"parquet", "arrow", "arrows"} {
		t.Run(format, func(t *testing.T) {
			e := &env{t: t, home: e.home, dir: e.dir}
			f := newDictFixture(format)
			path := filepath.Join(e.dir, "dict."+format)
			f.write(t, path)
			tbl := e.table("dict")
			e.ok("import", path, "--table", tbl)
			if got := strings.Join(e.schemaOf(tbl), ","); got != "id int64,city utf8,num int64" {
				t.Fatalf("schema %s, want the value types", got)
			}
			e.checkDictRows(tbl, f, 1)
			if format == "arrows" { // the same stream on standard input
				in, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer in.Close()
				stdinTbl := e.table("dictstdin")
				if r := e.runIO(in, nil, nil, "import", "-", "--format", "arrow", "--table", stdinTbl); r.code != 0 {
					t.Fatal(r)
				}
				e.checkDictRows(stdinTbl, f, 1)
			}

			// Appending to a table created with the plain types.
			plain := e.table("dictplain")
			e.ok("create", plain, "--schema", "id:int64!,city:string,num:int64")
			e.ok("import", path, "--table", plain)
			e.ok("import", path, "--table", plain, "--idempotency-key", "again")
			if got := strings.Join(e.schemaOf(plain), ","); got != "id int64,city utf8,num int64" {
				t.Fatalf("schema after appends %s", got)
			}
			e.checkDictRows(plain, f, 2)
		})
	}
}

// TestImportDictionaryIntoDictionaryTable: a table whose column already has a
// dictionary type (created before imports decoded dictionaries) still takes appends of
// files with that dictionary type, from Parquet and Arrow IPC.
func TestImportDictionaryIntoDictionaryTable(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("olddict")
	ctx := context.Background()
	db := e.engineDB(ctx)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "city", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "num", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, // pqarrow reads a dictionary of int64 as int64
	}, nil)
	if _, err := db.CreateTable(ctx, tbl, schema); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"parquet", "arrow"} {
		f := newDictFixture(format)
		path := filepath.Join(e.dir, "old."+format)
		f.write(t, path)
		e.ok("import", path, "--table", tbl) // city kept a dictionary, num (the IPC file's too) decoded
	}
	want := fmt.Sprintf("id int64,city %s,num int64", schema.Field(1).Type)
	if got := strings.Join(e.schemaOf(tbl), ","); got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	if vs := e.versions(tbl); vs[len(vs)-1].Rows != 2*dictRows {
		t.Fatalf("versions %+v", vs)
	}
	// num = 30: the third value of both files.
	pq, ipcf := newDictFixture("parquet"), newDictFixture("arrow")
	is30 := func(_ *string, n *int64) bool { return n != nil && *n == 30 }
	if got, want := len(e.selected(tbl, "num = 30")), len(pq.ids(is30))+len(ipcf.ids(is30)); got != want {
		t.Fatalf("num = 30: %d rows, want %d", got, want)
	}

	// A table whose dictionary has other index and value types (int32, large_utf8) than
	// the files' (int8, utf8; pandas picks the index type by the number of categories):
	// the files' values are encoded as the table's dictionary, the same rows as above.
	wide := e.table("olddictwide")
	wideSchema := arrow.NewSchema([]arrow.Field{schema.Field(0),
		{Name: "city", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.LargeString}, Nullable: true},
		schema.Field(2)}, nil)
	if _, err := db.CreateTable(ctx, wide, wideSchema); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"parquet", "arrow"} {
		e.ok("import", filepath.Join(e.dir, "old."+format), "--table", wide)
	}
	want = fmt.Sprintf("id int64,city %s,num int64", wideSchema.Field(1).Type)
	if got := strings.Join(e.schemaOf(wide), ","); got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	rows := func(table string) []string {
		// A dictionary passed through as the file had it keeps the IPC fixture's null
		// dictionary value, which CSV output prints as "(null)"; encoded, it is a null
		// index, printed empty like every null.
		out := strings.ReplaceAll(e.ok("query", table, "--format", "csv"), "(null)", "")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(lines)
		return lines
	}
	if got, want := rows(wide), rows(tbl); !slices.Equal(got, want) || len(got) != 2*dictRows+1 {
		for i := range got {
			if i < len(want) && got[i] != want[i] {
				t.Fatalf("rows of the int32/large_utf8 dictionary table differ from the int8/utf8 one's (%d and %d lines): line %d %q, want %q", len(got), len(want), i, got[i], want[i])
			}
		}
		t.Fatalf("rows of the int32/large_utf8 dictionary table: %d lines, want %d", len(got), len(want))
	}
}

// TestImportNestedDictionary: a dictionary inside a struct is not decoded (only top-level
// columns are): the table keeps it a dictionary, as before, from Parquet and Arrow IPC,
// with its values and nulls, next to the decoded top-level one. A CSV file cannot be
// imported into such a table, and says so.
func TestImportNestedDictionary(t *testing.T) {
	e := sharedEnv(t)
	mem := memory.DefaultAllocator
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	vb := array.NewStringBuilder(mem)
	defer vb.Release()
	vb.AppendValues([]string{"SEA", "LAX"}, nil)
	values := vb.NewArray()
	defer values.Release()
	ib := array.NewInt8Builder(mem)
	defer ib.Release()
	ib.AppendValues([]int8{0, 1, 0, 1}, []bool{true, true, false, true})
	idx := ib.NewArray()
	defer idx.Release()
	city := array.NewDictionaryArray(dt, idx, values)
	defer city.Release()
	nested, err := array.NewStructArray([]arrow.Array{city}, []string{"city"})
	if err != nil {
		t.Fatal(err)
	}
	defer nested.Release()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "top", Type: dt, Nullable: true},
		{Name: "nested", Type: nested.DataType(), Nullable: true},
	}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{city, nested}, 4)
	defer rec.Release()
	for _, format := range []string{"parquet", "arrow"} {
		path := filepath.Join(e.dir, "nested."+format)
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if format == "parquet" {
			w, err := pqarrow.NewFileWriter(schema, out, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			w, err := ipc.NewFileWriter(out, ipc.WithSchema(schema))
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
		out.Close()
		tbl := e.table("nesteddict")
		e.ok("import", path, "--table", tbl)
		want := "top utf8,nested struct<city: dictionary<values=utf8, indices=int8, ordered=false> nullable>"
		if got := strings.Join(e.schemaOf(tbl), ","); got != want {
			t.Fatalf("%s: schema %s, want %s", format, got, want)
		}
		got := e.ok("query", tbl, "--where", "top = 'SEA' OR top IS NULL", "--json")
		if want := `{"top":"SEA","nested":"{\"city\":\"SEA\"}"}` + "\n" + `{"top":null,"nested":"{\"city\":null}"}` + "\n"; got != want {
			t.Fatalf("%s: rows\n%s\nwant\n%s", format, got, want)
		}
		// CSV cannot be parsed into a struct (arrow-go's CSV reader panicked on the
		// schema): a clear error naming the column, nothing committed.
		versions := len(e.versions(tbl))
		csvIn := e.file("nested-"+format+".csv", "top,nested\nSEA,x\n")
		e.fails(1, []string{"schema mismatch", `column "nested"`, "struct<", "cannot be read into", "Parquet or Arrow IPC"}, "import", csvIn, "--table", tbl)
		if got := len(e.versions(tbl)); got != versions {
			t.Fatalf("%s: %d versions after a refused CSV import, want %d", format, got, versions)
		}
	}
}

// TestDecodeDictionaries: decodeDictionaries turns top-level dictionaries of strings and
// bools (bool values go through take, not the cast) into their values, nulls from the
// indices and from the dictionary both kept, batch after batch; a column named in keep
// and a dictionary in a struct stay as they are; the decoded arrays are released.
func TestDecodeDictionaries(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	js := func(dt arrow.DataType, s string) arrow.Array {
		a, _, err := array.FromJSON(memory.DefaultAllocator, dt, strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	dict := func(values arrow.Array, indices string) arrow.Array {
		idx := js(arrow.PrimitiveTypes.Int8, indices)
		defer idx.Release()
		return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: values.DataType()}, idx, values)
	}
	strs := js(arrow.BinaryTypes.String, `["SEA", null, "LAX"]`)
	defer strs.Release()
	bools := js(arrow.FixedWidthTypes.Boolean, `[true, null, false]`)
	defer bools.Release()
	s, b, k := dict(strs, `[0, 1, null, 2, 0]`), dict(bools, `[2, null, 1, 0, 0]`), dict(strs, `[2, 2, 2, 2, 2]`)
	defer s.Release()
	defer b.Release()
	defer k.Release()
	nested, err := array.NewStructArray([]arrow.Array{s}, []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	defer nested.Release()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: s.DataType(), Nullable: true},
		{Name: "b", Type: b.DataType(), Nullable: true},
		{Name: "k", Type: k.DataType(), Nullable: true},
		{Name: "nested", Type: nested.DataType(), Nullable: true},
	}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{s, b, k, nested}, 5)
	defer rec.Release()
	in, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec, rec})
	if err != nil {
		t.Fatal(err)
	}
	r := decodeDictionaries(context.Background(), in, map[string]*arrow.DictionaryType{"k": k.DataType().(*arrow.DictionaryType)}, mem)
	defer r.Release()
	wantS := js(arrow.BinaryTypes.String, `["SEA", null, null, "LAX", "SEA"]`)
	defer wantS.Release()
	wantB := js(arrow.FixedWidthTypes.Boolean, `[false, null, null, true, true]`)
	defer wantB.Release()
	want := []arrow.Array{wantS, wantB, k, nested}
	var types []string
	for _, f := range r.Schema().Fields() {
		types = append(types, f.Type.String())
	}
	if got := strings.Join(types, " | "); got != "utf8 | bool | "+k.DataType().String()+" | "+nested.DataType().String() {
		t.Fatalf("schema %s", got)
	}
	n := 0
	for ; r.Next(); n++ {
		for c, col := range r.RecordBatch().Columns() {
			if !array.Equal(col, want[c]) {
				t.Fatalf("batch %d column %s: %v, want %v", n, schema.Field(c).Name, col, want[c])
			}
		}
	}
	if err := r.Err(); err != nil || n != 2 {
		t.Fatalf("%d batches, err %v", n, err)
	}

	// Nothing to decode: the reader itself.
	plain, err := array.NewRecordReader(schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release()
	same := map[string]*arrow.DictionaryType{}
	for _, f := range schema.Fields()[:3] {
		same[f.Name] = f.Type.(*arrow.DictionaryType)
	}
	if got := decodeDictionaries(context.Background(), plain, same, mem); got != plain {
		t.Fatal("a reader with every dictionary kept was wrapped")
	}
}
