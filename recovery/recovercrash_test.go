package recovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
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
