package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// mistypedFiles are data files whose column of field id 0 ("id", int64, not nullable in
// kvSchema) disagrees with the table schema, each with the rows to store.
var mistypedFiles = map[string]struct {
	id    arrow.Field
	build func(b array.Builder, i int)
}{
	"utf8 for int64": {arrow.Field{Name: "id", Type: arrow.BinaryTypes.String},
		func(b array.Builder, i int) { b.(*array.StringBuilder).Append("x") }},
	"int32 for int64": {arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		func(b array.Builder, i int) { b.(*array.Int32Builder).Append(int32(i)) }},
	"list for scalar": {arrow.Field{Name: "id", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		func(b array.Builder, i int) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
		}},
	"nullable for non-nullable": {arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		func(b array.Builder, i int) {
			if i%2 == 0 {
				b.AppendNull()
			} else {
				b.(*array.Int64Builder).Append(int64(i))
			}
		}},
}

// commitMistyped stores a data file of rows rows whose field id 0 has the field id (type
// and nullability) instead of the table's, and commits it to tbl's table as an append
// (bypassing the schema checks of Append, as a buggy or foreign writer would). It
// returns the file's key and the committed version.
func commitMistyped(t *testing.T, tbl *Table, id arrow.Field, build func(array.Builder, int), rows int) (string, uint64) {
	t.Helper()
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{id, kvSchema.Field(1)}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range rows {
		build(b.Field(0), i)
		b.Field(1).(*array.StringBuilder).Append("n")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	w, err := fragment.NewWriter(ctx, tbl.db.store, manifest.DataDir(tbl.name), schema, tbl.m.Schema.FieldIDs, fragment.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	frag := manifest.Fragment{Files: files, PhysicalRows: files[0].Rows}
	m, _, err := manifest.Commit(ctx, tbl.db.store, tbl.name, tbl.m,
		manifest.NewTransaction(tbl.m.Version, manifest.Operation{Kind: manifest.OpAppend, NewFragments: []manifest.Fragment{frag}}),
		manifest.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return files[0].Key, m.Version
}

// requireCorruptObject fails unless err reports key of table at version as a corrupt
// object, matching both corruption sentinels (the internal fragment one and the public
// manifest one).
func requireCorruptObject(t *testing.T, what string, err error, table string, version uint64, key string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want a corrupt data file %s", what, key)
	}
	if !errors.Is(err, fragment.ErrCorrupt) || !errors.Is(err, manifest.ErrCorrupt) {
		t.Fatalf("%s: %v: want an error wrapping ErrCorrupt", what, err)
	}
	var oe *manifest.ObjectError
	if !errors.As(err, &oe) || oe.Table != table || oe.Version != version || oe.Key != key {
		t.Fatalf("%s: %v: want a *manifest.ObjectError naming table %q version %d object %s", what, err, table, version, key)
	}
	if !strings.Contains(err.Error(), key) {
		t.Fatalf("%s: %q does not name the object %s", what, err, key)
	}
}

// TestScanOfMistypedDataFileIsCorruptNotPanic: a committed data file whose column has a
// different type (or a weaker nullability) than the schema field of the same field id is
// a corrupt object to every read path (scan, count, delete and update planning), never a
// panic in a scan goroutine.
func TestScanOfMistypedDataFileIsCorruptNotPanic(t *testing.T) {
	ctx := context.Background()
	for name, c := range mistypedFiles {
		t.Run(name, func(t *testing.T) {
			db := openDB(t, "")
			tbl, err := db.CreateTable(ctx, "t", kvSchema)
			if err != nil {
				t.Fatal(err)
			}
			appendRange(t, tbl, 0, 10)
			key, v := commitMistyped(t, tbl, c.id, c.build, 5)
			at, err := db.OpenTableAt(ctx, "t", v)
			if err != nil {
				t.Fatal(err)
			}
			scan := func(opts ScanOptions) error {
				sc, err := at.Scan(ctx, opts)
				if err != nil {
					return err
				}
				defer sc.Release()
				for sc.Next() {
				}
				return sc.Err()
			}
			requireCorruptObject(t, "scan", scan(ScanOptions{}), "t", v, key)
			requireCorruptObject(t, "scan with filter", scan(ScanOptions{Columns: []string{"name"}, Filter: "id < 100"}), "t", v, key)
			_, err = at.Count(ctx, "id < 100")
			requireCorruptObject(t, "count", err, "t", v, key)

			// Writes plan at HEAD, which is this version (it was never published, so a
			// handle at the published version moves there).
			w, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.Delete(ctx, "id = 3")
			requireCorruptObject(t, "delete", err, "t", v, key)
			_, err = w.Update(ctx, map[string]string{"name": "'u'"}, "id = 3")
			requireCorruptObject(t, "update", err, "t", v, key)
			if m, err := manifest.Load(ctx, db.store, "t", v+1); err == nil {
				t.Fatalf("version %d (%s) committed over a corrupt data file", m.Version, m.Txn.Op.Kind)
			}
		})
	}
}
