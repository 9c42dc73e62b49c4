package fragment

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestCheckSchemaRefusesMistypedColumns: a file whose column disagrees with the schema
// field of the same field id (type, nested type, nullability) is corrupt, named by key;
// columns dropped from the schema and fields added to it are not the file's fault.
func TestCheckSchemaRefusesMistypedColumns(t *testing.T) {
	s := memStore(t)
	r := seeded(t)
	file := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "n", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rec := randRecord(r, file, 20, 10)
	defer rec.Release()
	files := writeRecords(t, s, "f", file, []arrow.RecordBatch{rec}, WriterOptions{})
	fr, err := OpenFile(context.Background(), s, files[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	ids := fieldIDsFor(file) // 100, 103, 106

	field := func(name string, dt arrow.DataType, nullable bool) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: nullable}
	}
	ok := map[string]struct {
		fields []arrow.Field
		ids    []int32
	}{
		"same":                {file.Fields(), ids},
		"renamed":             {[]arrow.Field{field("A", arrow.PrimitiveTypes.Int64, false), file.Field(1), file.Field(2)}, ids},
		"column dropped":      {[]arrow.Field{file.Field(0), file.Field(2)}, []int32{100, 106}},
		"column added":        {[]arrow.Field{file.Field(0), file.Field(1), file.Field(2), field("z", arrow.PrimitiveTypes.Int8, true)}, []int32{100, 103, 106, 200}},
		"nullable in schema":  {[]arrow.Field{field("a", arrow.PrimitiveTypes.Int64, true), file.Field(1), file.Field(2)}, ids},
		"reordered in schema": {[]arrow.Field{file.Field(2), file.Field(0), file.Field(1)}, []int32{106, 100, 103}},
	}
	for name, c := range ok {
		if err := fr.CheckSchema(arrow.NewSchema(c.fields, nil), c.ids); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]struct {
		fields []arrow.Field
		want   string
	}{
		"utf8 for int64":            {[]arrow.Field{field("a", arrow.BinaryTypes.String, false), file.Field(1), file.Field(2)}, `field id 100 ("a") as int64, the schema has utf8`},
		"int32 for int64":           {[]arrow.Field{field("a", arrow.PrimitiveTypes.Int32, false), file.Field(1), file.Field(2)}, "the schema has int32"},
		"scalar for list":           {[]arrow.Field{file.Field(0), field("l", arrow.PrimitiveTypes.Int32, true), file.Field(2)}, "as list<item: int32, nullable>, the schema has int32"},
		"list of another type":      {[]arrow.Field{file.Field(0), field("l", arrow.ListOf(arrow.PrimitiveTypes.Int64), true), file.Field(2)}, "field id 103"},
		"nullable for non-nullable": {[]arrow.Field{file.Field(0), file.Field(1), field("n", arrow.BinaryTypes.String, false)}, "as nullable, the schema has it not nullable"},
	}
	for name, c := range bad {
		err := fr.CheckSchema(arrow.NewSchema(c.fields, nil), ids)
		var ce *CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Key != files[0].Key || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a *CorruptError naming %s containing %q", name, err, files[0].Key, c.want)
		}
	}
	if err := fr.CheckSchema(file, ids[:2]); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("field ids that do not fit the schema: %v, want a usage error", err)
	}
}

// TestBatchRowsMustAddUpOnOpen: a description whose batches do not add up to its row
// count is corrupt.
func TestBatchRowsMustAddUpOnOpen(t *testing.T) {
	s := memStore(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := randRecord(seeded(t), schema, 10, 0)
	defer rec.Release()
	df := writeRecords(t, s, "f", schema, []arrow.RecordBatch{rec}, WriterOptions{})[0]
	df.Rows++
	if _, err := OpenFile(context.Background(), s, df, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), df.Key) {
		t.Fatalf("want ErrCorrupt naming %s, got %v", df.Key, err)
	}
}
