package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// updSchema: id is the key (not nullable); a, f, s are nullable values.
var updSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// urow is one row of updSchema without its id; nil pointers are NULLs.
type urow struct {
	a *int32
	f *float64
	s *string
}

func (r urow) String() string {
	str := func(p any) string {
		switch v := p.(type) {
		case *int32:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *float64:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *string:
			if v != nil {
				return strconv.Quote(*v)
			}
		}
		return "NULL"
	}
	return "{" + str(r.a) + " " + str(r.f) + " " + str(r.s) + "}"
}

func ptr[T any](v T) *T { return &v }

// urows is a table state: id → row.
type urows map[int64]urow

func (m urows) String() string {
	var sb strings.Builder
	for _, id := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&sb, "%d:%v ", id, m[id])
	}
	return sb.String()
}

func (m urows) equal(o urows) bool {
	return maps.EqualFunc(m, o, func(x, y urow) bool { return x.String() == y.String() })
}

// updBatch builds the rows of m (in id order).
func updBatch(m urows) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, updSchema)
	defer b.Release()
	for _, id := range slices.Sorted(maps.Keys(m)) {
		r := m[id]
		b.Field(0).(*array.Int64Builder).Append(id)
		if r.a != nil {
			b.Field(1).(*array.Int32Builder).Append(*r.a)
		} else {
			b.Field(1).AppendNull()
		}
		if r.f != nil {
			b.Field(2).(*array.Float64Builder).Append(*r.f)
		} else {
			b.Field(2).AppendNull()
		}
		if r.s != nil {
			b.Field(3).(*array.StringBuilder).Append(*r.s)
		} else {
			b.Field(3).AppendNull()
		}
	}
	return b.NewRecordBatch()
}

// readRows scans every row of tbl into a map, failing on a duplicate id.
func readRows(t testing.TB, tbl *Table) urows {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), ScanOptions{Columns: []string{"id", "a", "f", "s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	out := urows{}
	for sc.Next() {
		rec := sc.RecordBatch()
		ids := rec.Column(0).(*array.Int64)
		as := rec.Column(1).(*array.Int32)
		fs := rec.Column(2).(*array.Float64)
		ss := rec.Column(3).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			var r urow
			if as.IsValid(i) {
				r.a = ptr(as.Value(i))
			}
			if fs.IsValid(i) {
				r.f = ptr(fs.Value(i))
			}
			if ss.IsValid(i) {
				r.s = ptr(ss.Value(i))
			}
			if _, dup := out[ids.Value(i)]; dup {
				t.Fatalf("id %d appears twice at version %d", ids.Value(i), tbl.Version())
			}
			out[ids.Value(i)] = r
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// newUpdTable creates table name with small files (20 rows, batches of 7) holding rows,
// appended in chunks of 20 ids so they span several fragments.
func newUpdTable(t testing.TB, db *DB, name string, rows urows) *Table {
	t.Helper()
	ctx := context.Background()
	db.opts.Write = fragment.WriterOptions{MaxRowsPerBatch: 7, MaxRowsPerFile: 20}
	tbl, err := db.CreateTable(ctx, name, updSchema)
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Sorted(maps.Keys(rows))
	for len(ids) > 0 {
		n := min(len(ids), 20)
		chunk := urows{}
		for _, id := range ids[:n] {
			chunk[id] = rows[id]
		}
		ids = ids[n:]
		rec := updBatch(chunk)
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

// seqRows makes ids [from, to) with a = id, f = id/2, s = "s<id>" and every 5th a NULL.
func seqRows(from, to int64) urows {
	m := urows{}
	for id := from; id < to; id++ {
		r := urow{a: ptr(int32(id)), f: ptr(float64(id) / 2), s: ptr(fmt.Sprint("s", id))}
		if id%5 == 0 {
			r.a = nil
		}
		m[id] = r
	}
	return m
}

// objectKeys lists every object key of a table.
func objectKeys(t testing.TB, db *DB, table string) []string {
	t.Helper()
	objs, err := db.Store().List(context.Background(), table+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	slices.Sort(keys)
	return keys
}

func TestUpdateBasics(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	want := seqRows(0, 100) // 5 fragments of 20 rows
	tbl := newUpdTable(t, db, "upd", want)
	v0 := tbl.Version()

	// Several fragments; the whole of fragment 2 (ids 40..59) goes, so it is removed.
	res, err := tbl.Update(ctx, map[string]string{"s": "'updated'", "f": "f * 10"}, "id >= 35 AND id < 65")
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(35); id < 65; id++ {
		r := want[id]
		r.s, r.f = ptr("updated"), ptr(*r.f*10)
		want[id] = r
	}
	if res.Rows != 30 || res.Version != v0+1 || !res.Published {
		t.Fatalf("update result %+v", res)
	}
	if got := readRows(t, tbl); !got.equal(want) {
		t.Fatalf("after update:\n got %v\nwant %v", got, want)
	}
	m := tbl.Manifest()
	op := m.Txn.Op
	if op.Kind != manifest.OpUpdate || op.Predicate != "id >= 35 AND id < 65" || fmt.Sprint(op.UpdatedFields) != "[2 3]" ||
		len(op.Removed) != 1 || len(op.Deletions) != 2 || len(op.NewFragmentIDs) != 2 {
		t.Fatalf("transaction %+v", op)
	}
	if len(m.Fragments) != 6 || m.LiveRows() != 100 {
		t.Fatalf("%d fragments, %d live rows", len(m.Fragments), m.LiveRows())
	}
	// The updated rows are at the end of the table, in their old order.
	got := ids(t, tbl, "")
	if fmt.Sprint(got[70:]) != fmt.Sprint(seq(35, 65)) {
		t.Fatalf("table order %v", got)
	}
	// Statistics of the new fragments prune like any other.
	if n, err := tbl.Count(ctx, "s = 'updated' AND f >= 175"); err != nil || n != 30 {
		t.Fatalf("count updated %d %v", n, err)
	}
	// Time travel: the version before the update has the old values.
	old, err := tbl.Checkout(ctx, v0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, old); !got.equal(seqRows(0, 100)) {
		t.Fatalf("old version changed: %v", got)
	}

	// Update the column the WHERE reads: the rows move out of the range and are not
	// updated twice.
	res, err = tbl.Update(ctx, map[string]string{"id": "id + 1000"}, "id < 10")
	if err != nil || res.Rows != 10 {
		t.Fatalf("update id: %+v %v", res, err)
	}
	for id := int64(0); id < 10; id++ {
		want[id+1000] = want[id]
		delete(want, id)
	}
	if got := readRows(t, tbl); !got.equal(want) {
		t.Fatalf("after moving ids:\n got %v\nwant %v", got, want)
	}

	// NULLs: set, test and compute with them.
	if _, err := tbl.Update(ctx, map[string]string{"a": "NULL", "s": "CASE WHEN a IS NULL THEN 'was null' ELSE s END"}, "id >= 90 AND id < 100"); err != nil {
		t.Fatal(err)
	}
	for id := int64(90); id < 100; id++ {
		r := want[id]
		if r.a == nil {
			r.s = ptr("was null")
		}
		r.a = nil
		want[id] = r
	}
	if _, err := tbl.Update(ctx, map[string]string{"a": "COALESCE(a, -1) + 1", "f": "a / 4"}, "id >= 80 AND id < 100"); err != nil {
		t.Fatal(err)
	}
	for id := int64(80); id < 100; id++ {
		r := want[id]
		if r.a == nil {
			r.f = nil
			r.a = ptr(int32(0))
		} else {
			r.f = ptr(float64(*r.a) / 4)
			r.a = ptr(*r.a + 1)
		}
		want[id] = r
	}
	// SET a = b, b = a semantics: every expression reads the old row.
	if _, err := tbl.Update(ctx, map[string]string{"a": "id DIV 2", "id": "id + 5000"}, "id BETWEEN 20 AND 24"); err != nil {
		t.Fatal(err)
	}
	for id := int64(20); id <= 24; id++ {
		r := want[id]
		r.a = ptr(int32(id / 2))
		want[id+5000] = r
		delete(want, id)
	}
	if got := readRows(t, tbl); !got.equal(want) {
		t.Fatalf("after NULL updates:\n got %v\nwant %v", got, want)
	}

	// Matching nothing commits nothing.
	before := tbl.Version()
	res, err = tbl.Update(ctx, map[string]string{"a": "1"}, "id < 0")
	if err != nil || res.Version != before || res.Rows != 0 {
		t.Fatalf("no-op update: %+v %v", res, err)
	}
	if head, _ := manifest.Head(ctx, db.Store(), "upd"); head != before {
		t.Fatalf("no-op update made version %d", head)
	}
	// Setting a column to itself rewrites the rows (they matched) without changing them.
	res, err = tbl.Update(ctx, map[string]string{"a": "a"}, "id >= 95 AND id < 100")
	if err != nil || res.Rows != 5 || res.Version != before+1 {
		t.Fatalf("identity update: %+v %v", res, err)
	}
	if got := readRows(t, tbl); !got.equal(want) {
		t.Fatalf("after identity update:\n got %v\nwant %v", got, want)
	}
	// A fresh handle sees the same rows.
	again, err := db.OpenTable(ctx, "upd")
	if err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, again); !got.equal(want) || again.Version() != tbl.Version() {
		t.Fatalf("reopened at %d: %v", again.Version(), got)
	}
}

// TestUpdateErrorsCommitNothing: a bad update leaves no version and (for rows within one
// data file) no object behind.
func TestUpdateErrorsCommitNothing(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl := newUpdTable(t, db, "bad", seqRows(0, 60))
	tbl.db.opts.Write = fragment.WriterOptions{} // updated rows stay within one file
	v := tbl.Version()
	keys := objectKeys(t, db, "bad")
	cases := []struct {
		set   map[string]string
		where string
		want  error
	}{
		{map[string]string{"nope": "1"}, "true", filter.ErrUnknownColumn},
		{map[string]string{"a": "'abc'"}, "true", filter.ErrType},
		{map[string]string{"a": "s"}, "true", filter.ErrType},
		{map[string]string{"a": "3000000000"}, "true", filter.ErrType},
		{map[string]string{"a": "a +"}, "true", filter.ErrSyntax},
		{map[string]string{"a": "lower(s)"}, "true", filter.ErrUnsupported},
		{map[string]string{"a": "1"}, "nope > 1", filter.ErrUnknownColumn},
		{map[string]string{"id": "NULL"}, "true", ErrNullValue},
		{map[string]string{"id": "id + NULL"}, "true", ErrNullValue},
		// Found while rewriting: the last rows overflow int32, the rows with NULL a give
		// NULL ids, a division by zero.
		{map[string]string{"a": "a * 100000000"}, "id > 10", filter.ErrType},
		{map[string]string{"a": "a + 2147483647"}, "id > 50", filter.ErrType},
		{map[string]string{"id": "a"}, "id < 30", ErrNullValue},
		{map[string]string{"f": "a DIV (id - 41)"}, "id > 30", filter.ErrArithmetic},
		{map[string]string{"id": "id * 9223372036854775807"}, "id > 1", filter.ErrArithmetic},
	}
	for _, c := range cases {
		res, err := tbl.Update(ctx, c.set, c.where)
		if !errors.Is(err, c.want) {
			t.Errorf("Update(%v WHERE %s) = %+v, %v; want %v", c.set, c.where, res, err, c.want)
		}
		if !strings.Contains(err.Error(), `"bad"`) {
			t.Errorf("error does not name the table: %v", err)
		}
	}
	if head, _ := manifest.Head(ctx, db.Store(), "bad"); head != v || tbl.Version() != v {
		t.Fatalf("failed updates moved HEAD to %d (handle %d), want %d", head, tbl.Version(), v)
	}
	if after := objectKeys(t, db, "bad"); !slices.Equal(after, keys) {
		t.Fatalf("failed updates left objects: %v", slices.DeleteFunc(after, func(k string) bool { return slices.Contains(keys, k) }))
	}
	if got := readRows(t, tbl); !got.equal(seqRows(0, 60)) {
		t.Fatalf("rows changed: %v", got)
	}
	// Empty WHERE, empty SET and read-only handles are refused.
	if _, err := tbl.Update(ctx, map[string]string{"a": "1"}, ""); err == nil {
		t.Error("empty WHERE accepted")
	}
	if _, err := tbl.Update(ctx, nil, "true"); err == nil {
		t.Error("empty SET accepted")
	}
	ro, _ := tbl.Checkout(ctx, v)
	if _, err := ro.Update(ctx, map[string]string{"a": "1"}, "true"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only update: %v", err)
	}
}

// twoHandles opens two handles on the same version of a table.
func twoHandles(t testing.TB, db *DB, name string) (*Table, *Table) {
	t.Helper()
	h1, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return h1, h2
}

// during makes the next write that reaches seam run f there first (once): f commits a
// competing write between the first write's planning and its commit.
func during(t testing.TB, seam string, f func(ctx context.Context) error) {
	t.Helper()
	t.Cleanup(failpoint.Enable(seam, failpoint.Call(f).Once()))
}

// TestConcurrentUpdateDelete: an update planned on a version, with a delete or an update
// of other rows of the same fragments committed before it, commits without re-planning:
// the commit loop merges the deletion vectors. Every row ends where a serial order puts it.
func TestConcurrentUpdateDelete(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	rows := seqRows(0, 40) // fragments: ids 0-19, 20-39
	newUpdTable(t, db, "ud", rows)
	h1, h2 := twoHandles(t, db, "ud")
	base := h1.Version()
	during(t, seamUpdatePlanned.Name(), func(ctx context.Context) error {
		_, err := h2.Delete(ctx, "id >= 10 AND id < 15 OR id >= 20 AND id < 25")
		return err
	})
	res, err := h1.Update(ctx, map[string]string{"s": "'u'"}, "id < 10 OR id >= 30")
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != base+2 || fmt.Sprint(res.Rebased) != fmt.Sprint([]uint64{base + 1}) || failpoint.Hits(seamUpdatePlanned.Name()) != 1 {
		t.Fatalf("update over a concurrent delete: %+v (planned %d times), want version %d rebased on %d",
			res, failpoint.Hits(seamUpdatePlanned.Name()), base+2, base+1)
	}
	want := maps.Clone(rows)
	for id := range want {
		switch {
		case id < 10 || id >= 30:
			r := want[id]
			r.s = ptr("u")
			want[id] = r
		case id < 15 || (id >= 20 && id < 25):
			delete(want, id)
		}
	}
	if got := readRows(t, h1); !got.equal(want) {
		t.Fatalf("after delete + update:\n got %v\nwant %v", got, want)
	}

	// Two updates of different rows of the same fragments (the new one from above).
	base = h1.Version()
	during(t, seamUpdatePlanned.Name(), func(ctx context.Context) error {
		_, err := h2.Update(ctx, map[string]string{"a": "a * 10"}, "id = 1 OR id = 39")
		return err
	})
	res, err = h1.Update(ctx, map[string]string{"a": "-1"}, "id BETWEEN 2 AND 5 OR id = 38")
	if err != nil || res.Version != base+2 || len(res.Rebased) != 1 {
		t.Fatalf("update over a concurrent update of other rows: %+v %v", res, err)
	}
	for id, v := range map[int64]int32{1: 10, 39: 390, 2: -1, 3: -1, 4: -1, 5: -1, 38: -1} {
		r := want[id]
		r.a = ptr(v)
		want[id] = r
	}
	if got := readRows(t, h1); !got.equal(want) {
		t.Fatalf("after two updates:\n got %v\nwant %v", got, want)
	}

	// Writers of disjoint rows running at the same time all commit.
	h1, h2 = twoHandles(t, db, "ud")
	h3, _ := twoHandles(t, db, "ud")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, f := range []func() error{
		func() error { _, err := h1.Delete(ctx, "id = 0 OR id = 37"); return err },
		func() error { _, err := h2.Update(ctx, map[string]string{"a": "-2"}, "id BETWEEN 6 AND 9"); return err },
		func() error {
			_, err := h3.Update(ctx, map[string]string{"f": "f + 100"}, "id BETWEEN 33 AND 36")
			return err
		},
	} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	delete(want, 0)
	delete(want, 37)
	for id := int64(6); id <= 9; id++ {
		r := want[id]
		r.a = ptr(int32(-2))
		want[id] = r
	}
	for id := int64(33); id <= 36; id++ {
		r := want[id]
		r.f = ptr(*r.f + 100)
		want[id] = r
	}
	head, err := db.OpenTable(ctx, "ud")
	if err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, head); !got.equal(want) {
		t.Fatalf("after concurrent writers:\n got %v\nwant %v", got, want)
	}
}

// TestConcurrentUpdatesSameRows: writers of the same rows are serialized: the loser of the
// race re-plans at HEAD and the result is that of a serial order, never a lost update.
func TestConcurrentUpdatesSameRows(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	rows := seqRows(1, 41)
	for id, r := range rows {
		r.a = ptr(int32(id))
		rows[id] = r
	}
	newUpdTable(t, db, "same", rows)
	h1, h2 := twoHandles(t, db, "same")
	base := h1.Version()
	during(t, seamUpdatePlanned.Name(), func(ctx context.Context) error {
		_, err := h2.Update(ctx, map[string]string{"a": "a * 2"}, "id <= 10")
		return err
	})
	res, err := h1.Update(ctx, map[string]string{"a": "a + 1"}, "id <= 10")
	if err != nil {
		t.Fatal(err)
	}
	// Planned three times: h1, h2 (inside h1's seam), h1 again after the conflict.
	if res.Version != base+2 || res.Rows != 10 || failpoint.Hits(seamUpdatePlanned.Name()) != 3 {
		t.Fatalf("update after a concurrent update of the same rows: %+v, planned %d times", res, failpoint.Hits(seamUpdatePlanned.Name()))
	}
	want := maps.Clone(rows)
	for id := int64(1); id <= 10; id++ {
		want[id] = urow{a: ptr(int32(id*2 + 1)), f: rows[id].f, s: rows[id].s}
	}
	if got := readRows(t, h1); !got.equal(want) {
		t.Fatalf("two updates of the same rows:\n got %v\nwant %v", got, want)
	}

	// A delete of some of the same rows commits first: the update re-plans and updates
	// only the rows left.
	during(t, seamUpdatePlanned.Name(), func(ctx context.Context) error {
		_, err := h2.Delete(ctx, "id BETWEEN 11 AND 15")
		return err
	})
	if res, err := h1.Update(ctx, map[string]string{"s": "'one'"}, "id BETWEEN 11 AND 20"); err != nil || res.Rows != 5 {
		t.Fatalf("update after a concurrent delete of the same rows: %+v %v, want the 5 rows left", res, err)
	}
	// An update commits while a delete of the same rows is committing: the delete
	// re-plans and deletes the updated copies.
	during(t, "manifest.before_version_put", func(ctx context.Context) error {
		_, err := h2.Update(ctx, map[string]string{"a": "0"}, "id BETWEEN 16 AND 18")
		return err
	})
	if res, err := h1.Delete(ctx, "id BETWEEN 16 AND 17"); err != nil || res.Rows != 2 {
		t.Fatalf("delete after a concurrent update of the same rows: %+v %v", res, err)
	}
	for id := int64(11); id <= 20; id++ {
		switch {
		case id <= 17:
			delete(want, id)
		case id == 18:
			want[id] = urow{a: ptr(int32(0)), f: rows[id].f, s: ptr("one")}
		default:
			want[id] = urow{a: rows[id].a, f: rows[id].f, s: ptr("one")}
		}
	}
	if got := readRows(t, h1); !got.equal(want) {
		t.Fatalf("update, delete, update:\n got %v\nwant %v", got, want)
	}

	// Many writers incrementing the same rows at once: every increment lands.
	const writers = 4
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		h, err := db.OpenTable(ctx, "same")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.Update(ctx, map[string]string{"a": "a + 1"}, "id >= 30")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for id := int64(30); id <= 40; id++ {
		r := want[id]
		r.a = ptr(*r.a + writers)
		want[id] = r
	}
	head, _ := db.OpenTable(ctx, "same")
	if got := readRows(t, head); !got.equal(want) {
		t.Fatalf("%d concurrent increments:\n got %v\nwant %v", writers, got, want)
	}
}

// BenchmarkUpdate updates a tenth (and all) of a 1M-row table of (id int64, v float64) on
// a memory store: one scan of every row (no statistics help id % 10 = 0), an expression
// per matching row, new data files and one deletion vector per fragment.
func BenchmarkUpdate(b *testing.B) {
	ctx := context.Background()
	db := openDB(b, "")
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	tbl, err := db.CreateTable(ctx, "bench", schema)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 1 << 20
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := int64(0); i < rows; i++ {
		bld.Field(0).(*array.Int64Builder).Append(i)
		bld.Field(1).(*array.Float64Builder).Append(float64(i))
	}
	rec := bld.NewRecordBatch()
	bld.Release()
	for i := range int64(4) { // 4 fragments of 256K rows
		sl := rec.NewSlice(i*rows/4, (i+1)*rows/4)
		if _, err := tbl.AppendRecord(ctx, sl); err != nil {
			b.Fatal(err)
		}
		sl.Release()
	}
	rec.Release()
	for _, c := range []struct{ name, where string }{{"tenth", "id % 10 = 0"}, {"all", "true"}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := tbl.Update(ctx, map[string]string{"v": "v * 2 + 1"}, c.where)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Rows), "rows/op")
			}
		})
	}
}
