package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// commitGroupMember commits version 5 of the fixture's table as a prepared member of
// multi-table group id (whose etcd key is absent, so the group reads as aborted).
func commitGroupMember(t *testing.T, f *fixture, id string) *manifest.Manifest {
	t.Helper()
	txn := manifest.Transaction{ID: manifest.NewTransactionID(), ReadVersion: 4,
		Op: manifest.Operation{Kind: manifest.OpUpdateConfig, Config: map[string]string{"k": "v"},
			Group: &manifest.GroupRef{ID: id, Tables: []string{f.table}}}}
	m, _, err := manifest.Commit(context.Background(), f.s, f.table, f.pub, txn, manifest.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 5 {
		t.Fatalf("group member committed as version %d, want 5", m.Version)
	}
	return m
}

func TestAbortedGroupVersion(t *testing.T) {
	f := newFixture(t, storetest.Mem(t))
	m := commitGroupMember(t, f, "g-aborted")
	rep := f.verify(t, Options{})
	if !rep.OK() {
		t.Fatalf("an aborted group's prepared version is not a fault; got:\n%s", faultList(rep))
	}
	found := false
	for _, n := range rep.Notes {
		if n.Key == m.Key() && n.Version == 5 && strings.Contains(n.Message, "aborted multi-table group g-aborted") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no note on the aborted group version; notes %v", rep.Notes)
	}

	// Publishing it is a fault.
	if err := f.cat.CompareAndSwap(context.Background(), f.table, 4, catalog.Pointer{Version: 5, ManifestKey: m.Key(), Checksum: m.Checksum()}); err != nil {
		t.Fatal(err)
	}
	requireFault(t, f.verify(t, Options{}), m.Key(), "published version belongs to aborted multi-table group")
}

func TestAllNamesTheBrokenTable(t *testing.T) {
	f := newFixture(t, storetest.Mem(t))
	ctx := context.Background()
	// A second, clean table in the same store.
	g := &fixture{s: f.s, db: f.db, cat: f.cat, table: "u"}
	if _, err := f.db.CreateTable(ctx, "u", mustArrow(t, f.pub)); err != nil {
		t.Fatal(err)
	}
	key := f.pub.Fragments[0].Files[0].Key
	f.remove(t, key)
	rep, err := All(ctx, f.s, f.cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 2 || rep.Tables[0].Table != "t" || rep.Tables[1].Table != "u" {
		t.Fatalf("tables %+v, want t and u", rep.Tables)
	}
	got := requireFault(t, rep, key, "data file missing")
	if got.Table != "t" || len(rep.Faults) != 1 {
		t.Fatalf("want one fault, in table t; got:\n%s", faultList(rep))
	}
	if r := g.verify(t, Options{}); !r.OK() {
		t.Fatalf("table u alone: faults:\n%s", faultList(r))
	}
}

func TestCorruptPointer(t *testing.T) {
	f := newFixture(t, storetest.Mem(t))
	ctx := context.Background()
	key := f.cat.Key(f.table)
	if err := f.cat.Delete(ctx, f.table); err != nil {
		t.Fatal(err)
	}
	// A pointer naming the wrong manifest key for its version.
	if err := f.cat.CompareAndSwap(ctx, f.table, 0, catalog.Pointer{Version: 4, ManifestKey: manifest.ManifestKey("t", 3), Checksum: f.pub.Checksum()}); err != nil {
		t.Fatal(err)
	}
	requireFault(t, f.verify(t, Options{}), key, "published pointer names manifest")
}

func mustArrow(t *testing.T, m *manifest.Manifest) *arrow.Schema {
	t.Helper()
	s, err := m.Schema.Arrow()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An expired version's tombstone is a note, not a fault; an expired published version is a
// fault.
func TestExpiredVersionsAreNotes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, storetest.Local(t))
	old, err := manifest.Load(ctx, f.s, f.table, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.Expire(ctx, f.s, old); err != nil {
		t.Fatal(err)
	}
	rep := f.verify(t, Options{AllVersions: true})
	if !rep.OK() || !strings.Contains(fmt.Sprint(rep.Notes), "expired by garbage collection") {
		t.Fatalf("faults:\n%s notes %v; want no fault and a note for version 2", faultList(rep), rep.Notes)
	}
	if err := manifest.Expire(ctx, f.s, f.pub); err != nil {
		t.Fatal(err)
	}
	if rep := f.verify(t, Options{}); rep.OK() {
		t.Fatal("an expired published version verified clean")
	}
}

// TestAllReportsPointerWithoutVersions: All checks tables the catalog names even when the
// store has no versions of them (a publish that raced a drop).
func TestAllReportsPointerWithoutVersions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, storetest.Local(t))
	objs, err := f.s.List(ctx, f.table+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		f.remove(t, o.Key)
	}
	rep, err := All(ctx, f.s, f.cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(faultList(rep), "no versions") {
		t.Fatalf("All over a pointer without versions: faults:\n%s", faultList(rep))
	}
}

// TestMistypedDataFile: a data file whose column has another type than the schema field
// of the same field id is a fault naming the file, classed as corruption, even though
// the file itself decodes.
func TestMistypedDataFile(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, storetest.Mem(t))
	bad := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.BinaryTypes.String},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, bad)
	for range 10 {
		b.Field(0).(*array.StringBuilder).Append("x")
		b.Field(1).(*array.StringBuilder).Append("y")
	}
	rec := b.NewRecordBatch()
	b.Release()
	key, v := enginetest.CommitDataFile(t, f.db, f.table, rec, f.pub.Schema.FieldIDs)
	rec.Release()
	m, err := manifest.Load(ctx, f.s, f.table, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cat.CompareAndSwap(ctx, f.table, f.pub.Version, catalog.Pointer{Version: v, ManifestKey: m.Key(), Checksum: m.Checksum()}); err != nil {
		t.Fatal(err)
	}
	got := requireFault(t, f.verify(t, Options{}), key, "data file corrupt")
	if got.Version != v || !errors.Is(got.Err, fragment.ErrCorrupt) || !strings.Contains(got.Err.Error(), `field id 0 ("a")`) {
		t.Fatalf("fault %v: want version %d, ErrCorrupt, naming field id 0", got, v)
	}
}

// TestDroppedAndReCreatedTable (issue 8 item 10): a table created again after a drop
// verifies from its own first version (the dropped incarnation's versions, deleted or
// left below the marker, are neither missing from its chain nor checked); a dropped
// table is not verified as a table (ErrTableNotFound) unless its pointer was left
// behind, which is a fault.
func TestDroppedAndReCreatedTable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, storetest.Local(t))
	schema := mustArrow(t, f.pub)
	v3, err := manifest.Load(ctx, f.s, f.table, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.DropTable(ctx, f.table); err != nil {
		t.Fatal(err)
	}
	if _, err := Table(ctx, f.s, f.cat, f.table, Options{}); !errors.Is(err, manifest.ErrTableNotFound) || !errors.Is(err, manifest.ErrTableDropped) {
		t.Fatalf("verify of a dropped table: %v", err)
	}
	if rep, err := All(ctx, f.s, f.cat, Options{}); err != nil || !rep.OK() || len(rep.Tables) != 0 {
		t.Fatalf("All with only a dropped table: %+v %v", rep, err)
	}
	// The dropped incarnation's pointer put back (a drop that died before removing it).
	if err := f.cat.CompareAndSwap(ctx, f.table, 0, engine.PointerOf(f.pub, f.pub.Checksum())); err != nil {
		t.Fatal(err)
	}
	if rep, err := All(ctx, f.s, f.cat, Options{}); err != nil || rep.OK() || !strings.Contains(faultList(rep), "dropped table") {
		t.Fatalf("All with a dropped table's pointer left: %v, faults:\n%s", err, faultList(rep))
	}
	again, err := f.db.CreateTable(ctx, f.table, schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := makeRecord(schema, 50)
	defer rec.Release()
	if _, err := again.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// A version of the dropped incarnation put below the marker (into version 4, which
	// the drop freed).
	late := manifest.NewTransaction(3, manifest.Operation{Kind: manifest.OpAppend})
	if m, _, err := manifest.Commit(ctx, f.s, f.table, v3, late, manifest.CommitOptions{}); err != nil || m.Version != 4 {
		t.Fatalf("late commit: %v %v", m, err)
	}
	rep := f.verify(t, Options{AllVersions: true})
	if !rep.OK() || rep.Tables[0].IncarnationSince != again.Manifest().IncarnationSince || rep.Tables[0].Versions != 2 {
		t.Fatalf("verify of the re-created table: %+v, faults:\n%s", rep.Tables, faultList(rep))
	}
}
