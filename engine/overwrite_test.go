package engine

import (
	"context"
	"errors"
	"github.com/shale-db/shale/internal/failpoint"
	"sync"
	"testing"
	"time"

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
	// Both overwrites have planned (on the same HEAD) before either commits.
	var planned sync.WaitGroup
	planned.Add(2)
	allPlanned := make(chan struct{})
	go func() { planned.Wait(); close(allPlanned) }()
	defer failpoint.Enable("manifest.before_txn_put", failpoint.Call(func(ctx context.Context) error {
		planned.Done()
		select {
		case <-allPlanned:
			return nil
		case <-time.After(30 * time.Second):
			return errors.New("the other overwrite never planned")
		}
	}).Times(2))()
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

	// An append that commits while an overwrite is in flight (planned on HEAD, its files
	// written) makes the overwrite retry: it must not silently drop rows committed after
	// it read. (An overwrite started after the append replaces them: it plans on HEAD.)
	stale := mustOpen(t, db, "ow")
	off := failpoint.Enable("manifest.before_txn_put", failpoint.Call(func(ctx context.Context) error {
		_, err := mustOpen(t, db, "ow").AppendRecord(ctx, kvBatch(500, 503))
		return err
	}).Once())
	rec := kvBatch(900, 901)
	rdr := recordReader(rec)
	_, err = stale.Overwrite(ctx, rdr)
	off()
	rdr.Release()
	rec.Release()
	if !errors.Is(err, manifest.ErrRetryable) {
		t.Fatalf("overwrite over a concurrent append: %v", err)
	}
	if got := ids(t, mustOpen(t, db, "ow"), "id >= 500"); len(got) != 3 {
		t.Fatalf("appended rows lost: %v", got)
	}
}
