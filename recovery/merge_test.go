package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// keepMergeSidecars arms like MergeSidecars but never disarms: the sidecar a merge that
// died before removing it leaves.
type keepMergeSidecars struct{ MergeSidecars }

func (keepMergeSidecars) Disarm(context.Context, *engine.MergeIntent) error { return nil }

// walFlushed gives table t (made by makeTable) one WAL shard holding rows [1000, 1000+n)
// in a flushed generation, and returns the WAL objects written.
func walFlushed(t *testing.T, db *engine.DB, n int) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.UpdateConfig(ctx, map[string]string{engine.ConfigWALShards: "1"}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, tbl.Schema())
	for id := 1000; id < 1000+n; id++ {
		b.Field(0).(*array.Int64Builder).Append(int64(id))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row-%d", id))
	}
	rec := b.NewRecordBatch()
	b.Release()
	_, err = w.Append(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return walObjects(t, db.Store())
}

func walObjects(t *testing.T, s store.Store) []string {
	t.Helper()
	objs, err := s.List(context.Background(), wal.Dir("t"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// TestRecoverMergeSidecar: the sidecar of a WAL merge that died is rolled forward when its
// transaction landed (published already, or committed and not published) and rolled back
// otherwise: an abort version fences the merge's transaction and nothing is deleted (a
// merge writes no object; its generations stay in the WAL). Either way the WAL's rows are
// read exactly once, and the next merge merges what is left exactly once. (Killing a
// merger process at these seams and recovering is internal/waltest's crash harness.)
func TestRecoverMergeSidecar(t *testing.T) {
	for _, c := range []struct {
		name   string
		seam   string // in-process failpoint error: where the merge "dies"
		action string
	}{
		{"published", "engine.merge_committed", AlreadyPublished},
		{"not published", "engine.before_publish", RolledForward},
		{"not committed", "engine.merge_planned", RolledBack},
		{"before the txn record", "manifest.before_txn_put", RolledBack},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Local(t)
			db := enginetest.OpenDB(t, s, engine.Options{MergeSidecars: keepMergeSidecars{MergeSidecars{Store: s}}})
			makeTable(t, db, "t", 2, 50)
			wrote := walFlushed(t, db, 30)
			before := sortedRows(rowsOf(t, db, "t"))
			if len(before) != 130 {
				t.Fatalf("%d rows before the merge, want 130", len(before))
			}
			tbl, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			defer failpoint.Enable(c.seam, failpoint.Error(errors.New("crash")).Once())()
			if _, err := tbl.MergeWAL(ctx, engine.MergeWALOptions{}); err == nil {
				t.Fatal("the merge did not stop at its seam")
			}
			sc := pendingOne(t, s, "t").Sidecar
			if sc.Kind != KindMerge || len(sc.Attempts) != 1 {
				t.Fatalf("sidecar %+v", sc)
			}
			rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
			if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != c.action {
				t.Fatalf("recover: %+v %v, want %s", rep, err, c.action)
			}
			o := rep.Outcomes[0]
			if len(o.DeletedFiles) != 0 || !slices.Equal(walObjects(t, s), wrote) {
				t.Fatalf("recover deleted %v; WAL objects %v, want %v", o.DeletedFiles, walObjects(t, s), wrote)
			}
			after, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, sortedRows(enginetest.Rows(t, after)), before)
			merged := after.Manifest().WALMerged["0"]
			if c.action == RolledBack {
				head, err := manifest.LoadHead(ctx, s, "t")
				if err != nil || head.Txn.Op.Kind != manifest.OpAbort || !slices.Contains(head.Txn.Op.Aborted, sc.Attempts[0].TxnID) || o.Fence != head.Version {
					t.Fatalf("HEAD %+v %v (outcome %+v), want the abort naming the merge", head.Txn, err, o)
				}
				if merged != 0 {
					t.Fatalf("rolled back, yet the watermark is %d", merged)
				}
			} else if merged != 1 || after.Version() != o.Version {
				t.Fatalf("watermark %d at v%d, want 1 at the merge's v%d", merged, after.Version(), o.Version)
			}
			if n, err := Pending(ctx, s, ""); err != nil || len(n) != 0 {
				t.Fatalf("sidecars left: %v %v", n, err)
			}
			// The next merge merges what is left, once.
			res, err := after.MergeWAL(ctx, engine.MergeWALOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := c.action == RolledBack; (len(res.Shards) == 1) != want {
				t.Fatalf("the merge after recovery: %+v", res)
			}
			final, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, sortedRows(enginetest.Rows(t, final)), before)
			if final.Manifest().WALMerged["0"] != 1 || final.Manifest().LiveRows() != 130 {
				t.Fatalf("finally: watermark %d, %d base rows", final.Manifest().WALMerged["0"], final.Manifest().LiveRows())
			}
		})
	}
}

func sortedRows(rows []string) []string {
	out := slices.Clone(rows)
	slices.Sort(out)
	return out
}
