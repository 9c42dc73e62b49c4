package chaostest

import (
	"context"
	"errors"
	"testing"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
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
