package manifest

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func appendAt(read uint64, rows int64) Transaction {
	return NewTransaction(read, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(rows)}})
}

// TestDropMarkerFencesAndCreateStartsNewIncarnation (issue 8 item 10): a drop commits an
// empty version (the marker) that every transaction of the dropped incarnation meets in
// its commit loop (ErrTableDropped, retried or not), that keeps the table out of Tables
// and LoadHead, and on which only a Create builds: a new incarnation numbered on from the
// marker, never a restart at version 1.
func TestDropMarkerFencesAndCreateStartsNewIncarnation(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	v1 := create(t, s, "t")
	if v1.Incarnation != v1.Txn.ID || v1.IncarnationSince != 1 {
		t.Fatalf("created: incarnation %q since %d, want the create's id %s since 1", v1.Incarnation, v1.IncarnationSince, v1.Txn.ID)
	}
	v2, _, err := Commit(ctx, s, "t", v1, appendAt(1, 5), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Incarnation != v1.Incarnation || v2.IncarnationSince != 1 {
		t.Fatalf("v2 incarnation %q since %d", v2.Incarnation, v2.IncarnationSince)
	}
	late := appendAt(2, 7) // planned on v2, committed after the drop

	drop := NewTransaction(2, Operation{Kind: OpDrop})
	marker, _, err := Commit(ctx, s, "t", v2, drop, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !marker.Dropped() || marker.Version != 3 || len(marker.Fragments) != 0 || marker.Incarnation != v1.Incarnation {
		t.Fatalf("marker: v%d dropped %v, %d fragments, incarnation %q", marker.Version, marker.Dropped(), len(marker.Fragments), marker.Incarnation)
	}

	// The writer planned before the drop fails at its commit point, every time.
	for try := 0; try < 2; try++ {
		_, _, err = Commit(ctx, s, "t", v2, late, CommitOptions{})
		var ce *ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, ErrTableDropped) || !errors.Is(err, ErrIncompatible) || ce.TheirsVersion != 3 {
			t.Fatalf("try %d: append planned before the drop: %v, want an incompatible conflict with the drop at v3", try, err)
		}
	}
	// So does a drop planned before it, and anything built on the marker itself.
	if _, _, err := Commit(ctx, s, "t", v2, NewTransaction(2, Operation{Kind: OpDrop}), CommitOptions{}); !errors.Is(err, ErrTableDropped) {
		t.Fatalf("second drop planned on v2: %v, want ErrTableDropped", err)
	}
	for _, op := range []Operation{{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}, {Kind: OpAbort, Aborted: []string{"x"}}, {Kind: OpDrop}} {
		if _, _, err := Commit(ctx, s, "t", marker, NewTransaction(3, op), CommitOptions{}); !errors.Is(err, ErrTableDropped) {
			t.Fatalf("%s on the marker: %v, want ErrTableDropped", op.Kind, err)
		}
	}
	// Readers see no table.
	for name, f := range map[string]func() error{
		"LoadHead":   func() error { _, err := LoadHead(ctx, s, "t"); return err },
		"LoadLatest": func() error { _, err := LoadLatest(ctx, s, "t", nil); return err },
		"CatchUp":    func() error { _, err := CatchUp(ctx, s, "t", v1, nil); return err },
	} {
		err := f()
		if !errors.Is(err, ErrTableNotFound) || !errors.Is(err, ErrTableDropped) {
			t.Fatalf("%s of a dropped table: %v, want ErrTableNotFound and ErrTableDropped", name, err)
		}
	}
	if ts, err := Tables(ctx, s); err != nil || len(ts) != 0 {
		t.Fatalf("tables after the drop: %v %v", ts, err)
	}
	if hs, err := ListTables(ctx, s); err != nil || len(hs) != 1 || hs[0] != (TableHead{Table: "t", Head: 3, Dropped: true, TxnKey: marker.TxnKey}) {
		t.Fatalf("ListTables: %v %v", hs, err)
	}

	// Created again: version 4, a new incarnation.
	re := NewTransaction(3, Operation{Kind: OpCreate, Schema: testSchema(t)})
	v4, _, err := Commit(ctx, s, "t", marker, re, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v4.Version != 4 || v4.Incarnation != re.ID || v4.IncarnationSince != 4 || len(v4.Fragments) != 0 || v4.NextFragmentID != v2.NextFragmentID {
		t.Fatalf("re-created: v%d incarnation %q since %d, %d fragments, next fragment %d", v4.Version, v4.Incarnation, v4.IncarnationSince, len(v4.Fragments), v4.NextFragmentID)
	}
	if _, _, err := Commit(ctx, s, "t", marker, NewTransaction(3, Operation{Kind: OpCreate, Schema: testSchema(t)}), CommitOptions{}); !errors.Is(err, ErrIncompatible) || errors.Is(err, ErrTableDropped) {
		t.Fatalf("a second create on the marker: %v, want 'already exists'", err)
	}
	if _, _, err = Commit(ctx, s, "t", v2, late, CommitOptions{}); !errors.Is(err, ErrTableDropped) {
		t.Fatalf("append planned before the drop, after the re-create: %v, want ErrTableDropped", err)
	}
	if ts, err := Tables(ctx, s); err != nil || fmt.Sprint(ts) != "[t]" {
		t.Fatalf("tables after the re-create: %v %v", ts, err)
	}
	if err := CheckLive(ctx, s, v4); err != nil {
		t.Fatalf("CheckLive of the new incarnation: %v", err)
	}
	if err := CheckLive(ctx, s, v2); !errors.Is(err, ErrTableDropped) {
		t.Fatalf("CheckLive of the dropped incarnation: %v", err)
	}

	// The drop's deletes free the numbers below the marker: a writer planned on v1 now
	// puts v2 into the hole. That version belongs to no incarnation.
	for _, v := range []uint64{1, 2} {
		if err := s.Delete(ctx, ManifestKey("t", v)); err != nil {
			t.Fatal(err)
		}
	}
	hole, _, err := Commit(ctx, s, "t", v1, appendAt(1, 9), CommitOptions{})
	if err != nil || hole.Version != 2 {
		t.Fatalf("commit into the hole: v%v %v (the test needs it to land)", hole, err)
	}
	if SameIncarnation(hole, v4) {
		t.Fatal("a version below the marker counts as part of the new incarnation")
	}
	if err := CheckLive(ctx, s, hole); !errors.Is(err, ErrTableDropped) {
		t.Fatalf("CheckLive of a version in the hole: %v", err)
	}
}

// TestSameIncarnationWithOlderManifests: manifests of builds before incarnations (no id,
// since 0) match an incarnation only at or above its first version.
func TestSameIncarnationWithOlderManifests(t *testing.T) {
	old := func(v uint64) *Manifest { return &Manifest{Version: v} }
	inc := func(v, since uint64, id string) *Manifest {
		return &Manifest{Version: v, Incarnation: id, IncarnationSince: since}
	}
	for _, c := range []struct {
		a, b *Manifest
		want bool
	}{
		{old(3), old(9), true},
		{old(3), inc(9, 5, "B"), false}, // below B's first version: an earlier incarnation
		{old(6), inc(9, 5, "B"), true},
		{inc(3, 1, "A"), inc(9, 5, "B"), false},
		{inc(6, 5, "B"), inc(9, 5, "B"), true},
	} {
		if got := SameIncarnation(c.a, c.b); got != c.want || SameIncarnation(c.b, c.a) != c.want {
			t.Errorf("SameIncarnation(%+v, %+v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
