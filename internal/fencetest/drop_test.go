package fencetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// txnRecords lists the table's transaction records.
func txnRecords(t *testing.T, s store.Store, table string) []string {
	t.Helper()
	objs, err := s.List(context.Background(), manifest.TxnDir(table), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// TestWriterCommittingAcrossDropAndCreate (issue 8 item 10): a writer in another process
// plans an append on table t, reaches its commit point (held there by a failpoint), is
// paused there with SIGSTOP and loses its hold's lease; meanwhile t is dropped, and
// created again or not; then it is resumed with SIGCONT. In the
// "hole" cases another append committed first, so the writer's version number is one the
// drop's deletes freed and its put lands below the drop marker; otherwise its put meets
// the marker. Released, the write must fail with ErrTableDropped (Rejected), never report
// Committed; the re-created table must not contain its rows at any version, nor have its
// HEAD or pointer moved, and must verify; the dropped table must stay dropped.
func TestWriterCommittingAcrossDropAndCreate(t *testing.T) {
	for _, c := range []struct{ recreate, hole bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		t.Run(fmt.Sprintf("recreate=%v/hole=%v", c.recreate, c.hole), func(t *testing.T) {
			ctx := context.Background()
			s, db := setup(t)
			gate := filepath.Join(t.TempDir(), "go")
			records := len(txnRecords(t, s, "t"))
			child := startChild(t, s, "append", "t", failpoint.EnvVar+"=manifest.before_version_put=block("+gate+")")
			waitFor(t, 30*time.Second, "the writer at its commit point (its transaction record)", func() bool {
				return len(txnRecords(t, s, "t")) > records
			})
			if err := child.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if c.hole {
				tbl, err := db.OpenTable(ctx, "t")
				if err != nil {
					t.Fatal(err)
				}
				rec := batch(50, 60)
				_, err = tbl.AppendRecord(ctx, rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			enginetest.ExpireHolds(t, db, "t") // not what keeps the write out: the drop marker is
			if _, err := db.DropTable(ctx, "t"); err != nil {
				t.Fatal(err)
			}
			var again *engine.Table
			if c.recreate {
				var err error
				if again, err = db.CreateTable(ctx, "t", schema); err != nil {
					t.Fatal(err)
				}
				rec := batch(5000, 5005)
				_, err = again.AppendRecord(ctx, rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := child.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			r := child.wait(t)
			t.Logf("the writer: %s", r.Err)
			if r.Outcome != engine.Rejected.String() || !r.Dropped || !strings.Contains(r.Err, "the table was dropped") {
				t.Fatalf("writer across the drop: %+v; want rejected with ErrTableDropped", r)
			}
			if !c.recreate {
				if _, err := db.OpenTable(ctx, "t"); !errors.Is(err, manifest.ErrTableNotFound) {
					t.Fatalf("open after the drop: %v", err)
				}
				if _, _, err := db.Catalog().Get(ctx, "t"); !errors.Is(err, catalog.ErrNoPointer) {
					t.Fatalf("the writer brought the pointer back: %v", err)
				}
				return
			}
			tbl := checkSound(t, s, db, "t")
			if tbl.Version() != again.Version() {
				t.Fatalf("published v%d, want the re-created table's v%d", tbl.Version(), again.Version())
			}
			if head, err := manifest.Head(ctx, s, "t"); err != nil || head != again.Version() {
				t.Fatalf("HEAD %d (%v), want %d", head, err, again.Version())
			}
			vs, err := tbl.Versions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				old, err := tbl.Checkout(ctx, v.Version)
				if err != nil {
					t.Fatal(err)
				}
				for _, row := range enginetest.Rows(t, old) {
					if !strings.HasPrefix(row, "500") {
						t.Fatalf("version %d of the re-created table holds %q", v.Version, row)
					}
				}
			}
			if got := enginetest.Rows(t, tbl); !slices.Equal(got, []string{"5000|n5000", "5001|n5001", "5002|n5002", "5003|n5003", "5004|n5004"}) {
				t.Fatalf("re-created table rows %v", got)
			}
		})
	}
}
