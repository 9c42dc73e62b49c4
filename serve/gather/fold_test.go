package gather

import (
	"errors"
	"testing"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/repair"
	"github.com/shale-db/shale/serve/plan"
)

// frag is a fragment of rows physical rows (deleted of them deleted) in one data file of
// size bytes.
func frag(id uint32, rows, deleted, size int64) manifest.Fragment {
	f := manifest.Fragment{ID: id, PhysicalRows: rows, Files: []manifest.DataFile{{Key: "t/data/x/f.arrow", Size: size, Rows: rows}}}
	if deleted > 0 {
		f.Deletion = &manifest.DeletionFile{Key: "t/_deletions/x/d.dv", Deleted: deleted}
	}
	return f
}

func man(incSince uint64, frags []manifest.Fragment, idx ...manifest.Index) *manifest.Manifest {
	return &manifest.Manifest{Table: "t", Version: 7, Fragments: frags, Indexes: idx, IncarnationSince: incSince}
}

// td folds events into table t's demand.
func td(t *testing.T, events ...demand.Event) *demand.TableDemand {
	t.Helper()
	d := demand.NewTableDemand("t")
	for i, e := range events {
		if _, err := d.Fold(e, int64(i+1), 1); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// flushEv is a writer's flush of generation g of shard at atMs (0: unknown time), of
// incarnation inc, with g×100 sealed bytes.
func flushEv(shard string, g uint64, atMs int64, inc uint64) demand.Event {
	return demand.Event{V: demand.CurrentVersion, Shard: shard, SealedThrough: g, SealedBytesThrough: g * 100,
		FlushedAtMs: atMs, WriterEpoch: 1, Source: demand.SourceWriter, IncarnationSince: inc}
}

func mergedEv(shard string, g uint64, inc uint64) demand.Event {
	return demand.MergedEvent(shard, g, inc, 99)
}

func side(table, op string, err error) recovery.Keyed {
	return recovery.Keyed{Key: recovery.Key(op), Sidecar: recovery.Sidecar{Table: table, OperationID: op}, Err: err}
}

// TestFold: each TableState field from hand-built inputs.
func TestFold(t *testing.T) {
	t0 := int64(1_700_000_000_000)
	small := compaction.Options{TargetRows: 100}
	cases := []struct {
		name string
		in   inputs
		want plan.TableState
	}{
		{"empty table", inputs{published: man(1, nil)}, plan.TableState{}},
		{"exact age over two shards",
			inputs{published: man(1, nil), demand: td(t, flushEv("0", 1, t0, 1), flushEv("0", 2, t0+10, 1), flushEv("1", 1, t0+5, 1))},
			plan.TableState{PendingGenerations: 3, PendingBytes: 300, OldestPending: time.UnixMilli(t0).UTC(), AgeKnown: true, AgeExact: true}},
		{"merged generations are not pending",
			inputs{published: man(1, nil), demand: td(t, flushEv("0", 1, t0, 1), flushEv("0", 2, t0+10, 1), mergedEv("0", 1, 1))},
			plan.TableState{PendingGenerations: 1, PendingBytes: 200, OldestPending: time.UnixMilli(t0 + 10).UTC(), AgeKnown: true, AgeExact: true}},
		{"unknown age",
			inputs{published: man(1, nil), demand: td(t, flushEv("0", 3, 0, 1))},
			plan.TableState{PendingGenerations: 3, PendingBytes: 300}},
		{"upper bound age: generation 1's time lost",
			inputs{published: man(1, nil), demand: td(t, flushEv("0", 2, t0+10, 1))},
			plan.TableState{PendingGenerations: 2, PendingBytes: 200, OldestPending: time.UnixMilli(t0 + 10).UTC(), AgeKnown: true}},
		{"demand of an earlier incarnation is ignored",
			inputs{published: man(5, nil), demand: td(t, flushEv("0", 3, t0, 1))},
			plan.TableState{}},
		{"demand of the current incarnation",
			inputs{published: man(5, nil), demand: td(t, flushEv("0", 1, t0, 5))},
			plan.TableState{PendingGenerations: 1, PendingBytes: 100, OldestPending: time.UnixMilli(t0).UTC(), AgeKnown: true, AgeExact: true}},
		{"small fragments compaction would combine",
			inputs{compaction: small, published: man(1, []manifest.Fragment{frag(1, 10, 0, 1000), frag(2, 10, 0, 1000), frag(3, 10, 0, 1000), frag(4, 500, 0, 50000)})},
			plan.TableState{Fragments: 4, SmallFragments: 3, CompactBytes: 3000}},
		{"a lone small fragment is not compaction work",
			inputs{compaction: small, published: man(1, []manifest.Fragment{frag(1, 500, 0, 1), frag(2, 10, 0, 1), frag(3, 500, 0, 1)})},
			plan.TableState{Fragments: 3}},
		{"large fragment with many deleted rows",
			inputs{compaction: small, published: man(1, []manifest.Fragment{frag(1, 500, 0, 1), frag(2, 500, 250, 7000)})},
			plan.TableState{Fragments: 2, DeletedRatioHigh: 1, CompactBytes: 7000}},
		{"small and deleted both count",
			inputs{compaction: small, published: man(1, []manifest.Fragment{frag(1, 10, 5, 10), frag(2, 10, 0, 20)})},
			plan.TableState{Fragments: 2, SmallFragments: 2, DeletedRatioHigh: 1, CompactBytes: 30}},
		{"fragments some index does not cover",
			inputs{compaction: compaction.Options{TargetRows: 1}, published: man(1, []manifest.Fragment{frag(1, 10, 0, 1), frag(2, 10, 0, 20), frag(3, 10, 0, 300)},
				manifest.Index{Name: "a", Fragments: []uint32{1}}, manifest.Index{Name: "a", UUID: "delta", Fragments: []uint32{2}},
				manifest.Index{Name: "b", Fragments: []uint32{1}})},
			plan.TableState{Fragments: 3, UncoveredByIndex: 2, IndexBytes: 320}},
		{"maintenance-only drift with no sidecar",
			inputs{published: man(1, nil), drift: &repair.Plan{Decision: repair.Publishable, Versions: []repair.Version{{Class: repair.Maintenance}, {Class: repair.Maintenance}, {Class: repair.Aborted}}}},
			plan.TableState{Drift: 2}},
		{"logical drift is never the sidecar's",
			inputs{published: man(1, nil), drift: &repair.Plan{Decision: repair.NeedsForce, Versions: []repair.Version{{Class: repair.Maintenance}, {Class: repair.Logical}}}},
			plan.TableState{}},
		{"sidecar-covered drift is recovery's",
			inputs{published: man(1, nil), drift: &repair.Plan{Decision: repair.RunRecover, Versions: []repair.Version{{Class: repair.Maintenance, Sidecar: "_recovery/op.json"}}},
				sidecars: []recovery.Keyed{side("t", "op", nil)}},
			plan.TableState{PendingSidecars: 1}},
		{"sidecars: own, running, other table's, unreadable but attributed",
			inputs{published: man(1, nil), live: map[string]bool{"run": true},
				sidecars: []recovery.Keyed{side("t", "dead", nil), side("t", "run", nil), side("u", "x", nil), side("t", "new", recovery.ErrNewerFormat), side("", "?", recovery.ErrCorrupt)}},
			plan.TableState{PendingSidecars: 2}},
		{"dropped: shape unknown, demand still shown",
			inputs{dropped: true, demand: td(t, flushEv("0", 1, 0, 1))},
			plan.TableState{Dropped: true, PendingGenerations: 1, PendingBytes: 100}},
		{"unreadable",
			inputs{unreadable: errors.New("checksum mismatch"), sidecars: []recovery.Keyed{side("t", "op", nil)}},
			plan.TableState{Unreadable: "checksum mismatch", PendingSidecars: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.table = "t"
			c.want.Table = "t"
			if got := fold(c.in); got != c.want {
				t.Fatalf("fold:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
