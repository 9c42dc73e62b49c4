package recovery

import (
	"context"
	"errors"
	"strings"
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

// TestFenceIsPlannedOnTheScannedHead (issue 8 item 2): recovery scans the versions up to
// HEAD, finds nothing of the operation's, and fences it. If the operation's transaction
// (a process that lost its hold, its commit in flight) lands between that scan and the
// fence, the fence must meet it: it is planned on the version the scan read last, so its
// commit checks the late version, fails, and recovery rolls forward instead of deleting
// the files of a landed and published version.
func TestFenceIsPlannedOnTheScannedHead(t *testing.T) {
	ctx := context.Background()
	s, db, sc := crashedCompaction(t, "manifest.before_version_put")
	a := sc.Attempts[len(sc.Attempts)-1]
	// The killed compaction wrote its transaction record before its manifest put: that is
	// the commit a paused process would still send.
	recs, err := s.List(ctx, manifest.TxnDir("t"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var zombie manifest.Transaction
	for _, o := range recs {
		if strings.HasSuffix(o.Key, "-"+a.TxnID+".txn") {
			b, err := s.Get(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			if _, zombie, err = manifest.DecodeTransaction("t", o.Key, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if zombie.ID != a.TxnID || zombie.Op.Kind != manifest.OpRewrite {
		t.Fatalf("no transaction record of the killed attempt %s", a.TxnID)
	}
	read, err := manifest.Load(ctx, s, "t", zombie.ReadVersion)
	if err != nil {
		t.Fatal(err)
	}
	var late uint64
	defer failpoint.Enable("recovery.before_fence", failpoint.Call(func(ctx context.Context) error {
		m, _, err := manifest.Commit(ctx, s, "t", read, zombie, manifest.CommitOptions{})
		if err != nil {
			return err
		}
		late = m.Version
		return nil
	}).Once())()
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || late == 0 || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledForward || rep.Outcomes[0].Version != late {
		t.Fatalf("recover with a late commit before its fence: %+v, %v; want rolled forward to v%d", rep, err, late)
	}
	head, err := manifest.LoadHead(ctx, s, "t")
	if err != nil || head.Version != late {
		t.Fatalf("HEAD %v, %v; want the late commit v%d and no abort above it", head, err, late)
	}
	for _, f := range head.Fragments {
		for _, df := range f.Files {
			if _, err := s.Head(ctx, df.Key); err != nil {
				t.Fatalf("HEAD v%d references %s: %v", head.Version, df.Key, err)
			}
		}
	}
	rowsOf(t, db, "t") // readable
}
