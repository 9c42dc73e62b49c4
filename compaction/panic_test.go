package compaction

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// TestPanicOnRewriteGoroutinesIsAnError: a panic on a group's reader (read-ahead)
// goroutine or its writer goroutine fails the compaction with an error wrapping
// engine.ErrInternal (naming the data file being read, or the directory being written),
// commits nothing and leaves the table readable; a later compaction succeeds.
func TestPanicOnRewriteGoroutinesIsAnError(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ seam, names string }{
		{"compaction.read_batch", "/data/"},
		{"compaction.write_batch", "write data files under t/data"},
	} {
		t.Run(c.seam, func(t *testing.T) {
			db := openDB(t, storetest.Mem(t))
			schema, batches := intBatches(4, 50)
			tbl := appendEach(t, db, "t", schema, batches)
			want := rowsOf(t, tbl)
			v := tbl.Version()

			disable := failpoint.Enable(c.seam, failpoint.Panic("boom"))
			_, err := Compact(ctx, db, "t", Options{})
			disable()
			if !errors.Is(err, engine.ErrInternal) || !errors.Is(err, failpoint.ErrInjected) ||
				!strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "[at ") {
				t.Fatalf("compact: %v, want ErrInternal naming %q with the stack", err, c.names)
			}
			if c.seam == "compaction.read_batch" {
				var oe *manifest.ObjectError
				if !errors.As(err, &oe) || oe.Table != "t" || oe.Version != v || oe.Key != tbl.Manifest().Fragments[0].Files[0].Key {
					t.Fatalf("compact: %v, want the first fragment's data file named", err)
				}
			}
			if head, err := manifest.Head(ctx, db.Store(), "t"); err != nil || head != v {
				t.Fatalf("HEAD %d (%v), want %d: nothing committed", head, err, v)
			}
			if _, err := Compact(ctx, db, "t", Options{}); err != nil {
				t.Fatalf("compaction after the fault: %v", err)
			}
			now, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, "after compaction", rowsOf(t, now), want)
		})
	}
}
