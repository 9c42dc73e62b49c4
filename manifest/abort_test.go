package manifest

import (
	"context"
	"errors"
	"testing"
)

// TestAbortFencesTransaction: an abort committed after a transaction was planned makes
// that transaction's commit fail however it races, and an abort planned after the
// transaction landed fails instead (one of the two wins, never both).
func TestAbortFencesTransaction(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	zombie := NewTransaction(base.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(5)}})

	abort := NewTransaction(base.Version, Operation{Kind: OpAbort, Aborted: []string{zombie.ID}})
	am, _, err := Commit(ctx, s, "t", base, abort, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if am.LiveRows() != 0 || len(am.Fragments) != 0 || !am.Txn.Op.Kind.Maintenance() {
		t.Fatalf("abort version changed content or is not maintenance: %+v", am)
	}
	// The zombie, planned on the base version, now tries to commit.
	_, _, err = Commit(ctx, s, "t", base, zombie, CommitOptions{})
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("fenced transaction: %v, want an incompatible conflict", err)
	}
	if h, _ := Head(ctx, s, "t"); h != am.Version {
		t.Fatalf("HEAD %d, want the abort's version %d", h, am.Version)
	}

	// The other order: the transaction lands first; the abort then fails.
	landed := NewTransaction(am.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(3)}})
	lm, _, err := Commit(ctx, s, "t", am, landed, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	late := NewTransaction(am.Version, Operation{Kind: OpAbort, Aborted: []string{landed.ID}})
	if _, _, err := Commit(ctx, s, "t", am, late, CommitOptions{}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("abort of a landed transaction: %v, want an incompatible conflict", err)
	}
	// An abort naming someone else commits on top of anything.
	other := NewTransaction(lm.Version, Operation{Kind: OpAbort, Aborted: []string{"nobody"}})
	if _, _, err := Commit(ctx, s, "t", lm, other, CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Commit(ctx, s, "t", lm, NewTransaction(lm.Version, Operation{Kind: OpAbort}), CommitOptions{}); err == nil {
		t.Fatal("an abort naming no transaction committed")
	}
}
