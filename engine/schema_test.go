package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// rowsBatch builds a batch of schema from rows of Go values (int64, float64, string; nil
// is NULL), one value per field.
func rowsBatch(t testing.TB, schema *arrow.Schema, rows [][]any) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, row := range rows {
		for i, v := range row {
			switch fb := b.Field(i).(type) {
			case *array.Int64Builder:
				fb.Append(v.(int64))
			case *array.Float64Builder:
				if v == nil {
					fb.AppendNull()
				} else {
					fb.Append(v.(float64))
				}
			case *array.StringBuilder:
				if v == nil {
					fb.AppendNull()
				} else {
					fb.Append(v.(string))
				}
			default:
				t.Fatalf("rowsBatch: no case for %s", schema.Field(i).Type)
			}
		}
	}
	return b.NewRecordBatch()
}

// scanStrings scans cols of every row (table order) and renders each row as a string.
func scanStrings(t testing.TB, tbl *Table, where string, cols ...string) []string {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), ScanOptions{Columns: cols, Filter: where})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []string
	for sc.Next() {
		rec := sc.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			s := ""
			for c := 0; c < int(rec.NumCols()); c++ {
				if c > 0 {
					s += " "
				}
				if rec.Column(c).IsNull(i) {
					s += "NULL"
				} else {
					s += rec.Column(c).ValueStr(i)
				}
			}
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustCount(t testing.TB, tbl *Table, where string) int64 {
	t.Helper()
	n, err := tbl.Count(context.Background(), where)
	if err != nil {
		t.Fatalf("Count(%q) at version %d: %v", where, tbl.Version(), err)
	}
	return n
}

func names(s *arrow.Schema) string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return fmt.Sprint(out)
}

func TestSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.Write = fragment.WriterOptions{MaxRowsPerBatch: 10, MaxRowsPerFile: 50}
	tbl, err := db.CreateTable(ctx, "evo", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 100) // v2: two fragments with (id, name)
	keys := objectKeys(t, db, "evo")

	// v3: add two columns; nothing but the manifest and transaction record is written.
	res, err := tbl.AddColumns(ctx,
		arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: "tag", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: arrow.NewMetadata([]string{"k"}, []string{"v"})})
	if err != nil || res.Version != 3 {
		t.Fatalf("AddColumns: %+v %v", res, err)
	}
	m := tbl.Manifest()
	if op := m.Txn.Op; op.Kind != manifest.OpSchemaChange || fmt.Sprint(op.SchemaDelta.Added) != "[2 3]" || m.NextFieldID != 4 {
		t.Fatalf("schema change transaction %+v, next field id %d", op, m.NextFieldID)
	}
	if names(tbl.Schema()) != "[id name score tag]" || tbl.Schema().Field(3).Metadata.Values()[0] != "v" {
		t.Fatalf("schema %v", tbl.Schema())
	}
	added := slices.DeleteFunc(objectKeys(t, db, "evo"), func(k string) bool { return slices.Contains(keys, k) })
	if len(added) != 2 { // the manifest and the transaction record
		t.Fatalf("AddColumns wrote %v", added)
	}
	// Old fragments read the new columns as NULL, with filters and projections.
	if n := mustCount(t, tbl, "score IS NULL AND tag IS NULL"); n != 100 {
		t.Fatalf("null count %d", n)
	}
	if got := scanStrings(t, tbl, "id = 7", "tag", "id", "score"); fmt.Sprint(got) != "[NULL 7 NULL]" {
		t.Fatalf("projection of new columns: %v", got)
	}

	// v4: appends write the new schema.
	var rows [][]any
	for id := int64(100); id < 150; id++ {
		rows = append(rows, []any{id, fmt.Sprint("n", id), float64(id) / 2, "t"})
	}
	rec := rowsBatch(t, tbl.Schema(), rows)
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	last := tbl.Manifest().Fragments[len(tbl.Manifest().Fragments)-1]
	if fmt.Sprint(last.Files[0].FieldIDs) != "[0 1 2 3]" {
		t.Fatalf("appended file field ids %v", last.Files[0].FieldIDs)
	}
	if n := mustCount(t, tbl, "score > 60"); n != 29 {
		t.Fatalf("score > 60: %d", n)
	}
	if n := mustCount(t, tbl, "score IS NULL OR tag = 't'"); n != 150 {
		t.Fatalf("across the schema change: %d", n)
	}

	// v5: update rows of old fragments: they are rewritten with every column.
	if res, err := tbl.Update(ctx, map[string]string{"score": "id * 2", "tag": "'upd'"}, "id < 10"); err != nil || res.Rows != 10 {
		t.Fatalf("update: %+v %v", res, err)
	}
	if got := scanStrings(t, tbl, "tag = 'upd' AND id >= 8", "id", "name", "score"); fmt.Sprint(got) != "[8 n8 16 9 n9 18]" {
		t.Fatalf("updated rows %v", got)
	}

	// v6: drop name; its data stays in the files, unread.
	if res, err := tbl.DropColumns(ctx, "name"); err != nil || res.Version != 6 {
		t.Fatalf("DropColumns: %+v %v", res, err)
	}
	if op := tbl.Manifest().Txn.Op; fmt.Sprint(op.SchemaDelta.Dropped) != "[1]" || names(tbl.Schema()) != "[id score tag]" {
		t.Fatalf("drop: %+v %v", op.SchemaDelta, tbl.Schema())
	}
	if _, err := tbl.Count(ctx, "name IS NULL"); !errors.Is(err, filter.ErrUnknownColumn) {
		t.Fatalf("dropped column in a filter: %v", err)
	}
	// v7: a new column of the same name gets a new id: it does not see the dropped data.
	if _, err := tbl.AddColumns(ctx, arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}); err != nil {
		t.Fatal(err)
	}
	if id, _ := tbl.Manifest().Schema.FieldID("name"); id != 4 {
		t.Fatalf("re-added column got field id %d, want 4 (ids are never reused)", id)
	}
	if n := mustCount(t, tbl, "name IS NULL"); n != 150 {
		t.Fatalf("re-added column reads old data: %d non-null", 150-n)
	}
	// v8: rename keeps the field id, so the data follows.
	if _, err := tbl.RenameColumn(ctx, "score", "points"); err != nil {
		t.Fatal(err)
	}
	if op := tbl.Manifest().Txn.Op; fmt.Sprint(op.SchemaDelta.Renamed) != "[2]" || names(tbl.Schema()) != "[id points tag name]" {
		t.Fatalf("rename: %+v %v", op.SchemaDelta, tbl.Schema())
	}
	if n := mustCount(t, tbl, "points > 60"); n != 29 {
		t.Fatalf("points > 60: %d", n)
	}
	if got := scanStrings(t, tbl, "id = 9 OR id = 149", "points", "id"); fmt.Sprint(got) != "[74.5 149 18 9]" {
		t.Fatalf("renamed column: %v", got)
	}

	// Time travel: each old version reads with its own schema.
	for v, want := range map[uint64]string{2: "[id name]", 3: "[id name score tag]", 6: "[id score tag]", 7: "[id score tag name]"} {
		old, err := tbl.Checkout(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if names(old.Schema()) != want {
			t.Fatalf("version %d schema %v, want %s", v, names(old.Schema()), want)
		}
		if v == 2 {
			if got := scanStrings(t, old, "id BETWEEN 9 AND 10", "id", "name"); fmt.Sprint(got) != "[9 n9 10 NULL]" {
				t.Fatalf("version 2 rows %v", got)
			}
			continue
		}
		if n := mustCount(t, old, "score IS NOT NULL"); n != map[uint64]int64{3: 0, 6: 60, 7: 60}[v] {
			t.Fatalf("version %d: %d scores", v, n)
		}
	}
	// Version 5 still has the name column, including for the rows the update rewrote.
	v5, _ := tbl.Checkout(ctx, 5)
	if got := scanStrings(t, v5, "tag = 'upd' AND id = 3", "name", "score"); fmt.Sprint(got) != "[n3 6]" {
		t.Fatalf("version 5: %v", got)
	}
}

func TestSchemaChangeErrors(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "bad", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	v := tbl.Version()
	nullable := arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	cases := []struct {
		name string
		do   func() (CommitResult, error)
		want error
	}{
		{"add non-nullable", func() (CommitResult, error) {
			return tbl.AddColumns(ctx, arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32})
		}, ErrInvalidSchemaChange},
		{"add existing", func() (CommitResult, error) {
			return tbl.AddColumns(ctx, arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true})
		}, ErrInvalidSchemaChange},
		{"add twice", func() (CommitResult, error) { return tbl.AddColumns(ctx, nullable, nullable) }, ErrInvalidSchemaChange},
		{"add unnamed", func() (CommitResult, error) {
			return tbl.AddColumns(ctx, arrow.Field{Type: arrow.PrimitiveTypes.Int32, Nullable: true})
		}, ErrInvalidSchemaChange},
		{"add nothing", func() (CommitResult, error) { return tbl.AddColumns(ctx) }, ErrInvalidSchemaChange},
		{"drop unknown", func() (CommitResult, error) { return tbl.DropColumns(ctx, "nope") }, filter.ErrUnknownColumn},
		{"drop case-insensitive", func() (CommitResult, error) { return tbl.DropColumns(ctx, "NAME") }, filter.ErrUnknownColumn},
		{"drop every column", func() (CommitResult, error) { return tbl.DropColumns(ctx, "id", "name") }, ErrInvalidSchemaChange},
		{"drop twice", func() (CommitResult, error) { return tbl.DropColumns(ctx, "name", "name") }, ErrInvalidSchemaChange},
		{"rename unknown", func() (CommitResult, error) { return tbl.RenameColumn(ctx, "nope", "x") }, filter.ErrUnknownColumn},
		{"rename onto existing", func() (CommitResult, error) { return tbl.RenameColumn(ctx, "id", "name") }, ErrInvalidSchemaChange},
		{"rename to empty", func() (CommitResult, error) { return tbl.RenameColumn(ctx, "id", "") }, ErrInvalidSchemaChange},
	}
	for _, c := range cases {
		if res, err := c.do(); !errors.Is(err, c.want) {
			t.Errorf("%s: %+v %v, want %v", c.name, res, err, c.want)
		}
	}
	if res, err := tbl.RenameColumn(ctx, "id", "id"); err != nil || res.Version != v {
		t.Errorf("rename to itself: %+v %v, want no new version", res, err)
	}
	ro, _ := tbl.Checkout(ctx, v)
	if _, err := ro.AddColumns(ctx, nullable); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only AddColumns: %v", err)
	}
	if head, _ := manifest.Head(ctx, db.Store(), "bad"); head != v {
		t.Fatalf("failed schema changes moved HEAD to %d, want %d", head, v)
	}
}

// TestSchemaChangeConcurrency: an update planned before a concurrent schema change
// re-plans on the new schema; a schema change planned before a concurrent update re-plans
// too; appends from a handle older than a schema change commit and read back under the new
// schema (new columns NULL, dropped ones ignored).
func TestSchemaChangeConcurrency(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "cc", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 20)

	h1, h2 := twoHandles(t, db, "cc")
	during(t, seamUpdatePlanned.Name(), func(ctx context.Context) error {
		_, err := h1.AddColumns(ctx, arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Float64, Nullable: true})
		return err
	})
	res, err := h2.Update(ctx, map[string]string{"name": "'u'"}, "id < 5")
	if err != nil || res.Version != h1.Version()+1 {
		t.Fatalf("update over a concurrent AddColumns: %+v %v", res, err)
	}
	if names(h2.Schema()) != "[id name c]" {
		t.Fatalf("update re-planned on schema %v", h2.Schema())
	}
	nf := h2.Manifest().Fragments[len(h2.Manifest().Fragments)-1]
	if fmt.Sprint(nf.Files[0].FieldIDs) != "[0 1 2]" {
		t.Fatalf("updated rows written with field ids %v", nf.Files[0].FieldIDs)
	}

	during(t, seamSchemaPlanned.Name(), func(ctx context.Context) error {
		_, err := h1.Update(ctx, map[string]string{"c": "id * 1.5"}, "id >= 15")
		return err
	})
	if _, err := h2.RenameColumn(ctx, "c", "cc"); err != nil {
		t.Fatalf("rename over a concurrent update: %v", err)
	}
	if failpoint.Hits(seamSchemaPlanned.Name()) != 2 {
		t.Fatalf("rename planned %d times, want 2 (re-planned after the update)", failpoint.Hits(seamSchemaPlanned.Name()))
	}
	if got := scanStrings(t, h2, "cc IS NOT NULL", "id", "cc"); fmt.Sprint(got) != "[15 22.5 16 24 17 25.5 18 27 19 28.5]" {
		t.Fatalf("after update + rename: %v", got)
	}

	// Appends from stale handles, across an added and a dropped column.
	stale, _ := db.OpenTable(ctx, "cc")
	staleSchema := stale.Schema() // id, name, cc
	if _, err := h2.AddColumns(ctx, arrow.Field{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.DropColumns(ctx, "name"); err != nil {
		t.Fatal(err)
	}
	rec := rowsBatch(t, staleSchema, [][]any{{int64(100), "gone", 1.0}, {int64(101), nil, 2.0}})
	res, err = stale.AppendRecord(ctx, rec)
	rec.Release()
	if err != nil || len(res.Rebased) != 2 {
		t.Fatalf("append from a handle two schema changes old: %+v %v", res, err)
	}
	head, _ := db.OpenTable(ctx, "cc")
	if names(head.Schema()) != "[id cc extra]" {
		t.Fatalf("HEAD schema %v", head.Schema())
	}
	if got := scanStrings(t, head, "id >= 100", "id", "cc", "extra"); fmt.Sprint(got) != "[100 1 NULL 101 2 NULL]" {
		t.Fatalf("stale append read at HEAD: %v", got)
	}
	if n := mustCount(t, head, ""); n != 22 {
		t.Fatalf("rows %d", n)
	}
}
