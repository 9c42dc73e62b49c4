package verify

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// walFixture is table "t" with one WAL shard: generation 1 merged into the base table,
// generations 2 and 3 flushed and unmerged, and two entries above the replay position.
type walFixture struct {
	s   store.Store
	db  *engine.DB
	sm  *wal.ShardManifest // the newest shard manifest
	log []wal.Position     // the entries above its replay position
}

func newWALFixture(t *testing.T) *walFixture {
	t.Helper()
	ctx := context.Background()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.UpdateConfig(ctx, map[string]string{engine.ConfigWALShards: "1", engine.ConfigWALFlushInterval: "1h"}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(n int) {
		rec := makeRecord(schema, n)
		defer rec.Release()
		if _, err := w.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		appendN(10 + i)
		if i < 3 {
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			h, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.MergeWAL(ctx, engine.MergeWALOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Closing would flush the log; the test process stops the writer's goroutines at the
	// end without flushing (what a crash leaves).
	sm, err := wal.LoadShard(ctx, s, "t", "0")
	if err != nil {
		t.Fatal(err)
	}
	log, err := wal.ListEntries(ctx, s, "t", "0", sm.Replay)
	if err != nil {
		t.Fatal(err)
	}
	if len(sm.Unmerged(1)) != 2 || len(log) != 2 {
		t.Fatalf("fixture: shard manifest %+v with %d entries above its replay position", sm, len(log))
	}
	return &walFixture{s: s, db: db, sm: sm, log: log}
}

func (f *walFixture) verify(t *testing.T) *Report {
	t.Helper()
	rep, err := Table(context.Background(), f.s, f.db.Catalog(), "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// wantFault asserts that rep has a fault about key whose problem says problem.
func wantFault(t *testing.T, rep *Report, key, problem string) {
	t.Helper()
	for _, fl := range rep.Faults {
		if fl.Key == key && strings.Contains(fl.String(), problem) {
			return
		}
	}
	t.Fatalf("no fault about %s saying %q; faults:\n%s", key, problem, faultList(rep))
}

// putShardManifest stores sm as its version (bypassing the writer), as a buggy or
// hostile build might have.
func putShardManifest(t *testing.T, s store.Store, sm *wal.ShardManifest) {
	t.Helper()
	b, err := manifest.Frame([4]byte{'S', 'H', 'W', 'M'}, sm)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), wal.ManifestKey(sm.Table, sm.Shard, sm.Version), b); err != nil {
		t.Fatal(err)
	}
}

func TestWALShardVerifies(t *testing.T) {
	f := newWALFixture(t)
	rep := f.verify(t)
	if !rep.OK() {
		t.Fatalf("faults:\n%s", faultList(rep))
	}
	sum := rep.Tables[0]
	if sum.WALShards != 1 || sum.WALGenerations != 2 || sum.WALEntries != 2 || sum.WALEntryRows != 13+14 {
		t.Fatalf("summary %+v: want 1 shard, 2 unmerged generations, 2 entries of 27 rows", sum)
	}
	// Old versions replaced by tombstones are notes.
	for v := uint64(1); v < f.sm.Version; v++ {
		if err := wal.ExpireShardManifest(context.Background(), f.s, "t", "0", v); err != nil {
			t.Fatal(err)
		}
	}
	rep = f.verify(t)
	if !rep.OK() {
		t.Fatalf("after expiring old shard manifests: faults:\n%s", faultList(rep))
	}
	found := false
	for _, n := range rep.Notes {
		found = found || strings.Contains(n.Message, "expired by gc (tombstones)")
	}
	if !found {
		t.Fatalf("no note on the tombstones: %v", rep.Notes)
	}
}

func TestWALFaultsNameTheObject(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(t *testing.T, f *walFixture) (key, problem string){
		"corrupt entry": func(t *testing.T, f *walFixture) (string, string) {
			key := wal.EntryKey("t", "0", f.log[1])
			b, err := f.s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := f.s.Put(ctx, key, b); err != nil {
				t.Fatal(err)
			}
			return key, "WAL entry corrupt"
		},
		"truncated entry": func(t *testing.T, f *walFixture) (string, string) {
			key := wal.EntryKey("t", "0", f.log[0])
			b, _ := f.s.Get(ctx, key)
			if err := f.s.Put(ctx, key, b[:len(b)-3]); err != nil {
				t.Fatal(err)
			}
			return key, "without the entry trailer"
		},
		"truncated generation file": func(t *testing.T, f *walFixture) (string, string) {
			key := f.sm.Unmerged(1)[1].Files[0].Key
			b, _ := f.s.Get(ctx, key)
			if err := f.s.Put(ctx, key, b[:len(b)/2]); err != nil {
				t.Fatal(err)
			}
			return key, "data file"
		},
		"missing generation file": func(t *testing.T, f *walFixture) (string, string) {
			key := f.sm.Unmerged(1)[0].Files[0].Key
			if err := f.s.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			return key, "data file missing"
		},
		"corrupt old shard manifest": func(t *testing.T, f *walFixture) (string, string) {
			key := wal.ManifestKey("t", "0", 2)
			if err := f.s.Put(ctx, key, []byte("SHWM not a manifest")); err != nil {
				t.Fatal(err)
			}
			return key, "shard manifest corrupt"
		},
		"missing shard manifest version": func(t *testing.T, f *walFixture) (string, string) {
			key := wal.ManifestKey("t", "0", 1)
			if err := f.s.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			return key, "is missing (versions are never deleted)"
		},
		"newest shard manifest a tombstone": func(t *testing.T, f *walFixture) (string, string) {
			if err := wal.ExpireShardManifest(ctx, f.s, "t", "0", f.sm.Version); err != nil {
				t.Fatal(err)
			}
			return f.sm.Key, "is a tombstone"
		},
		"watermark above sealed": func(t *testing.T, f *walFixture) (string, string) {
			next := *f.sm
			next.Version++
			next.NextGeneration, next.Generations = 1, nil
			putShardManifest(t, f.s, &next)
			return wal.ManifestKey("t", "0", next.Version), "above the shard's sealed generation 0"
		},
		"generations not contiguous": func(t *testing.T, f *walFixture) (string, string) {
			next := *f.sm
			next.Version++
			next.Generations = f.sm.Unmerged(1)[1:] // generation 2 left out
			putShardManifest(t, f.s, &next)
			return wal.ManifestKey("t", "0", next.Version), "not contiguous"
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			f := newWALFixture(t)
			key, problem := damage(t, f)
			rep := f.verify(t)
			wantFault(t, rep, key, problem)
		})
	}
}
