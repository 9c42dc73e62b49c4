package manifest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/store"
)

// deleteRows plans a Delete of rows of fragment frag against read, writing a real deletion
// vector (previous ∪ rows) whose key contains tag. Deleting every row removes the fragment.
func deleteRows(t testing.TB, s store.Store, read *Manifest, frag uint32, tag string, rows ...uint32) Transaction {
	t.Helper()
	op, _ := deletionOp(t, s, read, frag, tag, rows)
	op.Kind = OpDelete
	return NewTransaction(read.Version, op)
}

func deletionOp(t testing.TB, s store.Store, read *Manifest, frag uint32, tag string, rows []uint32) (Operation, int64) {
	t.Helper()
	ctx := context.Background()
	f, ok := read.Fragment(frag)
	if !ok {
		t.Fatalf("no fragment %d", frag)
	}
	bm := roaring.BitmapOf(rows...)
	prev := ""
	if f.Deletion != nil {
		prev = f.Deletion.Key
		old, err := fragment.ReadDeletionVector(ctx, s, prev)
		if err != nil {
			t.Fatal(err)
		}
		bm.Or(old)
	}
	if int64(bm.GetCardinality()) >= f.PhysicalRows {
		return Operation{Removed: []uint32{frag}}, f.PhysicalRows
	}
	key := fmt.Sprintf("%s/%s-%s.dv", DeletionsDir(read.Table), tag, NewTransactionID())
	size, err := fragment.WriteDeletionVector(ctx, s, key, bm)
	if err != nil {
		t.Fatal(err)
	}
	return Operation{Deletions: []DeletionUpdate{{FragmentID: frag, Previous: prev,
		New: DeletionFile{Key: key, Size: size, Deleted: int64(bm.GetCardinality())}}}}, int64(len(rows))
}

// mutation is one of update/delete × partial/full over fragment 0.
type mutation struct {
	name string
	plan func(t testing.TB, s store.Store, read *Manifest, rows []uint32) Transaction
}

var mutations = []mutation{
	{"delete_partial", func(t testing.TB, s store.Store, read *Manifest, rows []uint32) Transaction {
		return deleteRows(t, s, read, 0, "dp", rows...)
	}},
	{"delete_full", func(t testing.TB, s store.Store, read *Manifest, _ []uint32) Transaction {
		return NewTransaction(read.Version, Operation{Kind: OpDelete, Removed: []uint32{0}})
	}},
	{"update_partial", func(t testing.TB, s store.Store, read *Manifest, rows []uint32) Transaction {
		op, _ := deletionOp(t, s, read, 0, "up", rows)
		op.Kind = OpUpdate
		op.NewFragments = []Fragment{frag(int64(len(rows)))}
		return NewTransaction(read.Version, op)
	}},
	{"update_full", func(t testing.TB, s store.Store, read *Manifest, _ []uint32) Transaction {
		return NewTransaction(read.Version, Operation{Kind: OpUpdate, Removed: []uint32{0}, NewFragments: []Fragment{frag(10)}})
	}},
}

// TestSameRowsAlwaysRetryable: every ordered pair of {update, delete} × {full, partial}
// that touches the same row of one fragment is a retryable conflict for the later committer
// (lance-format.md §4.5 test_conflicting_rebase).
func TestSameRowsAlwaysRetryable(t *testing.T) {
	ctx := context.Background()
	for _, first := range mutations {
		for _, second := range mutations {
			t.Run(first.name+"_then_"+second.name, func(t *testing.T) {
				s := memStore(t)
				m := create(t, s, "t")
				base, _, err := Commit(ctx, s, "t", m, NewTransaction(m.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(10)}}), CommitOptions{})
				if err != nil {
					t.Fatal(err)
				}
				a := first.plan(t, s, base, []uint32{2, 3})
				b := second.plan(t, s, base, []uint32{3, 4})
				if _, _, err := Commit(ctx, s, "t", base, a, CommitOptions{}); err != nil {
					t.Fatal(err)
				}
				_, _, err = Commit(ctx, s, "t", base, b, CommitOptions{})
				var ce *ConflictError
				if !errors.Is(err, ErrRetryable) || !errors.As(err, &ce) || ce.Theirs.ID != a.ID {
					t.Fatalf("second commit: %v, want a retryable conflict with %s", err, a.ID)
				}
			})
		}
	}
}

// TestDisjointRowsMergeDeletionVectors: two deletes of different rows of the same fragment
// from the same read version both commit; the second's deletion vector is merged with the
// first's (no data file is read: the fragment has none).
func TestDisjointRowsMergeDeletionVectors(t *testing.T) {
	ctx := context.Background()
	for _, second := range []string{"delete", "update"} {
		t.Run(second, func(t *testing.T) {
			s := memStore(t)
			m := create(t, s, "t")
			base, _, err := Commit(ctx, s, "t", m, NewTransaction(m.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(10)}}), CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a := deleteRows(t, s, base, 0, "a", 1, 2)
			if _, _, err := Commit(ctx, s, "t", base, a, CommitOptions{}); err != nil {
				t.Fatal(err)
			}
			op, _ := deletionOp(t, s, base, 0, "b", []uint32{5, 6})
			op.Kind = OpDelete
			if second == "update" {
				op.Kind = OpUpdate
				op.NewFragments = []Fragment{frag(2)}
			}
			before := s.Counters().Snapshot()
			got, stats, err := Commit(ctx, s, "t", base, NewTransaction(base.Version, op), CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d := s.Counters().Snapshot().Sub(before)
			if stats.DeletionsMerged != 1 || got.Version != 4 {
				t.Fatalf("stats %+v, version %d", stats, got.Version)
			}
			f0, _ := got.Fragment(0)
			dv, err := fragment.ReadDeletionVector(ctx, s, f0.Deletion.Key)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(dv.ToArray()) != "[1 2 5 6]" || f0.Deletion.Deleted != 4 {
				t.Fatalf("merged deletion vector %v (%d)", dv.ToArray(), f0.Deletion.Deleted)
			}
			// Reads: the winner's manifest and three deletion vectors; writes: one merged
			// deletion vector, the transaction records and the manifests. No data file.
			if d.ByOp[store.OpGet] != 4 || d.ByOp[store.OpPut] != 2 {
				t.Fatalf("rebase requests: %s", d)
			}
		})
	}
}
