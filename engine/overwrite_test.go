package engine

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/shale-db/shale/manifest"
)

// TestConcurrentOverwritesOneWins: two writers overwrite the table from the same stale
// version at once: exactly one commits, the other gets a retryable conflict, and an
// overwrite planned before a concurrent append never silently removes the appended rows.
func TestConcurrentOverwritesOneWins(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "ow", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	h1, h2 := mustOpen(t, db, "ow"), mustOpen(t, db, "ow")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, h := range []*Table{h1, h2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := kvBatch(int64(100*(i+1)), int64(100*(i+1)+5))
			rdr := recordReader(rec)
			_, errs[i] = h.Overwrite(ctx, rdr)
			rdr.Release()
			rec.Release()
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, manifest.ErrRetryable) || OutcomeOf(err) != Rejected:
			t.Fatalf("loser: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d overwrites committed: %v", won, errs)
	}
	if n, _ := mustOpen(t, db, "ow").Count(ctx, ""); n != 5 {
		t.Fatalf("%d rows after one overwrite", n)
	}

	stale := mustOpen(t, db, "ow")
	appendRange(t, mustOpen(t, db, "ow"), 500, 503)
	rec := kvBatch(900, 901)
	rdr := recordReader(rec)
	_, err = stale.Overwrite(ctx, rdr)
	rdr.Release()
	rec.Release()
	if !errors.Is(err, manifest.ErrRetryable) {
		t.Fatalf("overwrite over a concurrent append: %v", err)
	}
	if got := ids(t, mustOpen(t, db, "ow"), "id >= 500"); len(got) != 3 {
		t.Fatalf("appended rows lost: %v", got)
	}
}
