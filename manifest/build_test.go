package manifest

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func commitOp(t *testing.T, m *Manifest, op Operation) (*Manifest, error) {
	t.Helper()
	return Build(m.Table, m, NewTransaction(m.Version, op))
}

func TestBuildMaintenanceAndMetadataOps(t *testing.T) {
	m, err := Build("t", nil, NewTransaction(0, Operation{Kind: OpCreate, Schema: testSchema(t), NewFragments: []Fragment{frag(1), frag(2), frag(3), frag(4)}}))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(m *Manifest) string {
		var out []uint32
		for _, f := range m.Fragments {
			out = append(out, f.ID)
		}
		return fmt.Sprint(out)
	}
	// Rewrite: fragments 1 and 2 become one new fragment in their place.
	rw, err := commitOp(t, m, Operation{Kind: OpRewrite, Groups: []RewriteGroup{{Old: []uint32{1, 2}, New: []Fragment{frag(5)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if ids(rw) != "[0 4 3]" || rw.LiveRows() != 10 || fmt.Sprint(rw.Txn.Op.NewFragmentIDs) != "[4]" || rw.Txn.Op.Groups[0].New != nil {
		t.Fatalf("rewrite: fragments %s, rows %d, txn %+v", ids(rw), rw.LiveRows(), rw.Txn.Op)
	}
	if _, err := commitOp(t, rw, Operation{Kind: OpRewrite, Groups: []RewriteGroup{{Old: []uint32{1}}}}); err == nil {
		t.Fatal("rewrite of a fragment that is gone applied")
	}
	// CreateIndex: dropping the name and adding a segment replaces it; a delta segment
	// adds coverage; segments of one name never overlap; indexes on dropped fields go
	// with them.
	ix, err := commitOp(t, rw, Operation{Kind: OpCreateIndex, NewIndexes: []Index{{Name: "a_idx", UUID: "u1", FieldIDs: []int32{0}, Fragments: []uint32{0}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commitOp(t, ix, Operation{Kind: OpCreateIndex, NewIndexes: []Index{{Name: "a_idx", UUID: "u2", FieldIDs: []int32{0}, Fragments: []uint32{0, 4}}}}); err == nil {
		t.Fatal("a segment overlapping another of its name applied")
	}
	ix, err = commitOp(t, ix, Operation{Kind: OpCreateIndex, RemovedIndexes: []string{"a_idx"},
		NewIndexes: []Index{{Name: "a_idx", UUID: "u3", FieldIDs: []int32{0}, Fragments: []uint32{0, 4}}, {Name: "b_idx", UUID: "u4", FieldIDs: []int32{1}}}})
	if err != nil || len(ix.Indexes) != 2 || fmt.Sprint(ix.Indexes[0].Fragments) != "[0 4]" {
		t.Fatalf("replace index: %+v %v", ix.Indexes, err)
	}
	delta, err := commitOp(t, ix, Operation{Kind: OpCreateIndex, NewIndexes: []Index{{Name: "a_idx", UUID: "u5", FieldIDs: []int32{0}, Fragments: []uint32{3}}}})
	if err != nil || len(delta.Indexes) != 3 {
		t.Fatalf("delta segment: %+v %v", delta.Indexes, err)
	}
	merged, err := commitOp(t, delta, Operation{Kind: OpCreateIndex, IndexReplaces: []string{"u3", "u5"},
		NewIndexes: []Index{{Name: "a_idx", UUID: "u6", FieldIDs: []int32{0}, Fragments: []uint32{0, 4, 3}}}})
	if err != nil || len(merged.Indexes) != 2 || merged.Indexes[1].UUID != "u6" {
		t.Fatalf("merged segments: %+v %v", merged.Indexes, err)
	}
	// A rewrite drops the rewritten fragments from every index's coverage.
	rw2, err := commitOp(t, merged, Operation{Kind: OpRewrite, Groups: []RewriteGroup{{Old: []uint32{0, 4}, New: []Fragment{frag(3)}}}})
	if err != nil || fmt.Sprint(rw2.Indexes[1].Fragments) != "[3]" {
		t.Fatalf("coverage after a rewrite: %+v %v", rw2.Indexes, err)
	}
	if _, err := commitOp(t, ix, Operation{Kind: OpCreateIndex, NewIndexes: []Index{{Name: "c", FieldIDs: []int32{9}}}}); err == nil {
		t.Fatal("index on an unknown field applied")
	}
	// SchemaChange: drop field 1 and add field 2.
	only, err := NewSchema(testSchema(t).MustArrow(), []int32{0, 2})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := commitOp(t, ix, Operation{Kind: OpSchemaChange, Schema: &only, SchemaDelta: &SchemaDelta{Added: []int32{2}, Dropped: []int32{1}}})
	if err != nil || sc.NextFieldID != 3 || len(sc.Indexes) != 1 || sc.Indexes[0].Name != "a_idx" {
		t.Fatalf("schema change: next id %d, indexes %+v, %v", sc.NextFieldID, sc.Indexes, err)
	}
	// UpdateConfig: upsert and delete keys.
	uc, err := commitOp(t, sc, Operation{Kind: OpUpdateConfig, Config: map[string]string{"a": "1", "b": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	uc, err = commitOp(t, uc, Operation{Kind: OpUpdateConfig, Config: map[string]string{"a": "3"}, ConfigDeletes: []string{"b"}})
	if err != nil || fmt.Sprint(uc.Config) != "map[a:3]" {
		t.Fatalf("config %v %v", uc.Config, err)
	}
	// MergeWAL: exactly once per generation range, watermark per shard.
	w1, err := commitOp(t, uc, Operation{Kind: OpMergeWAL, WALs: []WALMerge{{Shard: "s", From: 0, To: 3}}, NewFragments: []Fragment{frag(7)}})
	if err != nil || w1.WALMerged["s"] != 3 || w1.LiveRows() != 17 {
		t.Fatalf("merge: %v %v", w1.WALMerged, err)
	}
	if _, err := commitOp(t, w1, Operation{Kind: OpMergeWAL, WALs: []WALMerge{{Shard: "s", From: 0, To: 3}}, NewFragments: []Fragment{frag(7)}}); err == nil {
		t.Fatal("the same generations merged twice")
	}
	if w2, err := commitOp(t, w1, Operation{Kind: OpMergeWAL, WALs: []WALMerge{{Shard: "s", From: 3, To: 5}}}); err != nil || w2.WALMerged["s"] != 5 {
		t.Fatalf("next merge: %v", err)
	}
}

// TestMergeWALExactlyOnceUnderRace: two merges of the same generations from the same read
// version: one commits, the other gets a retryable conflict (invariant 8).
func TestMergeWALExactlyOnceUnderRace(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	m := create(t, s, "t")
	merge := func() Transaction {
		return NewTransaction(m.Version, Operation{Kind: OpMergeWAL, WALs: []WALMerge{{Shard: "s", From: 0, To: 2}}, NewFragments: []Fragment{frag(5)}})
	}
	if _, _, err := Commit(ctx, s, "t", m, merge(), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Commit(ctx, s, "t", m, merge(), CommitOptions{}); !errors.Is(err, ErrRetryable) {
		t.Fatalf("second merge: %v", err)
	}
	head, _ := LoadHead(ctx, s, "t")
	if head.LiveRows() != 5 || head.WALMerged["s"] != 2 {
		t.Fatalf("rows %d, watermark %d", head.LiveRows(), head.WALMerged["s"])
	}
}

// TestRewriteSegments: a rewrite's index segments over its new fragments are applied only
// when they extend an index the parent has (same name, kind and fields) and cover new
// fragments whose ids their writer predicted; otherwise they are left out and the new
// fragments stay uncovered, so a rewrite rebuilt on top of an append (which took the ids)
// never makes an index describe rows it does not hold.
func TestRewriteSegments(t *testing.T) {
	m, err := Build("t", nil, NewTransaction(0, Operation{Kind: OpCreate, Schema: testSchema(t), NewFragments: []Fragment{frag(1), frag(2), frag(3)}}))
	if err != nil {
		t.Fatal(err)
	}
	m, err = commitOp(t, m, Operation{Kind: OpCreateIndex, NewIndexes: []Index{{Name: "zm", UUID: "u1", Kind: "zonemap", FieldIDs: []int32{0}, Fragments: []uint32{0, 1, 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	// Fragments 0 and 1 become fragment 3 (m.NextFragmentID).
	rewrite := func(expected uint32, segs ...Index) Operation {
		nf := frag(3)
		nf.ID = expected
		return Operation{Kind: OpRewrite, Groups: []RewriteGroup{{Old: []uint32{0, 1}, New: []Fragment{nf}}}, NewIndexes: segs}
	}
	seg := func(name, kind string, frags ...uint32) Index {
		return Index{Name: name, UUID: "new-" + name, Kind: kind, FieldIDs: []int32{0}, Fragments: frags}
	}
	covered := func(m *Manifest) string {
		var out []string
		for _, ix := range m.Indexes {
			out = append(out, fmt.Sprintf("%s:%v", ix.UUID, ix.Fragments))
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		name   string
		parent func() *Manifest
		op     Operation
		want   string
	}{
		{"predicted", func() *Manifest { return m }, rewrite(3, seg("zm", "zonemap", 3)), "[u1:[2] new-zm:[3]]"},
		{"not predicted", func() *Manifest { return m }, rewrite(0, seg("zm", "zonemap", 3)), "[u1:[2]]"},
		{"rebuilt on an append", func() *Manifest {
			a, err := commitOp(t, m, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(4)}})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}, rewrite(3, seg("zm", "zonemap", 3)), "[u1:[2]]"},
		{"index dropped meanwhile", func() *Manifest {
			d, err := commitOp(t, m, Operation{Kind: OpCreateIndex, RemovedIndexes: []string{"zm"}})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, rewrite(3, seg("zm", "zonemap", 3)), "[]"},
		{"another kind", func() *Manifest { return m }, rewrite(3, seg("zm", "btree", 3)), "[u1:[2]]"},
		{"unknown name", func() *Manifest { return m }, rewrite(3, seg("other", "zonemap", 3)), "[u1:[2]]"},
		{"an old fragment", func() *Manifest { return m }, rewrite(3, seg("zm", "zonemap", 2, 3)), "[u1:[2]]"},
	} {
		got, err := commitOp(t, c.parent(), c.op)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if covered(got) != c.want {
			t.Errorf("%s: segments %s, want %s", c.name, covered(got), c.want)
		}
	}
}

// TestEmptySegmentsDropped: a segment whose every covered fragment is gone leaves the
// manifest when another segment of its name remains; an index whose segments all cover
// nothing keeps one (it still exists).
func TestEmptySegmentsDropped(t *testing.T) {
	m, err := Build("t", nil, NewTransaction(0, Operation{Kind: OpCreate, Schema: testSchema(t), NewFragments: []Fragment{frag(1), frag(2), frag(3)}}))
	if err != nil {
		t.Fatal(err)
	}
	m, err = commitOp(t, m, Operation{Kind: OpCreateIndex, NewIndexes: []Index{
		{Name: "a", UUID: "a1", Kind: "btree", FieldIDs: []int32{0}, Fragments: []uint32{0, 1}},
		{Name: "a", UUID: "a2", Kind: "btree", FieldIDs: []int32{0}, Fragments: []uint32{2}},
		{Name: "b", UUID: "b1", Kind: "zonemap", FieldIDs: []int32{0}, Fragments: []uint32{0}},
		{Name: "b", UUID: "b2", Kind: "zonemap", FieldIDs: []int32{0}, Fragments: []uint32{1}},
		{Name: "c", UUID: "c1", Kind: "zonemap", FieldIDs: []int32{0}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	segs := func(m *Manifest) string {
		var out []string
		for _, ix := range m.Indexes {
			out = append(out, fmt.Sprintf("%s:%v", ix.UUID, ix.Fragments))
		}
		return fmt.Sprint(out)
	}
	rw, err := commitOp(t, m, Operation{Kind: OpRewrite, Groups: []RewriteGroup{{Old: []uint32{0, 1}, New: []Fragment{frag(3)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := segs(rw); got != "[a2:[2] b1:[] c1:[]]" {
		t.Fatalf("segments after the rewrite: %s", got)
	}
}

// TestMergeWALSeveralShards: one version merges several shards, each watermark moves
// together; a shard named twice, an empty range or a moved watermark is refused, the
// last with ErrWatermarkMoved.
func TestMergeWALSeveralShards(t *testing.T) {
	s := memStore(t)
	m := create(t, s, "t")
	w1, err := commitOp(t, m, Operation{Kind: OpMergeWAL, WALs: []WALMerge{{Shard: "0", From: 0, To: 2}, {Shard: "1", From: 0, To: 5}}, NewFragments: []Fragment{frag(3)}})
	if err != nil || w1.WALMerged["0"] != 2 || w1.WALMerged["1"] != 5 {
		t.Fatalf("merge of two shards: %v %v", w1.WALMerged, err)
	}
	for name, ws := range map[string][]WALMerge{
		"twice": {{Shard: "0", From: 2, To: 3}, {Shard: "0", From: 2, To: 4}},
		"empty": {{Shard: "0", From: 2, To: 2}},
		"none":  nil,
	} {
		if _, err := commitOp(t, w1, Operation{Kind: OpMergeWAL, WALs: ws}); err == nil {
			t.Errorf("%s: committed", name)
		}
	}
	_, err = commitOp(t, w1, Operation{Kind: OpMergeWAL, WALs: []WALMerge{{Shard: "1", From: 0, To: 5}}})
	if !errors.Is(err, ErrWatermarkMoved) {
		t.Fatalf("a rerun of a finished merge: %v, want ErrWatermarkMoved", err)
	}
}
