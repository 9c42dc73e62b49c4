package chaostest

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/objstore"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest/catalog"
)

// TestKeyedRerunFailingBeforeCommit is what the chaos run found with SHALE_SLOW=1
// SHALE_SEED=1796112590368233046 (w4-op338), made deterministic: a writer whose keyed
// write landed dies before it is told; its next incarnation runs the write again under
// the same key, and that run fails before its commit loop (there the BeforeFirstWrite
// recovery hook met a transient store error). The run is reported Rejected ("nothing
// will ever take effect"), though the key's write took effect: WithIdempotencyKey
// promises that a write whose key committed already returns that write's version with
// CommitResult.Duplicate, and a client trusting Rejected would conclude the write is not
// in the table. The key is looked for only inside the commit loop, so any failure before
// it (the hook, writing the data files or deletion vectors, planning) gives Rejected.
//
// Skipped: the fix (look for the key before failing a keyed write as Rejected, or report
// such failures as Unknown) is a decision about the outcome contract, left to the
// maintainers; the chaos test treats a Rejected run again under a landed key as
// undecided meanwhile.
func TestKeyedRerunFailingBeforeCommit(t *testing.T) {
	t.Skip("known gap, see the comment: a keyed write run again after its key landed is Rejected when it fails before its commit loop")
	ctx := context.Background()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch([]int64{1, 2, 3}, "k")
	defer rec.Release()
	first, err := tbl.AppendRecord(ctx, rec, engine.WithIdempotencyKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	// The next incarnation: its recovery hook (engine.Options.BeforeFirstWrite) fails
	// once, as recovery.Hook does when a store read fails.
	hookErr := errors.New("transient store error reading a sidecar's version")
	db2 := enginetest.OpenDB(t, s, engine.Options{BeforeFirstWrite: func(context.Context, objstore.Store, *catalog.Catalog, string) error {
		return hookErr
	}})
	tbl2, err := db2.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	res, err := tbl2.AppendRecord(ctx, rec, engine.WithIdempotencyKey("k"))
	if engine.OutcomeOf(err) == engine.Rejected {
		t.Fatalf("run again under key %q, which landed as version %d: Rejected (%v); want the Duplicate of version %d, or Unknown",
			"k", first.Version, err, first.Version)
	}
	if err == nil && (!res.Duplicate || res.Version != first.Version) {
		t.Fatalf("run again: %+v, want the Duplicate of version %d", res, first.Version)
	}
}

// TestUnpublishedOverwriteBlocksWriters is what the SHALE_SLOW=1 chaos run with
// SHALE_SEED=1796113381432508863 showed (table ow: published 775 < HEAD 841), made
// deterministic: a writer commits an overwrite and dies before publishing it. Appends
// and overwrites plan on the version a handle opened, the published one, so every later
// append conflicts with the unpublished overwrite ("the table was replaced after our read
// version", Rejected), and so does every overwrite (retryable, but Overwrite does not
// re-plan); a fresh handle opens the same published version and fails the same way. No
// append or overwrite can ever commit again, though the architecture doc says a later
// write publishes such drift; in the run, ow took only rejections for its last minute
// while GC stacked 65 unpublished abort versions on top. Deletes, updates and schema
// changes plan on HEAD and would get past it (and publish it); a table written only by
// appends and overwrites stays stuck until an operator runs shale repair --force.
//
// Skipped: planning appends and overwrites on HEAD (as Delete, Update and schema
// changes do) would fix it but changes which appends conflict with an overwrite, a
// decision left to the maintainers.
func TestUnpublishedOverwriteBlocksWriters(t *testing.T) {
	t.Skip("known bug, see the comment: an overwrite committed but never published blocks every later append and overwrite")
	ctx := context.Background()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{})
	tbl, err := db.CreateTable(ctx, "t", schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch([]int64{1, 2, 3}, "a")
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	// The overwrite commits; its writer dies before publishing (the publish fails once
	// and nobody retries it).
	off := failpoint.Enable("engine.before_publish", failpoint.Error(errors.New("process died")).Once())
	rec = batch([]int64{10, 11}, "o")
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tbl.Overwrite(ctx, rdr)
	rdr.Release()
	rec.Release()
	off()
	var ue *engine.UnknownError
	if !errors.As(err, &ue) || !ue.Committed {
		t.Fatalf("overwrite: %v, want committed but not published", err)
	}
	// Other writers, each with a fresh handle, as a client retrying a rejected write.
	for i := 0; i < 3; i++ {
		h, err := db.OpenTable(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		rec := batch([]int64{int64(20 + i)}, "b")
		res, err := h.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("append %d on a fresh handle at version %d, with the overwrite v%d committed above it: %v (%v)",
				i, h.Version(), ue.Version, err, engine.OutcomeOf(err))
		}
		if i == 0 && (len(res.AlsoPublished) != 1 || res.AlsoPublished[0].Version != ue.Version) {
			t.Fatalf("append: %+v, want the overwrite v%d published with it", res, ue.Version)
		}
	}
}
