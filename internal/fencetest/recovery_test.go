package fencetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// waitKilled waits for a child armed to kill itself at a seam to die of SIGKILL.
func (c *started) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case err := <-c.done:
		var ee *exec.ExitError
		if ws, ok := exitStatus(err, &ee); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child: %v, want killed at its seam\n%s", err, c.out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("child did not finish:\n%s", c.out)
	}
}

func exitStatus(err error, ee **exec.ExitError) (syscall.WaitStatus, bool) {
	if !errors.As(err, ee) {
		return 0, false
	}
	ws, ok := (*ee).Sys().(syscall.WaitStatus)
	return ws, ok
}

// TestRecoveryFenceMeetsLateCommitFromPausedProcess (issue 8 item 2): a compaction in
// another process was killed at its manifest put, leaving its sidecar and the transaction
// record of its attempt; a third process still holds that commit in flight (it sends the
// same transaction, as a compaction whose hold ran out mid-commit would) and is paused
// with SIGSTOP just before its manifest put. Recovery scans the versions, finds nothing of
// the operation's, and before it fences the operation the paused process is resumed
// (SIGCONT) and its commit lands and is published. The fence is planned on the version
// the scan read last, so it meets the late commit and fails; recovery must then roll the
// operation forward, not commit its abort on top and delete the files of a landed,
// published version.
func TestRecoveryFenceMeetsLateCommitFromPausedProcess(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t)
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 3; i++ { // small fragments to compact
		rec := batch(100*i, 100*i+10)
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	before := enginetest.Rows(t, checkSound(t, s, db, "t"))
	startChild(t, s, "compact", "t", failpoint.EnvVar+"=manifest.before_version_put=kill").waitKilled(t)
	enginetest.ExpireHolds(t, db, "t") // the killed compaction's lease, as etcd would expire it
	keys, err := recovery.Pending(ctx, s, "t")
	if err != nil || len(keys) != 1 {
		t.Fatalf("sidecars %v, %v; want the killed compaction's", keys, err)
	}
	b, err := s.Get(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	sc, err := recovery.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	txnID := sc.Attempts[len(sc.Attempts)-1].TxnID
	var record string
	for _, k := range txnRecords(t, s, "t") {
		if strings.HasSuffix(k, "-"+txnID+".txn") {
			record = k
		}
	}
	if record == "" {
		t.Fatalf("no transaction record of the killed attempt %s", txnID)
	}
	dir := t.TempDir()
	ready, gate := filepath.Join(dir, "ready"), filepath.Join(dir, "gate")
	late := startChild(t, s, "commit", "t", "TXN_KEY="+record, "READY="+ready, "GATE="+gate)
	waitFor(t, 30*time.Second, "the late committer at its manifest put", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	if err := late.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var landed result
	defer failpoint.Enable("recovery.before_fence", failpoint.Call(func(context.Context) error {
		// Between recovery's scan and its fence: the paused commit resumes and lands.
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			return err
		}
		if err := late.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			return err
		}
		landed = late.wait(t)
		return nil
	}).Once())()
	rep, err := recovery.Recover(ctx, s, db.Catalog(), "t", recovery.Options{MinAge: -1})
	if landed.Outcome != engine.Committed.String() || landed.Version == 0 {
		t.Fatalf("the late commit: %+v; want it committed between recovery's scan and its fence", landed)
	}
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Version != landed.Version ||
		(rep.Outcomes[0].Action != recovery.RolledForward && rep.Outcomes[0].Action != recovery.AlreadyPublished) {
		t.Fatalf("recover: %+v, %v; want the operation rolled forward to the late commit v%d", rep, err, landed.Version)
	}
	if head, err := manifest.LoadHead(ctx, s, "t"); err != nil || head.Version != landed.Version || head.Txn.ID != txnID {
		t.Fatalf("HEAD %v, %v; want the late commit v%d and no abort above it", head, err, landed.Version)
	}
	if after := enginetest.Rows(t, checkSound(t, s, db, "t")); !slices.Equal(after, before) {
		t.Fatalf("rows changed: %d before, %d after", len(before), len(after))
	}
}

// TestPinInAnotherProcessSurvivesGCRuns (issue 8 item 5): a reader in another process
// pins version 4 while a garbage collection run is between planning (it has read the
// holds) and expiring versions; later runs follow. Every file of version 4 must survive
// them all for as long as the pin lives: the reader then scans every row of it. Version
// 5 overwrites the table, so only retained versions at or below 4 name those files.
func TestPinInAnotherProcessSurvivesGCRuns(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t) // v1 create, v2 ids 0..49
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rec := batch(100, 110)
	if _, err := tbl.AppendRecord(ctx, rec); err != nil { // v3
		t.Fatal(err)
	}
	rec.Release()
	if _, err := tbl.Delete(ctx, "id < 5"); err != nil { // v4: a deletion vector
		t.Fatal(err)
	}
	if tbl.Version() != 4 {
		t.Fatalf("version %d, want 4", tbl.Version())
	}
	want := int64(len(enginetest.Rows(t, tbl)))
	rec = batch(500, 510)
	rdr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if _, err := tbl.Overwrite(ctx, rdr); err != nil { // v5: nothing of v4 is referenced above it
		t.Fatal(err)
	}
	rdr.Release()
	rec.Release()
	dir := t.TempDir()
	ready, gate := filepath.Join(dir, "ready"), filepath.Join(dir, "gate")
	var reader *started
	off := failpoint.Enable("gc.after_plan", failpoint.Call(func(context.Context) error {
		reader = startChild(t, s, "pin", "t", "VERSION=4", "READY="+ready, "GATE="+gate)
		waitFor(t, 30*time.Second, "the reader's pin", func() bool {
			_, err := os.Stat(ready)
			return err == nil
		})
		return nil
	}).Once())
	for run := 1; run <= 3; run++ {
		rep, err := gc.Run(ctx, s, db.Catalog(), "t", gc.Policy{KeepLast: 1, GracePeriod: -1})
		if err != nil {
			t.Fatal(err)
		}
		tr := rep.Tables[0]
		t.Logf("gc run %d: expired %v, restored %v, retained %v, deleted %d objects", run, tr.Expired, tr.Restored, tr.Retained, len(tr.Deleted))
		if run == 1 {
			off()
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := reader.wait(t); r.Err != "" || r.Rows != want {
		t.Fatalf("the reader's scan of pinned version 4 after three gc runs: %+v; want %d rows", r, want)
	}
	// Released (the reader exited), the version expires and its files go.
	rep, err := gc.Run(ctx, s, db.Catalog(), "t", gc.Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil || !slices.Contains(rep.Tables[0].Expired, 4) {
		t.Fatalf("after the pin's release: %+v, %v; want version 4 expired", rep.Tables[0].Expired, err)
	}
	checkSound(t, s, db, "t")
}

// TestOrphanedClaimOfKilledRecoveryIsCollected (issue 8 item 11): a recovery in another
// process resolves a crashed compaction's sidecar and is killed (SIGKILL at a seam)
// after deleting the sidecar and before releasing its claim. Nothing will ever look at
// that claim again (recovery claims only sidecars it lists): garbage collection deletes
// it once it is older than the claim TTL, and keeps it while younger.
func TestOrphanedClaimOfKilledRecoveryIsCollected(t *testing.T) {
	ctx := context.Background()
	s, db := setup(t)
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 3; i++ {
		rec := batch(100*i, 100*i+10)
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	startChild(t, s, "compact", "t", failpoint.EnvVar+"=manifest.before_version_put=kill").waitKilled(t)
	enginetest.ExpireHolds(t, db, "t")
	keys, err := recovery.Pending(ctx, s, "t")
	if err != nil || len(keys) != 1 {
		t.Fatalf("sidecars %v, %v; want the killed compaction's", keys, err)
	}
	claim := strings.TrimSuffix(keys[0], ".json") + ".claim"
	startChild(t, s, "recover", "t", failpoint.EnvVar+"=recovery.after_sidecar_delete=kill").waitKilled(t)
	if _, err := s.Head(ctx, keys[0]); err == nil {
		t.Fatalf("the killed recovery left its sidecar %s", keys[0])
	}
	if _, err := s.Head(ctx, claim); err != nil {
		t.Fatalf("the killed recovery's claim %s: %v (the test needs it left behind)", claim, err)
	}
	if rep, err := recovery.Recover(ctx, s, db.Catalog(), "", recovery.Options{MinAge: -1}); err != nil || len(rep.Outcomes) != 0 {
		t.Fatalf("recover after the killed one: %+v, %v; want nothing to do", rep, err)
	}
	young, err := gc.RunWithRecover(ctx, s, db.Catalog(), "", gc.Policy{GracePeriod: -1}, recovery.Options{MinAge: -1})
	if err != nil || len(young.OrphanClaims) != 0 || young.OrphanClaimsKept != 1 {
		t.Fatalf("gc with the default claim TTL: orphans %v, kept %d, %v; want the young claim kept", young.OrphanClaims, young.OrphanClaimsKept, err)
	}
	rep, err := gc.RunWithRecover(ctx, s, db.Catalog(), "", gc.Policy{GracePeriod: -1}, recovery.Options{MinAge: -1, ClaimTTL: time.Nanosecond})
	if err != nil || len(rep.OrphanClaims) != 1 || rep.OrphanClaims[0].Key != claim {
		t.Fatalf("gc past the claim TTL: orphans %v, %v; want %s", rep.OrphanClaims, err, claim)
	}
	if _, err := s.Head(ctx, claim); err == nil {
		t.Fatalf("gc reported %s collected, but it is still there", claim)
	}
	checkSound(t, s, db, "t")
}
