package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// kvBatch builds ids [from, to) with names "n<id>" (every 10th name null).
func kvBatch(from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, kvSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		if i%10 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
		}
	}
	return b.NewRecordBatch()
}

// ids scans column id and returns the values in table order.
func ids(t testing.TB, tbl *Table, where string) []int64 {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), ScanOptions{Columns: []string{"id"}, Filter: where})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var out []int64
	for sc.Next() {
		out = append(out, sc.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func appendRange(t testing.TB, tbl *Table, from, to int64) CommitResult {
	t.Helper()
	rec := kvBatch(from, to)
	defer rec.Release()
	res, err := tbl.AppendRecord(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTableLifecycle runs create, append, scan, delete, time travel and overwrite on every
// store kind: local disk, memory, the S3 protocol and the GCS protocol.
func TestTableLifecycle(t *testing.T) {
	for name, s := range storetest.All(t) {
		t.Run(name, func(t *testing.T) { testLifecycle(t, openDBOn(t, s)) })
	}
}

func testLifecycle(t *testing.T, db *DB) {
	ctx := context.Background()
	db.opts.Write = fragment.WriterOptions{MaxRowsPerBatch: 100, MaxRowsPerFile: 1000}
	tbl, err := db.CreateTable(ctx, "kv", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateTable(ctx, "kv", kvSchema); !errors.Is(err, ErrTableExists) {
		t.Fatalf("second create: %v", err)
	}
	r1 := appendRange(t, tbl, 0, 2500) // 3 fragments
	r2 := appendRange(t, tbl, 2500, 3000)
	if r1.Version != 2 || r2.Version != 3 || !r2.Published {
		t.Fatalf("versions %+v %+v", r1, r2)
	}
	if n, _ := tbl.Count(ctx, ""); n != 3000 {
		t.Fatalf("count %d", n)
	}
	got := ids(t, tbl, "id >= 990 AND id < 1010")
	if fmt.Sprint(got) != fmt.Sprint(seq(990, 1010)) {
		t.Fatalf("range scan %v", got)
	}
	// Statistics prune: a point query reads one batch.
	sc, err := tbl.Scan(ctx, ScanOptions{Filter: "id = 2750"})
	if err != nil {
		t.Fatal(err)
	}
	st := sc.Stats()
	sc.Release()
	if st.Batches-st.BatchesPruned != 1 || st.FragmentsPruned != st.Fragments-1 {
		t.Fatalf("pruning: %+v", st)
	}
	if n, err := tbl.Count(ctx, "name IS NULL"); err != nil || n != 300 {
		t.Fatalf("null count %d %v", n, err)
	}

	// Delete: a deletion vector in one fragment, and a whole fragment dropped.
	del, err := tbl.Delete(ctx, "id < 5 OR id >= 2500")
	if err != nil {
		t.Fatal(err)
	}
	if del.Rows != 505 || del.Version != 4 {
		t.Fatalf("delete %+v", del)
	}
	if n, _ := tbl.Count(ctx, ""); n != 2495 {
		t.Fatalf("count after delete %d", n)
	}
	if got := ids(t, tbl, "id < 7"); fmt.Sprint(got) != "[5 6]" {
		t.Fatalf("after delete %v", got)
	}
	if len(tbl.Manifest().Fragments) != 3 {
		t.Fatalf("fully deleted fragment kept: %d fragments", len(tbl.Manifest().Fragments))
	}
	// Deleting again what is gone commits nothing.
	if r, err := tbl.Delete(ctx, "id < 5"); err != nil || r.Version != 4 || r.Rows != 0 {
		t.Fatalf("empty delete %+v %v", r, err)
	}
	// A second delete in a fragment that has a deletion vector keeps the old deletions.
	if _, err := tbl.Delete(ctx, "id = 5"); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, tbl, "id < 7"); fmt.Sprint(got) != "[6]" {
		t.Fatalf("after second delete %v", got)
	}

	// Time travel: version 3 still sees everything; a checkout is read-only.
	old, err := tbl.Checkout(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := old.Count(ctx, ""); n != 3000 {
		t.Fatalf("v3 count %d", n)
	}
	if got := ids(t, old, "id < 3"); fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("v3 rows %v", got)
	}
	if _, err := old.Delete(ctx, "id = 1"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write on checkout: %v", err)
	}
	vs, err := tbl.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, v := range vs {
		ops = append(ops, string(v.Operation))
		if !v.Published {
			t.Fatalf("version %d not published", v.Version)
		}
	}
	if strings.Join(ops, ",") != "create,append,append,delete,delete" {
		t.Fatalf("versions %v", ops)
	}

	// A new handle opens the published version.
	again, err := db.OpenTable(ctx, "kv")
	if err != nil || again.Version() != 5 {
		t.Fatalf("open: v%d %v", again.Version(), err)
	}
	status, err := db.Status(ctx)
	if err != nil || len(status) != 1 || status[0].Head != 5 || status[0].Published != 5 {
		t.Fatalf("status %+v %v", status, err)
	}

	// Overwrite replaces the rows; the old version stays readable.
	rec := kvBatch(100, 110)
	rdr, _ := array.NewRecordReader(kvSchema, []arrow.RecordBatch{rec})
	if _, err := tbl.Overwrite(ctx, rdr); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if got := ids(t, tbl, ""); fmt.Sprint(got) != fmt.Sprint(seq(100, 110)) {
		t.Fatalf("after overwrite %v", got)
	}
	if n, _ := old.Count(ctx, ""); n != 3000 {
		t.Fatalf("v3 after overwrite %d", n)
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestBadInputCommitsNothing(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "kv", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	head := func() uint64 {
		h, err := manifest.Head(ctx, db.Store(), "kv")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	before := head()
	for _, name := range []string{"a/b", "..", "x\x00y", ""} {
		if _, err := db.CreateTable(ctx, name, kvSchema); !errors.Is(err, manifest.ErrInvalidTableName) {
			t.Errorf("create %q: %v", name, err)
		}
		if _, err := db.OpenTable(ctx, name); !errors.Is(err, manifest.ErrInvalidTableName) {
			t.Errorf("open %q: %v", name, err)
		}
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	b.Field(0).(*array.Int32Builder).Append(1)
	rec := b.NewRecordBatch()
	if _, err := tbl.AppendRecord(ctx, rec); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("schema mismatch: %v", err)
	}
	if _, err := tbl.Delete(ctx, "id >"); !errors.Is(err, filter.ErrSyntax) {
		t.Errorf("malformed WHERE: %v", err)
	}
	if _, err := tbl.Delete(ctx, "nope = 1"); !errors.Is(err, filter.ErrUnknownColumn) {
		t.Errorf("unknown column in WHERE: %v", err)
	}
	if _, err := tbl.Scan(ctx, ScanOptions{Columns: []string{"nope"}}); !errors.Is(err, filter.ErrUnknownColumn) {
		t.Errorf("unknown column: %v", err)
	}
	if _, err := tbl.Checkout(ctx, 99); !errors.Is(err, manifest.ErrVersionNotFound) {
		t.Errorf("checkout missing version: %v", err)
	}
	if _, err := db.OpenTable(ctx, "missing"); !errors.Is(err, manifest.ErrTableNotFound) {
		t.Errorf("open missing table: %v", err)
	}
	if after := head(); after != before {
		t.Fatalf("bad input committed: HEAD %d -> %d", before, after)
	}
}

func TestOpenTableAtDropTableAndWidening(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	large := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	tbl, err := db.CreateTable(ctx, "wide", large)
	if err != nil {
		t.Fatal(err)
	}
	// Records with utf8 strings append to a large_utf8 column.
	appendRange(t, tbl, 0, 10)
	sc, err := tbl.Scan(ctx, ScanOptions{Columns: []string{"name"}, Filter: "id = 3"})
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Next() || sc.RecordBatch().Column(0).(*array.LargeString).Value(0) != "n3" {
		t.Fatalf("widened append: %v", sc.Err())
	}
	sc.Release()
	appendRange(t, tbl, 10, 20)

	v2, err := db.OpenTableAt(ctx, "wide", 2)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := v2.Count(ctx, ""); n != 10 || v2.Version() != 2 {
		t.Fatalf("OpenTableAt: v%d with %d rows", v2.Version(), n)
	}
	if _, err := v2.AppendRecord(ctx, kvBatch(0, 1)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append through OpenTableAt handle: %v", err)
	}

	n, err := db.DropTable(ctx, "wide")
	if err != nil || n == 0 {
		t.Fatalf("drop: %d %v", n, err)
	}
	if _, err := db.OpenTable(ctx, "wide"); !errors.Is(err, manifest.ErrTableNotFound) {
		t.Fatalf("open after drop: %v", err)
	}
	if _, err := db.DropTable(ctx, "wide"); !errors.Is(err, manifest.ErrTableNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	// The name can be reused: a new incarnation, numbered on from the drop marker (v4),
	// never again from version 1, and the dropped table's versions are not its versions.
	again, err := db.CreateTable(ctx, "wide", kvSchema)
	if err != nil || again.Version() != 5 || again.Manifest().Incarnation == tbl.Manifest().Incarnation {
		t.Fatalf("recreate: %v", err)
	}
	if _, err := db.OpenTableAt(ctx, "wide", 2); !errors.Is(err, manifest.ErrVersionNotFound) {
		t.Fatalf("a version of the dropped table through OpenTableAt: %v", err)
	}
	if _, err := again.Checkout(ctx, 4); !errors.Is(err, manifest.ErrVersionNotFound) {
		t.Fatalf("the drop marker through Checkout: %v", err)
	}
}

// TestCreateAfterObjectsDeletedByHand: a table whose objects were removed outside Shale
// leaves its catalog pointer behind; creating the table again replaces that stale pointer
// instead of "publishing" by finding it ahead.
func TestCreateAfterObjectsDeletedByHand(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "gone", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 3)
	objs, _ := db.Store().List(ctx, "gone/", 0)
	for _, o := range objs {
		db.Store().Delete(ctx, o.Key)
	}
	again, err := db.CreateTable(ctx, "gone", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, again, 10, 12)
	reopened, err := db.OpenTable(ctx, "gone")
	if err != nil || reopened.Version() != 2 {
		t.Fatalf("reopen: %v", err)
	}
	if got := ids(t, reopened, ""); fmt.Sprint(got) != "[10 11]" {
		t.Fatalf("rows %v", got)
	}
}

// TestDeleteSeesCommittedUnpublishedRows: rows committed by a writer that died before
// publishing are committed; a later delete must see and delete them, not publish them
// alongside a delete that claims they are gone.
func TestDeleteSeesCommittedUnpublishedRows(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "dead", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 3)
	// A writer commits ids 10..12 and dies before its publish.
	rec := kvBatch(10, 13)
	rdr := recordReader(rec)
	txn := manifest.NewTransaction(tbl.m.Version, manifest.Operation{Kind: manifest.OpAppend})
	frags, _, err := tbl.writeFragments(ctx, rdr, tbl.Schema(), tbl.m.Schema.FieldIDs, txn.ID)
	rdr.Release()
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	txn.Op.NewFragments = frags
	if _, _, err := manifest.Commit(ctx, db.store, "dead", tbl.m, txn, manifest.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	h := mustOpen(t, db, "dead") // the published version: ids 0..2 only
	res, err := h.Delete(ctx, "id >= 1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 5 {
		t.Fatalf("deleted %d rows, want 5 (2 published + 3 committed unpublished)", res.Rows)
	}
	if got := ids(t, mustOpen(t, db, "dead"), ""); fmt.Sprint(got) != "[0]" {
		t.Fatalf("rows after delete %v", got)
	}
}
