package gc

import (
	"context"
	"slices"
	"testing"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// TestPinTakenDuringGCSurvivesLaterRuns (issue 8 item 5): a reader pins version 3 while a
// GC run is between reading the holds and expiring versions. That run expires 3 but, when
// it re-reads the holds, finds the pin: it keeps 3's files and puts 3's manifest back. The
// next runs then see the pinned version and keep its files for as long as the pin lives
// (before, they stopped at 3's tombstone and deleted its files under the live pin).
func TestPinTakenDuringGCSurvivesLaterRuns(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	tbl := history(t, db)
	old, err := tbl.Checkout(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := scanRows(t, old)
	var pin *engine.Pin
	off := failpoint.Enable("gc.after_plan", failpoint.Call(func(ctx context.Context) error {
		var err error
		pin, err = old.Pin(ctx)
		return err
	}).Once())
	rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
	off()
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Release(ctx)
	if tr := rep.Tables[0]; !slices.Contains(tr.Expired, 3) || !slices.Contains(tr.Restored, 3) {
		t.Fatalf("first run: expired %v, restored %v; want 3 expired and restored", tr.Expired, tr.Restored)
	}
	for run := 2; run <= 3; run++ {
		rep, err := Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
		if err != nil {
			t.Fatal(err)
		}
		if tr := rep.Tables[0]; !slices.Contains(tr.Retained, 3) || tr.LowWatermark != 3 {
			t.Fatalf("run %d: retained %v, low watermark %d; want 3 kept for the pin", run, tr.Retained, tr.LowWatermark)
		}
	}
	if got := scanRows(t, old); !slices.Equal(got, want) {
		t.Fatalf("pinned version 3 after three runs: %d rows, want %d", len(got), len(want))
	}
	if _, err := manifest.Load(ctx, s, "t", 3); err != nil {
		t.Fatalf("pinned version 3: %v", err)
	}
	checkRetained(t, db, "t", allRows(t, db, "t"))

	// Released, it expires like any other version.
	if err := pin.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(ctx, s, db.Catalog(), "t", Policy{KeepLast: 1, GracePeriod: -1})
	if err != nil || !slices.Contains(rep.Tables[0].Expired, 3) {
		t.Fatalf("after release: expired %v, %v", rep.Tables[0].Expired, err)
	}
}
