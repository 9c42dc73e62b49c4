package recovery

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
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

// TestRollBackFencesAttemptsAnEarlierAbortDoesNotName: a sidecar whose first attempt an
// earlier roll back fenced, and whose second attempt is still unfenced. That state is
// reached by a compaction a roll back caught paused (its hold gone, or with no catalog
// after the minimum age): the roll back fenced attempt A and deleted the sidecar; resumed,
// A's commit met a conflict before the abort (Rejected), the run replanned and rewrote the
// sidecar with attempt B, then paused again. The next roll back must fence B too before
// deleting B's files (an abort naming A alone does not stop B), so B's late commit fails
// instead of publishing a version whose files are gone (invariant 15).
func TestRollBackFencesAttemptsAnEarlierAbortDoesNotName(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 2, 10)
	head, err := manifest.LoadHead(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	a := manifest.NewTransactionID()
	earlier, err := Fence(ctx, s, db.Catalog(), head, []string{a}, nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	read, err := manifest.LoadHead(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	// Attempt B, planned after the abort: its data file and transaction, not committed.
	b := manifest.NewTransaction(read.Version, manifest.Operation{Kind: manifest.OpAppend})
	w, err := fragment.NewWriter(ctx, s, manifest.TxnDataDir("t", b.ID), read.Schema.MustArrow(), read.Schema.FieldIDs, fragment.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := oneRow(1000)
	err = w.Write(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	files, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	b.Op.NewFragments = []manifest.Fragment{{Files: files, PhysicalRows: files[0].Rows}}
	op := manifest.NewTransactionID()
	sc := Sidecar{Format: Format, Kind: KindCompaction, OperationID: op, Table: "t", Created: time.Now().UTC(),
		PublishedAtStart: head.Version, Attempts: []Attempt{
			{TxnID: a, ReadVersion: head.Version, DataPrefix: manifest.TxnDataDir("t", a) + "/", Rejected: true},
			{TxnID: b.ID, ReadVersion: read.Version, DataPrefix: manifest.TxnDataDir("t", b.ID) + "/"},
		}}
	if err := s.Put(ctx, Key(op), sc.Encode()); err != nil {
		t.Fatal(err)
	}
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack || len(rep.Outcomes[0].DeletedFiles) != 1 {
		t.Fatalf("recover: %+v, %v; want B rolled back and its file deleted", rep, err)
	}
	if f := rep.Outcomes[0].Fence; f == 0 || f == earlier.Version {
		t.Fatalf("recover fenced at v%d (the earlier abort naming only A is v%d); want a fence naming B", f, earlier.Version)
	}
	if _, _, err := manifest.Commit(ctx, s, "t", read, b, manifest.CommitOptions{}); !errors.Is(err, manifest.ErrTxnAborted) {
		t.Fatalf("B's late commit after its files were deleted: %v; want ErrTxnAborted", err)
	}
	checkRecovered(t, s, db, "t", rowsOf(t, db, "t"))
}
