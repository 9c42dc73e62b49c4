package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/recovery"
)

// TestCompactionHoldFollowsReplans: a compaction's hold has its operation id (the
// sidecar's), kind "compaction", and the read version of the attempt in progress: a
// delete that conflicts with the first attempt makes it replan at a newer version and
// the hold moves there. After the run no hold is left.
func TestCompactionHoldFollowsReplans(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	tbl := makeTable(t, db, "t", 6, 50)
	e := recovery.Enable(compaction.New(db))
	var seen []string
	e.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error {
		holds, err := db.Catalog().Holds(ctx, "t")
		if err != nil {
			return err
		}
		pending, err := recovery.Pending(ctx, s, "t")
		if err != nil {
			return err
		}
		if len(holds) != 1 || len(pending) != 1 || recovery.Key(holds[0].ID) != pending[0] || holds[0].Kind != compaction.HoldKind {
			return fmt.Errorf("holds %+v, sidecars %v: want one compaction hold named after the sidecar", holds, pending)
		}
		seen = append(seen, fmt.Sprintf("hold v%d plan v%d", holds[0].Version, p.ReadVersion))
		if holds[0].Version != p.ReadVersion {
			return fmt.Errorf("hold at %d, attempt reads %d", holds[0].Version, p.ReadVersion)
		}
		if len(seen) == 1 {
			_, err := tbl.Delete(ctx, "id = 3") // conflicts with the rewrite: replan
			return err
		}
		return nil
	}
	st, err := e.Run(ctx, "t", compaction.Options{TargetRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attempts %d: %v", st.Attempts, seen)
	if st.Attempts != 2 || len(seen) != 2 {
		t.Fatalf("attempts %d (%v), want 2", st.Attempts, seen)
	}
	if holds, err := db.Catalog().Holds(ctx, "t"); err != nil || len(holds) != 0 {
		t.Fatalf("holds after the run: %+v %v", holds, err)
	}

	// A run that fails releases its hold too.
	e.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error { return errors.New("boom") }
	appendRows(t, tbl, 5000, 5)
	appendRows(t, tbl, 6000, 5)
	if _, err := e.Run(ctx, "t", compaction.Options{TargetRows: 1000}); err == nil {
		t.Fatal("run with a failing hook succeeded")
	}
	if holds, err := db.Catalog().Holds(ctx, "t"); err != nil || len(holds) != 0 {
		t.Fatalf("holds after a failed run: %+v %v", holds, err)
	}
}
