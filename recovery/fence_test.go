package recovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
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

// TestSidecarOfDroppedTable (issue 8 item 10): a compaction that crashed before or after
// its commit leaves a sidecar; the table is then dropped (and created again, or not).
// Recover rolls the operation back without a fence (the drop marker fences it) and
// deletes its files and sidecar; it never publishes the crashed operation's version,
// never brings a dropped table's pointer back and never touches the new incarnation.
// RollForward (the hook run before a table's first write) leaves such a sidecar.
func TestSidecarOfDroppedTable(t *testing.T) {
	for _, seam := range []string{"manifest.before_version_put", "compaction.after_commit"} {
		for _, recreate := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/recreate=%v", seam, recreate), func(t *testing.T) {
				ctx := context.Background()
				s, db, sc := crashedCompaction(t, seam)
				if _, err := db.DropTable(ctx, "t"); err != nil {
					t.Fatal(err)
				}
				var again *engine.Table
				if recreate {
					var err error
					if again, err = db.CreateTable(ctx, "t", arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)); err != nil {
						t.Fatal(err)
					}
				}
				if rep, err := RollForward(ctx, s, db.Catalog(), "t", Options{}); err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != NotLanded {
					t.Fatalf("roll forward: %+v %v, want the sidecar left (not landed)", rep, err)
				}
				rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
				if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack || rep.Outcomes[0].Fence != 0 {
					t.Fatalf("recover: %+v %v, want rolled back without a fence", rep, err)
				}
				if keys, err := Pending(ctx, s, "t"); err != nil || len(keys) != 0 {
					t.Fatalf("sidecars left: %v %v", keys, err)
				}
				for _, a := range sc.Attempts {
					if objs, err := s.List(ctx, a.DataPrefix, 0); err != nil || len(objs) != 0 {
						t.Fatalf("files left under %s: %v %v", a.DataPrefix, objs, err)
					}
				}
				p, _, err := db.Catalog().Get(ctx, "t")
				switch {
				case !recreate && !errors.Is(err, catalog.ErrNoPointer):
					t.Fatalf("pointer of the dropped table: %+v %v", p, err)
				case recreate && (err != nil || p.Version != again.Version()):
					t.Fatalf("pointer %+v %v, want the new incarnation's version %d", p, err, again.Version())
				}
				if h, _ := manifest.Head(ctx, s, "t"); recreate && h != again.Version() {
					t.Fatalf("HEAD %d, want %d (recovery committed on the new table)", h, again.Version())
				}
			})
		}
	}
}
