package recovery

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
)

// crashSeams are the seams a compaction run with sidecars passes, in order, and what
// Recover must do after a SIGKILL there.
var crashSeams = []struct {
	seam    string
	action  string // "" = no sidecar to resolve
	deletes bool   // the roll back deletes data files
}{
	{"compaction.before_sidecar", "", false},
	{"compaction.after_sidecar", RolledBack, false},
	{"manifest.before_txn_put", RolledBack, true},
	{"manifest.before_version_put", RolledBack, true},
	{"manifest.after_version_put", RolledForward, false},
	{"compaction.after_commit", RolledForward, false},
	{"compaction.before_publish", RolledForward, false},
	{"compaction.after_publish", AlreadyPublished, false},
	{"compaction.before_sidecar_delete", AlreadyPublished, false},
}

// runChild compacts table (or with env CHILD_MODE=recover, recovers it) in a child
// process killed at seam ("" = not killed) and reports whether SIGKILL ended it.
func runChild(t *testing.T, s store.Store, table, seam string, env ...string) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=1", "TABLE="+table), enginetest.ChildEnv(s)...)
	cmd.Env = append(cmd.Env, env...)
	if seam != "" {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+seam+"=kill")
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		t.Fatalf("child (seam %q): %v\n%s", seam, err, out)
	}
	return false
}

// TestCrashAtEverySeam kills a compacting child process at each seam, then checks that
// Recover leaves a table that verifies clean, holds the pre-compaction rows, is
// published at HEAD, has no sidecar left, and that a second Recover does nothing.
func TestCrashAtEverySeam(t *testing.T) {
	var names []string
	for _, c := range crashSeams {
		names = append(names, c.seam)
	}
	t.Logf("crash seams (%d): %s", len(names), strings.Join(names, ", "))
	ran := 0
	for _, c := range crashSeams {
		t.Run(c.seam, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Local(t)
			db := openDB(t, s)
			const table = "t"
			makeTable(t, db, table, 6, 50)
			before := rowsOf(t, db, table)
			if !runChild(t, s, table, c.seam) {
				t.Fatalf("child was not killed at %s", c.seam)
			}
			expireHolds(t, db, table)
			pending, err := Pending(ctx, s, "")
			if err != nil {
				t.Fatal(err)
			}
			if want := c.action != ""; (len(pending) == 1) != want || len(pending) > 1 {
				t.Fatalf("after kill at %s: sidecars %v, want one: %v", c.seam, pending, want)
			}
			rep, err := Recover(ctx, s, db.Catalog(), "", Options{MinAge: -1})
			if err != nil {
				t.Fatalf("recover: %v (%+v)", err, rep)
			}
			switch {
			case c.action == "" && len(rep.Outcomes) != 0:
				t.Fatalf("recover acted without a sidecar: %+v", rep)
			case c.action != "" && (len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != c.action):
				t.Fatalf("recover: %+v, want one %s", rep, c.action)
			case c.action != "" && c.deletes != (len(rep.Outcomes[0].DeletedFiles) > 0):
				t.Fatalf("recover deleted %v, want deletions: %v", rep.Outcomes[0].DeletedFiles, c.deletes)
			}
			checkRecovered(t, s, db, table, before)
			if c.action == RolledForward || c.action == AlreadyPublished {
				if m, err := manifest.LoadHead(ctx, s, table); err != nil || m.Txn.Op.Kind != manifest.OpRewrite {
					t.Fatalf("HEAD is not the compaction: %v", err)
				}
			}
			rep2, err := Recover(ctx, s, db.Catalog(), "", Options{MinAge: -1})
			if err != nil || len(rep2.Outcomes) != 0 {
				t.Fatalf("second recover: %+v, %v", rep2, err)
			}
			t.Logf("%s: %+v", c.seam, rep.Outcomes)
			ran++
		})
	}
	t.Logf("crash seams run: %d of %d", ran, len(crashSeams))
}

// checkRecovered: verify finds no fault, the rows are before, published = HEAD, no
// sidecar or claim is left, and every data file is referenced by some version.
func checkRecovered(t *testing.T, s store.Store, db *engine.DB, table string, before []string) {
	t.Helper()
	ctx := context.Background()
	vr, err := verify.Table(ctx, s, db.Catalog(), table, verify.Options{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify: %v", vr.Err())
	}
	equalRows(t, rowsOf(t, db, table), before)
	head, err := manifest.Head(ctx, s, table)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := db.Catalog().Get(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != head {
		t.Fatalf("published %d, HEAD %d", p.Version, head)
	}
	if left, err := s.List(ctx, Dir, 0); err != nil || len(left) != 0 {
		t.Fatalf("left under %s: %v %v", Dir, left, err)
	}
	if un := unreferenced(t, s, table); len(un) > 0 {
		t.Fatalf("data files referenced by no version: %v", un)
	}
}

func equalRows(t testing.TB, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("rows differ: %d rows, want %d (first got %q)", len(got), len(want), got[:min(3, len(got))])
	}
}
