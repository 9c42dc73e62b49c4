package recovery

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
)

// kinds lists the operation kind of every version of table, 1..HEAD.
func kinds(t *testing.T, db *engine.DB, table string) []manifest.OpKind {
	t.Helper()
	ctx := context.Background()
	head, err := manifest.Head(ctx, db.Store(), table)
	if err != nil {
		t.Fatal(err)
	}
	var out []manifest.OpKind
	for v := uint64(1); v <= head; v++ {
		r, err := manifest.LoadRecord(ctx, db.Store(), table, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Txn.Op.Kind)
	}
	return out
}

// TestReplanToNothingLeavesNoAbort (issue 8 item 9): a compaction whose attempt meets a
// concurrent compaction of the same fragments (a retryable conflict) replans at HEAD,
// finds nothing left to compact, and removes its sidecar. Its rejected attempt was
// decided by the commit loop, so its files are deleted without an abort version: the
// table has no version the run made, HEAD is published, nothing is left for repair.
func TestReplanToNothingLeavesNoAbort(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 6, 20)
	before := rowsOf(t, db, "t")
	ex := Enable(compaction.New(db))
	ran := false
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error {
		if ran {
			return nil
		}
		ran = true
		// The other compaction (no hooks) rewrites the same fragments first.
		_, err := Enable(compaction.New(db)).Run(ctx, "t", compaction.Options{TargetRows: 1000})
		return err
	}
	st, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000})
	if err != nil || st.Attempts != 2 || st.Version != 0 {
		t.Fatalf("run: %+v, %v; want a replan that found nothing to do", st, err)
	}
	if k := kinds(t, db, "t"); slices.Contains(k, manifest.OpAbort) || k[len(k)-1] != manifest.OpRewrite {
		t.Fatalf("versions %v: want the other compaction's rewrite on top and no abort", k)
	}
	checkRecovered(t, s, db, "t", before) // in sync, no sidecar, no unreferenced data file
}

// TestFencePublishesOnceTheVersionsBelowAre (issue 8 item 9): an abort committed on top of
// another writer's version that is not published yet is published when that writer
// publishes (Fence waits for it), so recovery and GC neither publish another writer's
// work nor leave their abort behind; if the version below stays unpublished for the whole
// wait, the abort is left for the next write to publish.
func TestFencePublishesOnceTheVersionsBelowAre(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 1, 10)
	for _, publishBelow := range []bool{true, false} {
		head, err := manifest.LoadHead(ctx, s, "t")
		if err != nil {
			t.Fatal(err)
		}
		// A writer's version, committed and not yet published.
		app := manifest.NewTransaction(head.Version, manifest.Operation{Kind: manifest.OpAppend, NewFragments: head.Fragments[:1]})
		below, st, err := manifest.Commit(ctx, s, "t", head, app, manifest.CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		published := make(chan error, 1)
		if publishBelow {
			go func() {
				time.Sleep(50 * time.Millisecond) // the writer is slow to publish
				_, err := engine.PublishVersion(ctx, s, db.Catalog(), below, st.Checksum)
				published <- err
			}()
		}
		wait := 10 * time.Second
		if !publishBelow {
			wait = 100 * time.Millisecond
		}
		res, err := Fence(ctx, s, db.Catalog(), below, []string{manifest.NewTransactionID()}, nil, wait)
		if err != nil || res.Version != below.Version+1 || res.Published != publishBelow {
			t.Fatalf("fence over unpublished v%d (published meanwhile: %v): %+v, %v", below.Version, publishBelow, res, err)
		}
		p, _, err := db.Catalog().Get(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		want := res.Version
		if !publishBelow {
			want = below.Version - 1 // neither the writer's version nor the abort
		} else if err := <-published; err != nil {
			t.Fatal(err)
		}
		if p.Version != want {
			t.Fatalf("pointer at v%d, want v%d (published below: %v)", p.Version, want, publishBelow)
		}
		if !publishBelow {
			// The next write publishes both.
			w, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			rec := oneRow(999)
			res, err := w.AppendRecord(ctx, rec)
			rec.Release()
			if err != nil || !res.Published {
				t.Fatalf("next write: %+v, %v", res, err)
			}
			if p, _, err := db.Catalog().Get(ctx, "t"); err != nil || p.Version != res.Version {
				t.Fatalf("pointer %+v, %v after the next write v%d", p, err, res.Version)
			}
		}
	}
}
