package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// TestDropTableAtDropsOnlyAnUnchangedTable: DropTableAt drops a table whose HEAD is the
// version given, and nothing else: not a table another writer appended to before the
// call, nor one whose next version another writer wins while the drop marker is being
// put (the marker is version at+1 or nothing, never rebased past the other write).
func TestDropTableAtDropsOnlyAnUnchangedTable(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")

	fresh, err := db.CreateTable(ctx, "fresh", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTableAt(ctx, "fresh", fresh.Version()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.OpenTable(ctx, "fresh"); !errors.Is(err, manifest.ErrTableNotFound) {
		t.Fatalf("open after DropTableAt: %v, want ErrTableNotFound", err)
	}

	written, err := db.CreateTable(ctx, "written", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	created := written.Version()
	appendRange(t, written, 0, 10)
	if _, err := db.DropTableAt(ctx, "written", created); !errors.Is(err, ErrTableChanged) {
		t.Fatalf("DropTableAt after an append: %v, want ErrTableChanged", err)
	}
	if got := ids(t, mustOpen(t, db, "written"), ""); len(got) != 10 {
		t.Fatalf("rows after a refused drop: %v", got)
	}

	// Another writer wins version created+1 between the drop's look at HEAD and its put.
	raced, err := db.CreateTable(ctx, "raced", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	other := mustOpen(t, openDBOn(t, db.Store()), "raced")
	disable := failpoint.Enable("manifest.before_version_put", failpoint.Call(func(context.Context) error {
		appendRange(t, other, 100, 105) // its own put passes the seam: the action fires once
		return nil
	}).Once())
	_, err = db.DropTableAt(ctx, "raced", raced.Version())
	disable()
	if !errors.Is(err, ErrTableChanged) {
		t.Fatalf("DropTableAt racing an append: %v, want ErrTableChanged", err)
	}
	tbl := mustOpen(t, db, "raced")
	if got := ids(t, tbl, ""); len(got) != 5 || tbl.Version() != raced.Version()+1 {
		t.Fatalf("after the race: version %d, rows %v; want the append's 5 rows at version %d", tbl.Version(), got, raced.Version()+1)
	}
}

// TestInterruptedAppendIsRejectedWithItsTransaction: a keyed append whose context ends
// while it writes its data files is Rejected (not Unknown: its key is looked for under a
// fresh context), as a *WriteError naming the transaction whose data directory holds
// the files written so far; nothing was committed.
func TestInterruptedAppendIsRejectedWithItsTransaction(t *testing.T) {
	s := openDB(t, "file://"+t.TempDir()).Store() // a store that honours a context's end
	db := openDBWith(t, s, Options{Write: fragment.WriterOptions{MaxRowsPerFile: 10, MaxRowsPerBatch: 10}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tbl, err := db.CreateTable(ctx, "t", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	// Cancel once two data files are written (the seam is hit before each batch; the
	// second file is stored in the background while the third batch starts, so wait for
	// it to be stored first).
	disable := failpoint.Enable("fragment.encode_batch", failpoint.Call(func(context.Context) error {
		for deadline := time.Now().Add(10 * time.Second); ; {
			objs, err := s.List(context.Background(), manifest.DataDir("t"), 0)
			if err != nil {
				return err
			}
			if len(objs) >= 2 || time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
		cancel()
		return context.Canceled
	}).After(2))
	defer disable()
	batches := []arrow.RecordBatch{kvBatch(0, 10), kvBatch(10, 20), kvBatch(20, 30), kvBatch(30, 40)}
	rdr, err := array.NewRecordReader(kvSchema, batches)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tbl.Append(ctx, rdr, WithIdempotencyKey("import:interrupted"))
	var we *WriteError
	if !errors.As(err, &we) || OutcomeOf(err) != Rejected || !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted append: %v (%T), want a Rejected *WriteError wrapping context.Canceled", err, err)
	}
	objs, err := s.List(context.Background(), manifest.TxnDataDir("t", we.Txn.ID), 0)
	if err != nil || len(objs) != 2 {
		t.Fatalf("data files of the interrupted transaction: %v, %v; want 2", objs, err)
	}
	if head, err := manifest.Head(context.Background(), s, "t"); err != nil || head != tbl.Version() {
		t.Fatalf("HEAD %d, %v; want %d (nothing committed)", head, err, tbl.Version())
	}
}
