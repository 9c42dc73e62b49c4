package verify

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// TestMain runs the tests with one real embedded etcd (engine/enginetest).
func TestMain(m *testing.M) { enginetest.Main(m) }

// fixture is a table with several versions, data files of several record batches, and a
// deletion vector, published in etcd.
type fixture struct {
	s     store.Store
	db    *engine.DB
	cat   *catalog.Catalog
	table string
	pub   *manifest.Manifest // the published version's manifest
}

// newFixture builds: v1 create, v2 append 300 rows, v3 append 200 rows, v4 delete some
// rows of both fragments (two deletion vectors).
func newFixture(t *testing.T, s store.Store) *fixture {
	t.Helper()
	ctx := context.Background()
	db := enginetest.OpenDB(t, s, engine.Options{Write: fragment.WriterOptions{MaxRowsPerBatch: 64}})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{300, 200} {
		rec := makeRecord(schema, n)
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err := tbl.Delete(ctx, "a % 7 = 0")
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 4 || !res.Published {
		t.Fatalf("delete committed version %d (published %v), want 4 published", res.Version, res.Published)
	}
	m, err := manifest.Load(ctx, s, "t", 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Fragments) != 2 || m.Fragments[0].Deletion == nil || m.Fragments[1].Deletion == nil {
		t.Fatalf("fixture: want 2 fragments with deletion vectors, got %+v", m.Fragments)
	}
	return &fixture{s: s, db: db, cat: db.Catalog(), table: "t", pub: m}
}

func makeRecord(schema *arrow.Schema, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("x", i%13))
	}
	return b.NewRecordBatch()
}

func (f *fixture) verify(t *testing.T, opts Options) *Report {
	t.Helper()
	rep, err := Table(context.Background(), f.s, f.cat, f.table, opts)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}

// mutate replaces the object at key with change(its bytes).
func (f *fixture) mutate(t *testing.T, key string, change func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	b, err := f.s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Put(ctx, key, change(b)); err != nil {
		t.Fatal(err)
	}
}

func flipMiddle(b []byte) []byte {
	b = append([]byte(nil), b...)
	b[len(b)/2] ^= 0x5a
	return b
}

func (f *fixture) remove(t *testing.T, key string) {
	t.Helper()
	if err := f.s.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
}

// requireFault fails unless rep has a fault naming key whose problem contains want.
func requireFault(t *testing.T, rep *Report, key, want string) Fault {
	t.Helper()
	if rep.OK() || rep.Err() == nil {
		t.Fatalf("report is clean, want a fault on %s", key)
	}
	for _, f := range rep.Faults {
		if f.Key == key && strings.Contains(f.Problem, want) {
			return f
		}
	}
	t.Fatalf("no fault on %s containing %q; faults:\n%s", key, want, faultList(rep))
	return Fault{}
}

func faultList(rep *Report) string {
	var b strings.Builder
	for _, f := range rep.Faults {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}
