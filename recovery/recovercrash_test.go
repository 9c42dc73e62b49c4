package recovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// recoverCrashes: a compaction child is killed at prep (leaving a sidecar to roll forward
// or back), then a Recover child is killed at seam; a fresh Recover must finish with
// action.
var recoverCrashes = []struct {
	prep, seam, action string
}{
	{"compaction.before_publish", "recovery.after_claim", RolledForward},
	{"compaction.before_publish", "recovery.after_publish", AlreadyPublished},
	{"compaction.before_publish", "recovery.before_sidecar_delete", AlreadyPublished},
	{"manifest.before_version_put", "recovery.after_claim", RolledBack},
	{"manifest.before_version_put", "recovery.after_fence", RolledBack},
	{"manifest.before_version_put", "recovery.mid_delete", RolledBack},
	{"manifest.before_version_put", "recovery.before_sidecar_delete", RolledBack},
}

// TestRecoverCrashAtEverySeam kills Recover itself (SIGKILL, in a child process) at each
// of its seams, after a compaction killed where it leaves a landed or an unlanded
// sidecar. The dead recovery's claim makes a fresh Recover skip the sidecar until the
// claim is stale (ClaimTTL overridden to 1 ms here); then it finishes the sidecar, and
// the table verifies clean, holds the pre-compaction rows, is published at HEAD, has no
// sidecar, claim or unreferenced data file left, and a second Recover does nothing.
func TestRecoverCrashAtEverySeam(t *testing.T) {
	var names []string
	for _, c := range recoverCrashes {
		names = append(names, c.prep+"→"+c.seam)
	}
	t.Logf("recover crash seams (%d): %s", len(names), strings.Join(names, ", "))
	ran := 0
	for _, c := range recoverCrashes {
		t.Run(c.prep+"/"+c.seam, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Local(t)
			db := openDB(t, s)
			const table = "t"
			// 6 × 400 rows with a 1000-row target: three output files, so a kill after
			// the first delete is in the middle of the roll back.
			makeTable(t, db, table, 6, 400)
			before := rowsOf(t, db, table)
			if !runChild(t, s, table, c.prep) {
				t.Fatalf("compaction was not killed at %s", c.prep)
			}
			expireHolds(t, db, table)
			if !runChild(t, s, table, c.seam, "CHILD_MODE=recover") {
				t.Fatalf("recover was not killed at %s", c.seam)
			}
			pending, err := Pending(ctx, s, table)
			if err != nil || len(pending) != 1 {
				t.Fatalf("after the recover kill: sidecars %v, %v; want one", pending, err)
			}
			id := strings.TrimSuffix(strings.TrimPrefix(pending[0], Dir), ".json")
			if _, err := s.Head(ctx, claimKey(id)); err != nil {
				t.Fatalf("the killed recovery's claim %s: %v", claimKey(id), err)
			}
			// The claim is fresh: a recovery that respects it leaves the sidecar alone.
			rep, err := Recover(ctx, s, db.Catalog(), table, Options{MinAge: -1})
			if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != SkippedClaimed {
				t.Fatalf("recover with a fresh claim: %+v, %v; want %s", rep, err, SkippedClaimed)
			}
			rep, err = Recover(ctx, s, db.Catalog(), table, Options{MinAge: -1, ClaimTTL: time.Millisecond})
			if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != c.action {
				t.Fatalf("recover after the kill: %+v, %v; want %s", rep, err, c.action)
			}
			checkRecovered(t, s, db, table, before)
			head, err := manifest.LoadHead(ctx, s, table)
			if err != nil {
				t.Fatal(err)
			}
			if c.action == RolledBack && head.Txn.Op.Kind != manifest.OpAbort {
				t.Fatalf("HEAD v%d is a %s after a roll back, want the abort fencing the operation", head.Version, head.Txn.Op.Kind)
			}
			if rewrote := head.Txn.Op.Kind == manifest.OpRewrite; rewrote != (c.action != RolledBack) {
				t.Fatalf("HEAD v%d is a %s after %s", head.Version, head.Txn.Op.Kind, c.action)
			}
			rep2, err := Recover(ctx, s, db.Catalog(), "", Options{MinAge: -1, ClaimTTL: time.Millisecond})
			if err != nil || len(rep2.Outcomes) != 0 {
				t.Fatalf("second recover: %+v, %v", rep2, err)
			}
			t.Logf("%s → %s: %s, %d file(s) deleted", c.prep, c.seam, rep.Outcomes[0].Action, len(rep.Outcomes[0].DeletedFiles))
			ran++
		})
	}
	t.Logf("recover crash seams run: %d of %d", ran, len(recoverCrashes))
	if ran != len(recoverCrashes) {
		t.Fail()
	}
}

// TestClaimReleaseKeepsSuccessorsClaim: a recovery whose stale claim was taken over does
// not delete its successor's claim when it finishes; a fresh claim is respected and a
// stale one is taken over.
func TestClaimReleaseKeepsSuccessorsClaim(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	slow := &recoverer{s: s, opts: Options{ClaimTTL: time.Millisecond}}
	release, ok, err := slow.claim(ctx, "op")
	if err != nil || !ok {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var next func()
	for {
		// A successor takes the claim over once it is older than ClaimTTL.
		if next, ok, err = slow.claim(ctx, "op"); err != nil || ok || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !ok {
		t.Fatalf("take over a stale claim: %v %v", ok, err)
	}
	release() // the slow one finishes late
	if _, err := s.Head(ctx, claimKey("op")); err != nil {
		t.Fatalf("the successor's claim was deleted: %v", err)
	}
	fresh := &recoverer{s: s, opts: Options{ClaimTTL: time.Hour}}
	if _, ok, err := fresh.claim(ctx, "op"); err != nil || ok {
		t.Fatalf("a fresh claim was not respected: %v %v", ok, err)
	}
	next()
	if _, err := s.Head(ctx, claimKey("op")); err == nil {
		t.Fatal("the successor's release left its claim")
	}
}

// TestWriterKilledInRollForward: a writer whose first-write hook (RollForward) is
// SIGKILLed at each recovery seam, after a compaction died between commit and publish,
// does not block the next writer: that one's hook skips the dead claim (or finds nothing
// left), its append commits and publishes on top of the compaction; Recover then clears
// what is left, and the table holds the pre-compaction rows plus the one append.
func TestWriterKilledInRollForward(t *testing.T) {
	seams := []string{"recovery.after_claim", "recovery.after_publish", "recovery.before_sidecar_delete"}
	t.Logf("roll-forward hook crash seams (%d): %s", len(seams), strings.Join(seams, ", "))
	ran := 0
	for _, seam := range seams {
		t.Run(seam, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Local(t)
			db := openDB(t, s)
			const table = "t"
			makeTable(t, db, table, 6, 50)
			want := append(rowsOf(t, db, table), "999999|x")
			if !runChild(t, s, table, "compaction.before_publish") {
				t.Fatal("compaction was not killed")
			}
			expireHolds(t, db, table)
			compacted, err := manifest.Head(ctx, s, table)
			if err != nil {
				t.Fatal(err)
			}
			if !runChild(t, s, table, seam, "CHILD_MODE=write") {
				t.Fatalf("writer was not killed at %s", seam)
			}
			if h, err := manifest.Head(ctx, s, table); err != nil || h != compacted {
				t.Fatalf("HEAD %d after the killed writer, want %d (it died before its commit): %v", h, compacted, err)
			}
			if runChild(t, s, table, "", "CHILD_MODE=write") {
				t.Fatal("the second writer was killed")
			}
			head, err := manifest.LoadHead(ctx, s, table)
			if err != nil || head.Version != compacted+1 || head.Txn.Op.Kind != manifest.OpAppend {
				t.Fatalf("HEAD after the second writer: %v, want the append at %d", err, compacted+1)
			}
			rep, err := Recover(ctx, s, db.Catalog(), table, Options{MinAge: -1, ClaimTTL: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range rep.Outcomes {
				if o.Action != AlreadyPublished {
					t.Fatalf("recover: %+v, want nothing or %s", rep, AlreadyPublished)
				}
			}
			// The killed writer's one data file was held for its commit (AppendRecord
			// stages its last file with the transaction record: docs/architecture.md), and
			// the hook runs before the commit: it stored nothing, so nothing is left for GC.
			if orphans := unreferenced(t, s, table); len(orphans) != 0 {
				t.Fatalf("unreferenced data files %v, want none (the killed writer died before its commit stored its file)", orphans)
			}
			checkRecovered(t, s, db, table, want)
			t.Logf("%s: then recover %+v", seam, rep.Outcomes)
			ran++
		})
	}
	t.Logf("roll-forward hook crash seams run: %d of %d", ran, len(seams))
	if ran != len(seams) {
		t.Fail()
	}
}

// unreferenced lists table's data files that no version references.
func unreferenced(t *testing.T, s store.Store, table string) []string {
	t.Helper()
	ctx := context.Background()
	head, err := manifest.Head(ctx, s, table)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	for v := uint64(1); v <= head; v++ {
		m, err := manifest.Load(ctx, s, table, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Fragments {
			for _, df := range f.Files {
				refs[df.Key] = true
			}
		}
	}
	files, err := s.List(ctx, manifest.DataDir(table)+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range files {
		if !refs[o.Key] {
			out = append(out, o.Key)
		}
	}
	return out
}
