package manifest

import (
	"context"
	"testing"
)

type fixedGroups map[string]bool

func (f fixedGroups) Committed(_ context.Context, id string) (bool, error) { return f[id], nil }

// TestAbortedGroupVersionsCountAsEmpty: a version prepared by a multi-table group that
// aborted stays in the store, but versions built after it (by the commit loop or CatchUp)
// exclude its content; a committed group's version counts.
func TestAbortedGroupVersionsCountAsEmpty(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	groups := fixedGroups{"ok": true, "gone": false}
	prep := func(read *Manifest, group string, rows int64) *Manifest {
		txn := NewTransaction(read.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(rows)}, Group: &GroupRef{ID: group, Tables: []string{"t", "u"}}})
		m, _, err := Commit(ctx, s, "t", read, txn, CommitOptions{Groups: groups})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	v2 := prep(base, "gone", 100) // aborted
	v3 := prep(base, "ok", 10)    // committed, built past v2
	if v2.Version != 2 || v3.Version != 3 || v3.LiveRows() != 10 {
		t.Fatalf("v2 %d, v3 %d with %d rows (the aborted group's 100 rows must not count)", v2.Version, v3.Version, v3.LiveRows())
	}
	_, stats, err := Commit(ctx, s, "t", base, NewTransaction(base.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}), CommitOptions{Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.SkippedAborted) != 1 || stats.SkippedAborted[0] != 2 {
		t.Fatalf("skipped %v", stats.SkippedAborted)
	}
	head, err := CatchUp(ctx, s, "t", base, groups)
	if err != nil {
		t.Fatal(err)
	}
	if head.Version != 4 || head.LiveRows() != 11 {
		t.Fatalf("CatchUp: v%d with %d rows, want v4 with 11", head.Version, head.LiveRows())
	}
	// A HEAD that is itself an aborted member: CatchUp keeps the content below it.
	v5 := prep(head, "gone", 7)
	at, err := CatchUp(ctx, s, "t", head, groups)
	if err != nil || at.Version != v5.Version || at.LiveRows() != 11 || at.ContentVersion() != 4 {
		t.Fatalf("CatchUp over an aborted HEAD: v%d, %d rows, content v%d, %v", at.Version, at.LiveRows(), at.ContentVersion(), err)
	}
	// Time travel: an aborted member reads as the version below it that counts; a version
	// built on a renumbered one carries its own content.
	for v, want := range map[uint64]uint64{2: 1, 3: 3, 5: 4} {
		m, err := LoadCounted(ctx, s, "t", v, groups)
		if err != nil || m.Version != v || m.ContentVersion() != want {
			t.Fatalf("LoadCounted(%d): %+v %v, want content version %d", v, m, err, want)
		}
	}
	v6, _, err := Commit(ctx, s, "t", at, NewTransaction(at.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}), CommitOptions{Groups: groups})
	if err != nil || v6.Version != 6 || v6.ContentVersion() != 6 || v6.LiveRows() != 12 {
		t.Fatalf("built on a renumbered parent: %+v %v", v6, err)
	}
}
