package gc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// childCmd re-executes the test binary in mode with env added.
func childCmd(s store.Store, mode, table string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode, "TABLE="+table), enginetest.ChildEnv(s)...)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

// TestCrashAtEverySeam runs GC in a child process killed (SIGKILL) at each seam. After
// each kill: recovery.Recover and verify (every version, gaps allowed) pass, every
// version still present has its pre-GC rows, and a second GC finishes the job (the disk
// then holds exactly what the retained versions need).
func TestCrashAtEverySeam(t *testing.T) {
	t.Logf("gc crash seams (%d): %s", len(Seams), strings.Join(Seams, ", "))
	ran := 0
	for _, seam := range Seams {
		t.Run(seam, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Local(t)
			db := openDB(t, s)
			history(t, db)
			before := allRows(t, db, "t")
			garbage(t, s, "OLD", 2*time.Hour)

			out, err := childCmd(s, "gc", "t", "KEEP_LAST=3", failpoint.EnvVar+"="+seam+"=kill").CombinedOutput()
			if !killedBySIGKILL(err) {
				t.Fatalf("child was not killed at %s: %v\n%s", seam, err, out)
			}
			vs, err := manifest.Versions(ctx, s, "t")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: versions left after the kill: %v", seam, vs)
			if _, err := recovery.Recover(ctx, s, db.Catalog(), "", recovery.Options{MinAge: -1}); err != nil {
				t.Fatal(err)
			}
			checkRetained(t, db, "t", before)

			rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 3, GracePeriod: -1})
			if err != nil {
				t.Fatal(err)
			}
			// Retained: the newest three. Version 12 is the abort fencing the planted
			// writer's files: committed by the killed run (then retained here) or by
			// this one (then after it planned).
			tr := rep.Tables[0]
			if r := tr.Retained; !slices.Equal(r, []uint64{10, 11, 12}) && !(slices.Equal(r, []uint64{9, 10, 11}) && tr.Fence == 12) {
				t.Fatalf("second gc retained %v (fence %d), want 10..12 or 9..11 and the fence at 12", r, tr.Fence)
			}
			checkRetained(t, db, "t", before)
			checkDiskIsNeeded(t, s, nil, "t")
			ran++
		})
	}
	t.Logf("gc crash seams run: %d of %d", ran, len(Seams))
	if ran != len(Seams) {
		t.Fatalf("ran %d of %d seams", ran, len(Seams))
	}
}

// TestCompactionInOtherProcessSurvivesGC: a compaction in another process has written
// its data files and waits just before its commit loop while two appends are published
// past its read version. A GC with no grace period and keep-last 1 runs meanwhile: the
// compaction's hold keeps its read version (the low watermark) and its files (written
// after the hold started; with sidecars also under the sidecar's prefix). Then the
// compaction commits (rebasing over the appends) and publishes, and the table verifies
// with every row.
func TestCompactionInOtherProcessSurvivesGC(t *testing.T) {
	for _, sidecars := range []bool{true, false} {
		t.Run("sidecars="+strconv.FormatBool(sidecars), func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Local(t)
			db := openDB(t, s)
			tbl := makeTable(t, db, "t", 6, 50)
			dir := t.TempDir()
			mark, goFile := filepath.Join(dir, "mark"), filepath.Join(dir, "go")
			env := []string{"MARK=" + mark, "GO=" + goFile}
			if sidecars {
				env = append(env, "SIDECARS=1")
			}
			cmd := childCmd(s, "compact", "t", env...)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
					<-done
				}
			})
			if err := waitFile(ctx, mark, 60*time.Second); err != nil {
				t.Fatalf("%v; child: %s", err, out.String())
			}
			// The child writes the mark with one write(2); wait for its content too.
			var read uint64
			for deadline := time.Now().Add(10 * time.Second); ; {
				b, _ := os.ReadFile(mark)
				if v, err := strconv.ParseUint(string(b), 10, 64); err == nil {
					read = v
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("mark %s holds %q", mark, b)
				}
				time.Sleep(time.Millisecond)
			}
			filesBefore := diskFiles(t, s)

			// Move the published version past the compaction's read version.
			appendRows(t, tbl, 1000, 10)
			appendRows(t, tbl, 2000, 10)
			want := scanRows(t, tbl)

			rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
			if err != nil {
				t.Fatal(err)
			}
			tr := rep.Tables[0]
			t.Logf("gc while compacting at v%d: holds %+v, low %d, expired %v, deleted %d, sidecars %d, recovered %+v",
				read, tr.Holds, tr.LowWatermark, tr.Expired, len(tr.Deleted), tr.Sidecars, rep.Recovered)
			if !tr.HasLow || tr.LowWatermark != read || len(tr.Holds) != 1 || tr.Holds[0].Kind != "compaction" {
				t.Fatalf("gc did not see the compaction's hold at %d: %+v", read, tr)
			}
			if tr.Floor != read || !slices.Contains(tr.Retained, read) {
				t.Fatalf("read version %d not retained: %+v", read, tr)
			}
			if sidecars && tr.Sidecars != 1 {
				t.Fatalf("pending sidecars %d, want 1", tr.Sidecars)
			}
			for _, f := range tr.Deleted {
				if _, existed := filesBefore[f.Key]; !existed {
					continue
				}
				if strings.HasPrefix(f.Key, "t/data/") {
					t.Fatalf("gc deleted data file %s while the compaction ran", f.Key)
				}
			}

			if err := os.WriteFile(goFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("compaction child: %v\n%s", err, out.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("compaction child did not finish:\n%s", out.String())
			}
			if err := tbl.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if m := tbl.Manifest(); m.Txn.Op.Kind != manifest.OpRewrite {
				t.Fatalf("published HEAD v%d is %s, want the compaction", m.Version, m.Txn.Op.Kind)
			}
			if got := scanRows(t, tbl); !slices.Equal(got, want) {
				t.Fatalf("after the compaction: %d rows, want %d", len(got), len(want))
			}
			checkRetained(t, db, "t", allRows(t, db, "t"))
			if left, _ := recovery.Pending(ctx, s, ""); len(left) != 0 {
				t.Fatalf("sidecars left: %v", left)
			}
		})
	}
}
