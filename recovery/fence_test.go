package recovery

import (
	"context"
	"errors"
	"testing"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
)

// TestRollBackFencesTheOperation: after a roll back, a late commit of the operation's
// transaction (a process that lost its hold but still had its commit in flight) fails on
// the abort version instead of committing a version whose files were deleted; the abort
// is published when nothing unpublished lies below it, and a second recovery adds no
// second fence.
func TestRollBackFencesTheOperation(t *testing.T) {
	ctx := context.Background()
	s, db, sc := crashedCompaction(t, "manifest.before_version_put")
	before := rowsOf(t, db, "t")
	headBefore, err := manifest.Head(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack || rep.Outcomes[0].Fence != headBefore+1 {
		t.Fatalf("recover: %+v, %v; want rolled back with a fence at version %d", rep, err, headBefore+1)
	}
	p, _, err := db.Catalog().Get(ctx, "t")
	if err != nil || p.Version != headBefore+1 {
		t.Fatalf("pointer %+v, %v; want the fence %d published", p, err, headBefore+1)
	}
	// The zombie: the operation's transaction, planned on its read version, commits late.
	a := sc.Attempts[len(sc.Attempts)-1]
	read, err := manifest.Load(ctx, s, "t", a.ReadVersion)
	if err != nil {
		t.Fatal(err)
	}
	zombie := manifest.NewTransaction(a.ReadVersion, manifest.Operation{Kind: manifest.OpAppend, NewFragments: read.Fragments[:1]})
	zombie.ID = a.TxnID
	if _, _, err := manifest.Commit(ctx, s, "t", read, zombie, manifest.CommitOptions{}); !errors.Is(err, manifest.ErrIncompatible) {
		t.Fatalf("late commit of a rolled-back transaction: %v, want an incompatible conflict", err)
	}
	if h, _ := manifest.Head(ctx, s, "t"); h != headBefore+1 {
		t.Fatalf("HEAD %d after the late commit, want %d", h, headBefore+1)
	}
	equalRows(t, rowsOf(t, db, "t"), before)
	if rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1}); err != nil || len(rep.Outcomes) != 0 {
		t.Fatalf("second recover: %+v, %v", rep, err)
	}
}

// TestFenceLosesToLateCommit: when the operation's transaction lands while recovery is
// fencing it, the fence fails on that version and recovery rolls the operation forward
// instead (never both a landed transaction and its fence).
func TestFenceLosesToLateCommit(t *testing.T) {
	ctx := context.Background()
	s, db, sc := crashedCompaction(t, "manifest.before_version_put")
	a := sc.Attempts[len(sc.Attempts)-1]
	read, err := manifest.Load(ctx, s, "t", a.ReadVersion)
	if err != nil {
		t.Fatal(err)
	}
	var zombieVersion uint64
	// The fence's own commit passes manifest.before_version_put: the zombie lands there,
	// just before the fence's put.
	off := failpoint.Enable("manifest.before_version_put", failpoint.Call(func(ctx context.Context) error {
		zombie := manifest.NewTransaction(a.ReadVersion, manifest.Operation{Kind: manifest.OpAppend, NewFragments: read.Fragments[:1]})
		zombie.ID = a.TxnID
		m, _, err := manifest.Commit(ctx, s, "t", read, zombie, manifest.CommitOptions{})
		if err != nil {
			return err
		}
		zombieVersion = m.Version
		return nil
	}).Once())
	defer off()
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	off()
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledForward || rep.Outcomes[0].Version != zombieVersion || zombieVersion == 0 {
		t.Fatalf("recover racing a late commit: %+v, %v; want rolled forward to the late version %d", rep, err, zombieVersion)
	}
	head, err := manifest.LoadHead(ctx, s, "t")
	if err != nil || head.Version != zombieVersion || head.Txn.ID != a.TxnID {
		t.Fatalf("HEAD %+v, %v; want the late commit, and no fence above it", head, err)
	}
}
