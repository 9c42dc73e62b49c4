package manifest

import (
	"context"
	"errors"
	"fmt"
	"github.com/shale-db/shale/store"
	"testing"
)

// appendTxn is an append of rows planned on read.
func appendTxn(read *Manifest, rows int64) Transaction {
	return NewTransaction(read.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(rows)}})
}

func mustCommit(t *testing.T, s store.Store, read *Manifest, txn Transaction) *Manifest {
	t.Helper()
	m, _, err := Commit(context.Background(), s, "t", read, txn, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRetryOfTransactionLandedInExpiredVersionIsCommitted (issue 8 item 3): an earlier
// attempt landed, garbage collection expired its version, and the retry meets the
// tombstone. The outcome is decided by transaction id: committed, never a conflict that a
// caller would answer by writing the rows again.
func TestRetryOfTransactionLandedInExpiredVersionIsCommitted(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	txn := appendTxn(base, 5)
	landed := mustCommit(t, s, base, txn)
	head := mustCommit(t, s, landed, appendTxn(landed, 1))
	head = mustCommit(t, s, head, appendTxn(head, 1))
	if err := Expire(ctx, s, landed); err != nil {
		t.Fatal(err)
	}
	for _, read := range []*Manifest{base, head} { // the original handle, and a refreshed one
		_, _, err := Commit(ctx, s, "t", read, txn, CommitOptions{})
		var le *ExpiredLandingError
		if !errors.As(err, &le) || !errors.Is(err, ErrLandedExpired) || le.Version != landed.Version {
			t.Fatalf("retry from v%d of a transaction landed in expired v%d: %v; want *ExpiredLandingError", read.Version, landed.Version, err)
		}
		if errors.Is(err, ErrConflict) {
			t.Fatalf("retry reported a conflict: %v", err)
		}
	}
	if h, _ := Head(ctx, s, "t"); h != head.Version {
		t.Fatalf("HEAD %d after retries, want %d (nothing committed twice)", h, head.Version)
	}
}

// TestRetryOnRefreshedHandleChecksConflicts (issue 8 item 4): retrying a transaction on a
// handle newer than its read version checks every version in between with the conflict
// rules; the same transaction gets the same answer from every handle.
func TestRetryOnRefreshedHandleChecksConflicts(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	// Two schema changes planned on the same version (ADD COLUMN c and ADD COLUMN d
	// would get the same field id).
	ours := NewTransaction(base.Version, Operation{Kind: OpSchemaChange, Schema: testSchema(t), SchemaDelta: &SchemaDelta{Added: []int32{2}}})
	theirs := NewTransaction(base.Version, Operation{Kind: OpSchemaChange, Schema: testSchema(t), SchemaDelta: &SchemaDelta{Added: []int32{2}}})
	after := mustCommit(t, s, base, theirs)
	for _, read := range []*Manifest{base, after} {
		_, _, err := Commit(ctx, s, "t", read, ours, CommitOptions{})
		if !errors.Is(err, ErrRetryable) {
			t.Fatalf("schema change retried from v%d over a concurrent schema change: %v; want a retryable conflict", read.Version, err)
		}
	}
	// An append planned before an overwrite, retried on a handle past the overwrite.
	app := appendTxn(after, 3)
	ow := mustCommit(t, s, after, NewTransaction(after.Version, Operation{Kind: OpOverwrite, Schema: testSchema(t), NewFragments: []Fragment{frag(1)}}))
	if _, _, err := Commit(ctx, s, "t", ow, app, CommitOptions{}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("append retried on a handle past an overwrite: %v; want incompatible", err)
	}
	if h, _ := Head(ctx, s, "t"); h != ow.Version {
		t.Fatalf("HEAD %d, want %d", h, ow.Version)
	}
	// A handle older than the transaction's read version starts at the read version.
	app2 := appendTxn(ow, 2)
	m, _, err := Commit(ctx, s, "t", base, app2, CommitOptions{})
	if err != nil || m.Version != ow.Version+1 || m.LiveRows() != 3 {
		t.Fatalf("append planned on v%d retried from an older handle: %v, %v", ow.Version, m, err)
	}
}

// TestCommitChecksTombstones: expired versions still take part in conflict checks (their
// tombstones keep the transaction): a stale append behind an expired overwrite is
// incompatible, a stale delete behind an expired delete of the same rows is retryable.
func TestCommitChecksTombstones(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	ow := mustCommit(t, s, base, NewTransaction(base.Version, Operation{Kind: OpOverwrite, Schema: testSchema(t), NewFragments: []Fragment{frag(4)}}))
	head := mustCommit(t, s, ow, appendTxn(ow, 1))
	if err := Expire(ctx, s, ow); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Commit(ctx, s, "t", base, appendTxn(base, 2), CommitOptions{}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("append across an expired overwrite: %v; want incompatible", err)
	}
	d1 := deleteRows(t, s, head, ow.Fragments[0].ID, "d1", 1)
	d2 := deleteRows(t, s, head, ow.Fragments[0].ID, "d2", 1)
	v1 := mustCommit(t, s, head, d1)
	mustCommit(t, s, v1, appendTxn(v1, 1))
	if err := Expire(ctx, s, v1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Commit(ctx, s, "t", head, d2, CommitOptions{}); !errors.Is(err, ErrRetryable) {
		t.Fatalf("delete of the same row across an expired delete: %v; want retryable", err)
	}
}

// TestConflictIsDecidedByReadingForward: a delete rebased over a concurrent delete and
// landed; the version it rebased over then expired, so a retry can no longer merge and
// meets a conflict. It must still find its earlier attempt past the conflict.
func TestConflictIsDecidedByReadingForward(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	head := mustCommit(t, s, base, appendTxn(base, 10))
	f := head.Fragments[0].ID
	theirs := deleteRows(t, s, head, f, "theirs", 1)
	ours := deleteRows(t, s, head, f, "ours", 2)
	tv := mustCommit(t, s, head, theirs)
	ov, st, err := Commit(ctx, s, "t", head, ours, CommitOptions{})
	if err != nil || st.DeletionsMerged != 1 {
		t.Fatalf("rebase: %v, stats %+v", err, st)
	}
	if err := Expire(ctx, s, tv); err != nil {
		t.Fatal(err)
	}
	m, _, err := Commit(ctx, s, "t", head, ours, CommitOptions{})
	if err != nil || m.Version != ov.Version {
		t.Fatalf("retry after the rebased-over version expired: %v, %v; want the landed v%d", m, err, ov.Version)
	}
}

// TestLegacyTombstoneIsRetryable: a tombstone written before tombstones kept the
// transaction can only be recognised by id; a commit across it is a retryable conflict.
func TestLegacyTombstoneIsRetryable(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	v2 := mustCommit(t, s, base, appendTxn(base, 1))
	mustCommit(t, s, v2, appendTxn(v2, 1))
	b, err := frame(magicTombstone, tombstone{Table: "t", Version: 2, TxnID: v2.Txn.ID, ExpiredAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, v2.Key(), b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Commit(ctx, s, "t", base, appendTxn(base, 1), CommitOptions{}); !errors.Is(err, ErrRetryable) {
		t.Fatalf("commit across a legacy tombstone: %v; want retryable", err)
	}
	// Its own id is still recognised.
	if _, _, err := Commit(ctx, s, "t", base, v2.Txn, CommitOptions{}); !errors.Is(err, ErrLandedExpired) {
		t.Fatalf("retry of the transaction a legacy tombstone names: %v; want ErrLandedExpired", err)
	}
}

// TestAbortedTransactionErrorIsTyped: a transaction an abort version names is rejected
// with ErrTxnAborted (its files may be gone), whether it meets the abort as a manifest or
// as a tombstone.
func TestAbortedTransactionErrorIsTyped(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	zombie := appendTxn(base, 5)
	am := mustCommit(t, s, base, NewTransaction(base.Version, Operation{Kind: OpAbort, Aborted: []string{zombie.ID}}))
	_, _, err := Commit(ctx, s, "t", base, zombie, CommitOptions{})
	if !errors.Is(err, ErrTxnAborted) || !errors.Is(err, ErrIncompatible) {
		t.Fatalf("fenced: %v; want ErrTxnAborted", err)
	}
	next := mustCommit(t, s, am, appendTxn(am, 1))
	if err := Expire(ctx, s, am); err != nil {
		t.Fatal(err)
	}
	_, _, err = Commit(ctx, s, "t", next, zombie, CommitOptions{})
	if !errors.Is(err, ErrTxnAborted) {
		t.Fatalf("fenced by an expired abort: %v; want ErrTxnAborted", err)
	}
}

// TestIdempotencyKeyCommitsOnce (issue 8 item 8): two transactions with one idempotency
// key commit once: the second finds the first among the versions after its read version,
// or in the keys the version it builds on remembers, and gets *DuplicateError naming the
// first's version. The remembered keys are bounded by ConfigIdempotencyKeys.
func TestIdempotencyKeyCommitsOnce(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	first := appendTxn(base, 5)
	first.IdempotencyKey = "import:abc"
	second := appendTxn(base, 5) // planned on the same version: meets first in its walk
	second.IdempotencyKey = "import:abc"
	fm := mustCommit(t, s, base, first)
	_, _, err := Commit(ctx, s, "t", base, second, CommitOptions{})
	var de *DuplicateError
	if !errors.As(err, &de) || de.Version != fm.Version || de.TxnID != first.ID {
		t.Fatalf("second write with the key: %v; want *DuplicateError naming v%d", err, fm.Version)
	}
	// Planned after: the key is remembered by the version it builds on.
	head := mustCommit(t, s, fm, appendTxn(fm, 1))
	third := appendTxn(head, 5)
	third.IdempotencyKey = "import:abc"
	if _, _, err := Commit(ctx, s, "t", head, third, CommitOptions{}); !errors.As(err, &de) || de.Version != fm.Version {
		t.Fatalf("later write with the key: %v; want a duplicate of v%d", err, fm.Version)
	}
	// Its own retry is not a duplicate of itself.
	if m, _, err := Commit(ctx, s, "t", head, first, CommitOptions{}); err != nil || m.Version != fm.Version {
		t.Fatalf("retry of the first: %v %v", m, err)
	}
	// The memory is bounded.
	cfg := mustCommit(t, s, head, NewTransaction(head.Version, Operation{Kind: OpUpdateConfig, Config: map[string]string{ConfigIdempotencyKeys: "2"}}))
	m := cfg
	for i := 0; i < 3; i++ {
		txn := appendTxn(m, 1)
		txn.IdempotencyKey = fmt.Sprintf("k%d", i)
		m = mustCommit(t, s, m, txn)
	}
	if len(m.Idempotency) != 2 || m.Idempotency[0].Key != "k1" || m.Idempotency[1].Key != "k2" {
		t.Fatalf("remembered keys %+v, want k1 and k2", m.Idempotency)
	}
	old := appendTxn(m, 1)
	old.IdempotencyKey = "import:abc" // forgotten: commits
	if _, _, err := Commit(ctx, s, "t", m, old, CommitOptions{}); err != nil {
		t.Fatalf("a key no longer remembered: %v", err)
	}
}

// TestStaleIndexPreparation: an index prepared at a read version is rejected with
// ErrStalePreparation when a fragment it covers was removed or rewritten, or an index of
// the same name was committed meanwhile; appends and deletions of covered rows are fine.
func TestStaleIndexPreparation(t *testing.T) {
	ix := func(name string, frags ...uint32) *Transaction {
		t := NewTransaction(1, Operation{Kind: OpCreateIndex, NewIndexes: []Index{{Name: name, Fragments: frags}}})
		return &t
	}
	for _, tc := range []struct {
		theirs *Transaction
		stale  bool
	}{
		{&Transaction{ID: "d", Op: Operation{Kind: OpDelete, Deletions: []DeletionUpdate{{FragmentID: 1}}}}, false},
		{&Transaction{ID: "d", Op: Operation{Kind: OpDelete, Removed: []uint32{1}}}, true},
		{&Transaction{ID: "u", Op: Operation{Kind: OpUpdate, Removed: []uint32{2}}}, true},
		{&Transaction{ID: "u", Op: Operation{Kind: OpUpdate, Removed: []uint32{9}}}, false},
		{&Transaction{ID: "a", Op: Operation{Kind: OpAppend}}, false},
		{&Transaction{ID: "r", Op: Operation{Kind: OpRewrite, Groups: []RewriteGroup{{Old: []uint32{2, 3}}}}}, true},
		{ix("same"), true},
		{ix("other", 1), false},
	} {
		ours := ix("same", 1, 2)
		res, shared, reason := Check(ours, tc.theirs)
		err := error(nil)
		if res == Retryable {
			err = &ConflictError{Resolution: res, Ours: *ours, Theirs: *tc.theirs, Fragments: shared, Reason: reason}
		}
		if errors.Is(err, ErrStalePreparation) != tc.stale {
			t.Errorf("index after %s %+v: %v (%s); stale %v, want %v", tc.theirs.Op.Kind, tc.theirs.Op, res, reason, errors.Is(err, ErrStalePreparation), tc.stale)
		}
	}
}
