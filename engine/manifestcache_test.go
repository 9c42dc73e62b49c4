package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/shale-db/shale/store"
)

// TestOpenTableUsesManifestCache (issue 13): a second OpenTable of a published version
// makes no store request (one etcd read names the version and checksum, the DB's cache
// has the manifest); a commit by another DB on the same store moves the pointer, and the
// next open reads and returns the new version; a table dropped and created again under
// the same name opens as the new incarnation, never the cached old one.
func TestOpenTableUsesManifestCache(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, fmt.Sprintf("mem://engine-test-%d", storeSeq.Add(1)), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	reader, writer := openDBOn(t, s), openDBOn(t, s)
	tbl, err := writer.CreateTable(ctx, "kv", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	open := func() (*Table, int64) {
		t.Helper()
		before := s.Counters().Snapshot()
		o, err := reader.OpenTable(ctx, "kv")
		if err != nil {
			t.Fatal(err)
		}
		return o, s.Counters().Snapshot().Sub(before).Total()
	}
	a, n1 := open()
	b, n2 := open()
	if n1 != 1 || n2 != 0 || b.Manifest() != a.Manifest() || len(ids(t, b, "")) != 10 {
		t.Fatalf("opens made %d then %d store requests (want 1 then 0); same manifest %v", n1, n2, b.Manifest() == a.Manifest())
	}
	appendRange(t, tbl, 10, 15)
	c, n3 := open()
	if n3 != 1 || c.Version() != tbl.Version() || len(ids(t, c, "")) != 15 {
		t.Fatalf("open after another DB's commit: version %d (want %d), %d requests", c.Version(), tbl.Version(), n3)
	}
	if _, err := writer.DropTable(ctx, "kv"); err != nil {
		t.Fatal(err)
	}
	again, err := writer.CreateTable(ctx, "kv", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, again, 100, 103)
	d, _ := open()
	if d.Version() != again.Version() || d.Manifest().Incarnation != again.Manifest().Incarnation || fmt.Sprint(ids(t, d, "")) != "[100 101 102]" {
		t.Fatalf("open after drop and create: version %d incarnation %s rows %v; want version %d incarnation %s",
			d.Version(), d.Manifest().Incarnation, ids(t, d, ""), again.Version(), again.Manifest().Incarnation)
	}
	if st := reader.ManifestCache(); st.Hits < 1 || st.Entries < 2 {
		t.Fatalf("cache stats %+v", st)
	}
}
