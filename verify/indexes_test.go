package verify

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/index/btree"
	"github.com/shale-db/shale/index/zonemap"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// indexedFixture is the fixture (v4: two fragments with deletion vectors) with a BTree on
// a, a zone map on b and a, one more append and a delta segment of the BTree over it.
func indexedFixture(t *testing.T) (*fixture, *engine.Table) {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t, storetest.Mem(t))
	tbl, err := f.db.OpenTable(ctx, f.table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"b", "a"}, Kind: index.KindZoneMap}); err != nil {
		t.Fatal(err)
	}
	rec := makeRecord(mustArrow(t, f.pub), 150)
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.UpdateIndex(ctx, "a_idx"); err != nil {
		t.Fatal(err)
	}
	return f, tbl
}

// TestIndexesVerifyClean: every segment of every version is read once and found sound:
// a full BTree and its delta, and a zone map of two columns.
func TestIndexesVerifyClean(t *testing.T) {
	f, tbl := indexedFixture(t)
	if ix := tbl.Indexes(); len(ix) != 2 || ix[0].Segments != 2 {
		t.Fatalf("indexes %+v", ix)
	}
	rep := f.verify(t, Options{AllVersions: true})
	if !rep.OK() {
		t.Fatalf("faults:\n%s", faultList(rep))
	}
	if s := rep.Tables[0]; s.IndexSegments != 3 || s.IndexObjects != 5 {
		t.Fatalf("summary %+v, want 3 segments and 5 objects read", s)
	}
}

// segment returns the segment of name covering the most fragments in tbl's version.
func segment(t *testing.T, tbl *engine.Table, name string) manifest.Index {
	t.Helper()
	var best manifest.Index
	for _, ix := range tbl.Manifest().Indexes {
		if ix.Name == name && len(ix.Fragments) > len(best.Fragments) {
			best = ix
		}
	}
	if best.Name == "" {
		t.Fatalf("no index %q", name)
	}
	return best
}

// TestIndexObjectFaults: a missing or corrupt index object is a fault naming it.
func TestIndexObjectFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		index string
		file  int // which of the segment's files
		what  func(f *fixture, t *testing.T, key string)
		want  string
	}{
		{"btree pages missing", "a_idx", 1, func(f *fixture, t *testing.T, k string) { f.remove(t, k) }, "btree pages missing"},
		{"btree pages corrupt", "a_idx", 1, func(f *fixture, t *testing.T, k string) { f.mutate(t, k, flipMiddle) }, "btree pages"},
		{"btree lookup missing", "a_idx", 0, func(f *fixture, t *testing.T, k string) { f.remove(t, k) }, "btree lookup missing"},
		{"btree lookup corrupt", "a_idx", 0, func(f *fixture, t *testing.T, k string) { f.mutate(t, k, flipMiddle) }, "btree lookup corrupt"},
		{"zone map corrupt", "b_a_zonemap", 0, func(f *fixture, t *testing.T, k string) { f.mutate(t, k, flipMiddle) }, "zone map corrupt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, tbl := indexedFixture(t)
			key := segment(t, tbl, c.index).Files[c.file]
			c.what(f, t, key)
			requireFault(t, f.verify(t, Options{}), key, c.want)
		})
	}
}

// TestZoneMapBoundsChecked: a zone whose bounds do not hold its rows (a query would skip
// rows that match) is a fault naming the zone map.
func TestZoneMapBoundsChecked(t *testing.T) {
	ctx := context.Background()
	f, tbl := indexedFixture(t)
	seg := segment(t, tbl, "b_a_zonemap")
	zm, err := zonemap.Read(ctx, f.s, seg.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	zm.Zones[0].Stats[1].Max.Int = 3 // column a: values run to 299
	f.remove(t, seg.Files[0])
	if _, _, err := zonemap.Store(ctx, f.s, strings.TrimSuffix(seg.Files[0], "/"+zonemap.ObjectName), zm); err != nil {
		t.Fatal(err)
	}
	rep := f.verify(t, Options{})
	requireFault(t, rep, seg.Files[0], "maximum")
}

// commitSegment commits ix as a new index segment on top of HEAD (no checks of its
// objects: what a buggy build would commit).
func commitSegment(t *testing.T, f *fixture, ix manifest.Index) *manifest.Manifest {
	t.Helper()
	ctx := context.Background()
	head, err := manifest.LoadHead(ctx, f.s, f.table)
	if err != nil {
		t.Fatal(err)
	}
	ix.Version = head.Version
	m, _, err := manifest.Commit(ctx, f.s, f.table, head,
		manifest.NewTransaction(head.Version, manifest.Operation{Kind: manifest.OpCreateIndex, NewIndexes: []manifest.Index{ix}}), manifest.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBTreeValuesChecked: a BTree whose pages pair row addresses with values the data
// does not hold there (a query would return wrong candidates or miss rows) is a fault
// naming its pages.
func TestBTreeValuesChecked(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, storetest.Mem(t))
	m := f.pub
	frag := m.Fragments[0]
	b := array.NewInt64Builder(memory.DefaultAllocator)
	addrs := make([]uint64, frag.PhysicalRows)
	for i := range addrs {
		b.Append(int64(i) + 1) // the data holds a = i
		addrs[i] = manifest.RowAddress(frag.ID, uint32(i))
	}
	vals := b.NewArray()
	b.Release()
	defer vals.Release()
	txn := manifest.NewTransactionID()
	dir := index.Dir(f.table, txn, "01BTREEUUID")
	built, err := btree.Build(ctx, f.s, dir, arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}, []btree.Chunk{{Values: vals, Addrs: addrs}}, btree.BuildOptions{PageRows: 64})
	if err != nil {
		t.Fatal(err)
	}
	commitSegment(t, f, manifest.Index{Name: "a_idx", UUID: "01BTREEUUID", Kind: index.KindBTree, FieldIDs: m.Schema.FieldIDs[:1],
		Fragments: []uint32{frag.ID}, Files: built.Files, Rows: built.Lookup.Rows, Bytes: built.Bytes})
	rep := f.verify(t, Options{AllVersions: true})
	requireFault(t, rep, built.Files[1], "300 value(s) differ from the table's data")
}

// TestIndexCoverageChecked: a zone map whose zones describe another fragment than the
// one it covers, and a BTree missing rows of a fragment it covers, are faults.
func TestIndexCoverageChecked(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, storetest.Mem(t))
	m := f.pub
	f0, f1 := m.Fragments[0], m.Fragments[1]
	// Zones of f1's rows committed as covering f0.
	zb := zonemap.NewBuilder(m.Schema.FieldIDs[:1], 0)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range f1.PhysicalRows {
		b.Append(i)
	}
	vals := b.NewArray()
	b.Release()
	if err := zb.Add(f1.ID, 0, []arrow.Array{vals}); err != nil {
		t.Fatal(err)
	}
	vals.Release()
	txn := manifest.NewTransactionID()
	key, size, err := zonemap.Store(ctx, f.s, index.Dir(f.table, txn, "01ZONEUUID"), zb.Map())
	if err != nil {
		t.Fatal(err)
	}
	commitSegment(t, f, manifest.Index{Name: "zm", UUID: "01ZONEUUID", Kind: index.KindZoneMap, FieldIDs: m.Schema.FieldIDs[:1],
		Fragments: []uint32{f0.ID}, Files: []string{key}, Rows: f1.PhysicalRows, Bytes: size})
	// A BTree over f1 committed as covering f0 and f1.
	b = array.NewInt64Builder(memory.DefaultAllocator)
	addrs := make([]uint64, f1.PhysicalRows)
	for i := range addrs {
		b.Append(int64(i))
		addrs[i] = manifest.RowAddress(f1.ID, uint32(i))
	}
	vals = b.NewArray()
	b.Release()
	defer vals.Release()
	built, err := btree.Build(ctx, f.s, index.Dir(f.table, txn, "01TREEUUID"), arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}, []btree.Chunk{{Values: vals, Addrs: addrs}}, btree.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commitSegment(t, f, manifest.Index{Name: "a_idx", UUID: "01TREEUUID", Kind: index.KindBTree, FieldIDs: m.Schema.FieldIDs[:1],
		Fragments: []uint32{f0.ID, f1.ID}, Files: built.Files, Rows: built.Lookup.Rows, Bytes: built.Bytes})
	rep := f.verify(t, Options{AllVersions: true})
	requireFault(t, rep, key, fmt.Sprintf("holds rows of fragment %d, which it does not cover", f1.ID))
	requireFault(t, rep, key, fmt.Sprintf("zones of fragment %d do not tile its 300 rows", f0.ID))
	requireFault(t, rep, built.Files[1], fmt.Sprintf("holds 0 rows of fragment %d, which has 300", f0.ID))
}

// TestIndexSegmentsChecked: the manifest's description of index segments is checked per
// version: fields in the schema, built from an earlier version, a known kind, objects
// under the table's index directory, segments of one name alike and disjoint, and
// coverage only of the version's fragments.
func TestIndexSegmentsChecked(t *testing.T) {
	f, tbl := indexedFixture(t)
	m := *tbl.Manifest()
	good := segment(t, tbl, "a_idx")
	ids := map[uint32]bool{}
	for _, fr := range m.Fragments {
		ids[fr.ID] = true
	}
	bad := func(name, uuid string, change func(ix *manifest.Index)) manifest.Index {
		ix := good
		ix.Name, ix.UUID = name, uuid
		ix.Fragments = nil
		change(&ix)
		return ix
	}
	m.Indexes = append(m.Indexes,
		bad("badfield", "u1", func(ix *manifest.Index) { ix.FieldIDs = []int32{999} }),
		bad("future", "u2", func(ix *manifest.Index) { ix.Version = 99 }),
		bad("odd", "u3", func(ix *manifest.Index) { ix.Kind = "bitmap" }),
		bad("outside", "u4", func(ix *manifest.Index) { ix.Files = []string{"t/data/x.arrow"} }),
		bad("gone", "u5", func(ix *manifest.Index) { ix.Fragments = []uint32{77} }),
		bad("a_idx", "u6", func(ix *manifest.Index) { ix.Fragments = []uint32{m.Fragments[0].ID} }),
		bad("a_idx", "u7", func(ix *manifest.Index) { ix.Kind = index.KindZoneMap }),
		bad("twice", good.UUID, func(ix *manifest.Index) {}),
	)
	v := newVerifier(f.s, f.cat, Options{})
	v.sum = &TableSummary{}
	v.checkIndexes(context.Background(), &m, ids)
	for _, want := range []string{
		`index "badfield" segment u1: references field id 999`,
		`index "future" segment u2: was built from version 99`,
		`index "odd" segment u3: has unknown kind "bitmap"`,
		`index "outside" segment u4: file t/data/x.arrow is not under t/_indices/<txn>/u4/`,
		`index "gone" segment u5: covers 1 fragment(s) not in this version: [77]`,
		fmt.Sprintf(`index "a_idx" segment u6: covers fragment %d, which segment %s of the name covers too`, m.Fragments[0].ID, good.UUID),
		`index "a_idx" segment u7: is a zonemap on fields`,
		`segment uuid empty or used twice`,
	} {
		requireFault(t, v.rep, m.Key(), want)
	}
}
