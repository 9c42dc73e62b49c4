package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

func TestCleanTableVerifies(t *testing.T) {
	for kind, s := range map[string]store.Store{"mem": storetest.Mem(t), "local": storetest.Local(t)} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, s)
			for _, all := range []bool{false, true} {
				rep := f.verify(t, Options{AllVersions: all})
				if !rep.OK() || rep.Err() != nil {
					t.Fatalf("AllVersions=%v: clean table has faults:\n%s", all, faultList(rep))
				}
				sum := rep.Tables[0]
				if sum.Head != 4 || sum.Published != 4 || sum.Versions != 4 {
					t.Fatalf("summary %+v, want head 4, published 4, 4 versions", sum)
				}
				if sum.DataFiles != 2 || sum.Deletions != 2 {
					t.Fatalf("summary %+v, want 2 data files and 2 deletion vectors read", sum)
				}
				wantDeep := 1
				if all {
					wantDeep = 4
				}
				if len(sum.Deep) != wantDeep {
					t.Fatalf("deep-checked versions %v, want %d", sum.Deep, wantDeep)
				}
			}
			rep, err := All(context.Background(), f.s, f.cat, Options{})
			if err != nil || !rep.OK() || len(rep.Tables) != 1 {
				t.Fatalf("All: err %v, faults:\n%s tables %d", err, faultList(rep), len(rep.Tables))
			}
		})
	}
}

func TestUnknownTable(t *testing.T) {
	f := newFixture(t, storetest.Mem(t))
	_, err := Table(context.Background(), f.s, f.cat, "nope", Options{})
	if !errors.Is(err, manifest.ErrTableNotFound) {
		t.Fatalf("err = %v, want ErrTableNotFound", err)
	}
}

func TestDataFileFaults(t *testing.T) {
	cases := map[string]struct {
		corrupt func(t *testing.T, f *fixture, key string)
		problem string
		class   error
		size    func(orig int64) int64 // the object's size after the damage; -1 = unknown (missing)
	}{
		"flipped byte": {func(t *testing.T, f *fixture, key string) { f.mutate(t, key, flipMiddle) }, "corrupt", fragment.ErrCorrupt,
			func(orig int64) int64 { return orig }},
		"truncated": {func(t *testing.T, f *fixture, key string) {
			f.mutate(t, key, func(b []byte) []byte { return b[:len(b)*2/3] })
		}, "data file corrupt (the manifest says", fragment.ErrCorrupt, func(orig int64) int64 { return orig * 2 / 3 }},
		"deleted": {func(t *testing.T, f *fixture, key string) { f.remove(t, key) }, "data file missing", store.ErrNotFound,
			func(int64) int64 { return -1 }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, storetest.Mem(t))
			df := f.pub.Fragments[1].Files[0]
			key := df.Key
			clean := f.verify(t, Options{}).Tables[0].Bytes
			c.corrupt(t, f, key)
			rep := f.verify(t, Options{})
			got := requireFault(t, rep, key, c.problem)
			if got.Version != 4 || got.Table != "t" {
				t.Fatalf("fault %v: want table t version 4", got)
			}
			// The fault and the summary give the object's size in the store (the trial's
			// summary said "0 bytes" for a damaged file that was there and read).
			want := c.size(df.Size)
			switch {
			case want < 0 && got.Size != nil:
				t.Fatalf("fault %v: size %d given for a missing object", got, *got.Size)
			case want >= 0 && (got.Size == nil || *got.Size != want):
				t.Fatalf("fault %v: size %v, want %d", got, got.Size, want)
			case want >= 0 && !strings.Contains(got.String(), fmt.Sprintf(" (%d bytes): ", want)):
				t.Fatalf("fault line %q does not give the size %d", got, want)
			}
			if sum := rep.Tables[0]; sum.Bytes != clean-df.Size+max(want, 0) {
				t.Fatalf("summary bytes %d, want %d (clean %d, file %d -> %d)", sum.Bytes, clean-df.Size+max(want, 0), clean, df.Size, want)
			}
			if c.class != nil && !errors.Is(got.Err, c.class) {
				t.Fatalf("fault %v: want class %v", got, c.class)
			}
			if len(rep.Faults) != 1 {
				t.Fatalf("want exactly one fault, got:\n%s", faultList(rep))
			}
			// Reading every version reports the file once, under the first version that uses it.
			rep = f.verify(t, Options{AllVersions: true})
			got = requireFault(t, rep, key, c.problem)
			if got.Version != 3 || len(rep.Faults) != 1 {
				t.Fatalf("AllVersions: want one fault at version 3, got:\n%s", faultList(rep))
			}
		})
	}
}

func TestDeletionVectorFaults(t *testing.T) {
	for name, c := range map[string]struct {
		corrupt func(t *testing.T, f *fixture, key string)
		problem string
		class   error
	}{
		"flipped byte": {func(t *testing.T, f *fixture, key string) { f.mutate(t, key, flipMiddle) }, "deletion vector corrupt", fragment.ErrCorrupt},
		"deleted":      {func(t *testing.T, f *fixture, key string) { f.remove(t, key) }, "deletion vector missing", store.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, storetest.Mem(t))
			key := f.pub.Fragments[0].Deletion.Key
			c.corrupt(t, f, key)
			rep := f.verify(t, Options{})
			got := requireFault(t, rep, key, c.problem)
			if !errors.Is(got.Err, c.class) || got.Version != 4 {
				t.Fatalf("fault %v: want class %v at version 4", got, c.class)
			}
		})
	}
}

func TestDeletionVectorCardinality(t *testing.T) {
	f := newFixture(t, storetest.Mem(t))
	ctx := context.Background()
	d := f.pub.Fragments[0].Deletion
	bm, err := fragment.ReadDeletionVector(ctx, f.s, d.Key)
	if err != nil {
		t.Fatal(err)
	}
	bm.Add(uint32(f.pub.Fragments[0].PhysicalRows) + 10) // one more row, past the end
	b, err := fragment.EncodeDeletionVector(bm)
	if err != nil {
		t.Fatal(err)
	}
	f.mutate(t, d.Key, func([]byte) []byte { return b })
	rep := f.verify(t, Options{})
	requireFault(t, rep, d.Key, "manifest says")
	requireFault(t, rep, d.Key, "physical rows")
}

func TestManifestFaults(t *testing.T) {
	t.Run("flipped byte in a middle manifest", func(t *testing.T) {
		f := newFixture(t, storetest.Mem(t))
		key := manifest.ManifestKey("t", 2)
		f.mutate(t, key, flipMiddle)
		rep := f.verify(t, Options{})
		got := requireFault(t, rep, key, "manifest corrupt")
		if got.Version != 2 || !errors.Is(got.Err, manifest.ErrCorrupt) {
			t.Fatalf("fault %v: want version 2, ErrCorrupt", got)
		}
	})
	t.Run("flipped byte in the published manifest", func(t *testing.T) {
		f := newFixture(t, storetest.Mem(t))
		key := manifest.ManifestKey("t", 4)
		f.mutate(t, key, flipMiddle)
		requireFault(t, f.verify(t, Options{}), key, "manifest corrupt")
	})
	t.Run("missing middle manifest", func(t *testing.T) {
		f := newFixture(t, storetest.Mem(t))
		key := manifest.ManifestKey("t", 3)
		f.remove(t, key)
		got := requireFault(t, f.verify(t, Options{}), key, "missing from the chain")
		if got.Version != 3 {
			t.Fatalf("fault %v: want version 3", got)
		}
		rep := f.verify(t, Options{AllowGaps: true})
		if !rep.OK() || len(rep.Notes) == 0 {
			t.Fatalf("AllowGaps: want a note and no faults, got faults:\n%s notes %v", faultList(rep), rep.Notes)
		}
	})
	t.Run("missing transaction record", func(t *testing.T) {
		f := newFixture(t, storetest.Mem(t))
		f.remove(t, f.pub.TxnKey)
		requireFault(t, f.verify(t, Options{}), f.pub.TxnKey, "transaction record missing")
	})
}

func TestPointerFaults(t *testing.T) {
	ctx := context.Background()
	repoint := func(t *testing.T, f *fixture, p catalog.Pointer) {
		t.Helper()
		if err := f.cat.Delete(ctx, f.table); err != nil {
			t.Fatal(err)
		}
		if err := f.cat.CompareAndSwap(ctx, f.table, 0, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("checksum mismatch", func(t *testing.T) {
		f := newFixture(t, storetest.Mem(t))
		repoint(t, f, catalog.Pointer{Version: 4, ManifestKey: f.pub.Key(), Checksum: f.pub.Checksum() ^ 1})
		got := requireFault(t, f.verify(t, Options{}), f.pub.Key(), "does not match the published pointer")
		if !errors.Is(got.Err, manifest.ErrCorrupt) {
			t.Fatalf("fault %v: want ErrCorrupt", got)
		}
	})
	t.Run("HEAD below published", func(t *testing.T) {
		f := newFixture(t, storetest.Mem(t))
		repoint(t, f, catalog.Pointer{Version: 9, ManifestKey: manifest.ManifestKey("t", 9), Checksum: 1})
		rep := f.verify(t, Options{})
		requireFault(t, rep, f.cat.Key("t"), "invariant 3")
		if rep.Tables[0].Head != 4 || rep.Tables[0].Published != 9 {
			t.Fatalf("summary %+v, want head 4 published 9", rep.Tables[0])
		}
	})
	t.Run("published behind HEAD is drift, not a fault", func(t *testing.T) {
		f := newFixture(t, storetest.Mem(t))
		m3, err := manifest.Load(ctx, f.s, "t", 3)
		if err != nil {
			t.Fatal(err)
		}
		repoint(t, f, catalog.Pointer{Version: 3, ManifestKey: m3.Key(), Checksum: m3.Checksum()})
		rep := f.verify(t, Options{})
		if !rep.OK() || len(rep.Notes) == 0 || rep.Tables[0].Deep[0] != 3 {
			t.Fatalf("want a clean report with a drift note, deep-checking v3; faults:\n%s notes %v, summary %+v", faultList(rep), rep.Notes, rep.Tables[0])
		}
	})
}
