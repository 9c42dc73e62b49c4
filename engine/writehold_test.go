package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
)

// TestLongWriteTakesHold: a write still running after WriteHoldAfter holds its read
// version, backdated to its start, until it ends; a write that ends sooner takes none.
func TestLongWriteTakesHold(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.WriteHoldAfter = time.Millisecond
	tbl, err := db.CreateTable(ctx, "long", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	read := tbl.Version()
	start := time.Now()
	seen := make(chan string, 1)
	off := failpoint.Enable("engine.before_publish", failpoint.Call(func(ctx context.Context) error {
		// The write is committed but not yet published: its hold must be live by now
		// (taken 1 ms after the write began), so wait for it with a deadline.
		deadline := time.Now().Add(10 * time.Second)
		for {
			hs, err := db.Catalog().Holds(ctx, "long")
			if err != nil {
				return err
			}
			if len(hs) == 1 {
				h := hs[0]
				if h.Kind != HoldKindWrite || h.Version != read || h.Started.After(start.Add(time.Second)) || h.Started.Before(start.Add(-time.Second)) {
					seen <- "bad hold"
					t.Errorf("hold %+v: want kind %q at read version %d started at %v", h, HoldKindWrite, read, start)
				} else {
					seen <- h.ID
				}
				return nil
			}
			if time.Now().After(deadline) {
				t.Errorf("no write hold 10 s into a write with WriteHoldAfter 1 ms (holds %+v)", hs)
				seen <- "none"
				return nil
			}
			time.Sleep(5 * time.Millisecond)
		}
	}).Once())
	defer off()
	appendRange(t, tbl, 10, 20)
	off()
	id := <-seen
	if ok, err := db.Catalog().HoldExists(ctx, "long", id); err != nil || ok {
		t.Fatalf("write hold %s after the write ended: exists %v, %v", id, ok, err)
	}

	// The default threshold: a quick write takes no hold.
	db.opts.WriteHoldAfter = 0
	appendRange(t, tbl, 20, 30)
	if hs, err := db.Catalog().Holds(ctx, "long"); err != nil || len(hs) != 0 {
		t.Fatalf("holds after a quick write: %+v, %v", hs, err)
	}
}

// TestAppendFromExpiredReadVersionRetries: an append whose read version was expired by GC
// meanwhile (a retryable conflict) commits on top of HEAD instead of failing.
func TestAppendFromExpiredReadVersionRetries(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "stale", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := db.OpenTable(ctx, "stale") // at version 1
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	appendRange(t, tbl, 10, 20)
	for v := uint64(1); v <= 2; v++ { // what GC does to versions 1 and 2
		m, err := manifest.Load(ctx, db.Store(), "stale", v)
		if err != nil {
			t.Fatal(err)
		}
		if err := manifest.Expire(ctx, db.Store(), m); err != nil {
			t.Fatal(err)
		}
	}
	res := appendRange(t, stale, 20, 30)
	if res.Version != 4 || !res.Published {
		t.Fatalf("stale append: %+v, want version 4 published", res)
	}
	if got := ids(t, mustOpen(t, db, "stale"), ""); len(got) != 30 {
		t.Fatalf("%d rows after the stale append, want 30", len(got))
	}
}

// TestVersionTimeIsCommitTime: a version's time is when its commit attempt built it
// (Manifest.Committed), not when its transaction was planned.
func TestVersionTimeIsCommitTime(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "times", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	vs, err := tbl.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := vs[len(vs)-1]
	m := tbl.Manifest()
	if m.Committed == 0 || m.Committed < m.Txn.Timestamp || !last.Time.Equal(time.Unix(0, m.Committed).UTC()) {
		t.Fatalf("version %d: time %v, committed %d, planned %d", last.Version, last.Time, m.Committed, m.Txn.Timestamp)
	}
}

// TestStatusReportsPointerWithoutVersions: a table whose pointer survives while its
// versions are gone (a drop that raced a publish) is reported, not skipped.
func TestStatusReportsPointerWithoutVersions(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "ghost", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	objs, err := db.Store().List(ctx, "ghost/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := db.Store().Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Status(ctx); !errors.Is(err, ErrDrift) {
		t.Fatalf("status with a pointer and no versions: %v, want ErrDrift", err)
	}
	// Dropping it again removes the stale pointer.
	if _, err := db.DropTable(ctx, "ghost"); err != nil {
		t.Fatalf("drop of a pointer without versions: %v", err)
	}
	if _, err := db.Status(ctx); err != nil {
		t.Fatalf("status after the second drop: %v", err)
	}
	if _, err := db.DropTable(ctx, "ghost"); !errors.Is(err, manifest.ErrTableNotFound) {
		t.Fatalf("third drop: %v, want ErrTableNotFound", err)
	}
}

// TestWriteRacingDropDoesNotRevivePointer: a write that commits after a drop removed the
// pointer and the first version fails with ErrTableDropped and leaves the pointer absent;
// a table that was simply never published (v1 still there) gets its pointer.
func TestWriteRacingDropDoesNotRevivePointer(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "racing", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 10)
	// What a drop does first: the pointer, then the oldest manifest.
	if err := db.Catalog().Delete(ctx, "racing"); err != nil {
		t.Fatal(err)
	}
	if err := db.Store().Delete(ctx, manifest.ManifestKey("racing", 1)); err != nil {
		t.Fatal(err)
	}
	rec := kvBatch(10, 20)
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	if !errors.Is(err, ErrTableDropped) {
		t.Fatalf("append racing a drop: %v, want ErrTableDropped", err)
	}
	if _, _, err := db.Catalog().Get(ctx, "racing"); err == nil {
		t.Fatal("the write re-created the dropped table's pointer")
	}

	// Never published: pointer absent but version 1 present.
	tbl2, err := db.CreateTable(ctx, "unpublished", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Catalog().Delete(ctx, "unpublished"); err != nil {
		t.Fatal(err)
	}
	res := appendRange(t, tbl2, 0, 10)
	if !res.Published {
		t.Fatalf("append to a never-published table: %+v, want published", res)
	}
}
