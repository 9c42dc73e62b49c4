package waltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
	"github.com/shale-db/shale/wal"
)

// baseRows are the ids [0, baseRows) every test table starts with in its base table.
const baseRows = 20

// setup creates table name on a fresh local store with shards WAL shards, the base rows
// and extra config, and returns the store, a DB of this process (it never writes the WAL
// itself unless a test says so) and the journal directory.
func setup(t *testing.T, name string, shards int, config map[string]string) (store.Store, *engine.DB, string) {
	t.Helper()
	ctx := context.Background()
	s := storetest.Local(t)
	db := enginetest.OpenDB(t, s, engine.Options{MergeSidecars: recovery.MergeSidecars{Store: s}})
	tbl, err := db.CreateTable(ctx, name, schema)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch(0, baseRows, "base")
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]string{engine.ConfigWALShards: strconv.Itoa(shards)}
	for k, v := range config {
		cfg[k] = v
	}
	if _, err := tbl.UpdateConfig(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	return s, db, t.TempDir()
}

// baseLedger adds the base rows to a ledger (acknowledged by the table's creation).
func (l *ledger) withBase() *ledger {
	for id := range int64(baseRows) {
		l.attempted[id], l.acked[id] = true, true
	}
	return l
}

// scanIDs reads the ids of the rows filter selects ("" = all) at the table's published
// version, WAL included, retrying a
// read that met a merge and a flush moving under it (engine.ErrWALAhead, wal.ErrBusy: it
// read nothing; a fresh handle reads again).
func scanIDs(ctx context.Context, db *engine.DB, table, filter string) ([]int64, int, error) {
	retries := 0
	for {
		ids, err := scanOnce(ctx, db, table, filter)
		if err == nil || !(errors.Is(err, engine.ErrWALAhead) || errors.Is(err, wal.ErrBusy)) || retries >= 50 {
			return ids, retries, err
		}
		retries++
	}
}

func scanOnce(ctx context.Context, db *engine.DB, table, filter string) ([]int64, error) {
	tbl, err := db.OpenTable(ctx, table)
	if err != nil {
		return nil, err
	}
	sc, err := tbl.Scan(ctx, engine.ScanOptions{Columns: []string{"id"}, Filter: filter})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	var out []int64
	for sc.Next() {
		out = append(out, sc.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	return out, sc.Err()
}

// checkOnce checks ids against the ledger: no id twice, every acknowledged id present, no
// id that nobody appended. It returns the number of present ids that were never
// acknowledged (appends whose outcome the writer did not learn).
func checkOnce(ids []int64, l *ledger) (unacked int, err error) {
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return 0, fmt.Errorf("row %d is present twice", id)
		}
		seen[id] = true
		if !l.attempted[id] {
			return 0, fmt.Errorf("row %d is present but was never appended", id)
		}
		if !l.acked[id] {
			unacked++
		}
	}
	var lost []int64
	for id := range l.acked {
		if !seen[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		return 0, fmt.Errorf("%d acknowledged rows are missing (first %v)", len(lost), lost[:min(len(lost), 10)])
	}
	return unacked, nil
}

// recovered is what recoverAll did.
type recovered struct {
	Outcomes []recovery.Outcome // recovery.Recover's
	Replayed map[int]int64      // rows each shard's reopened writer replayed
	Merge    engine.MergeWALResult
}

// recoverAll is what an operator does after a crash: expire the dead processes' holds
// (etcd would, one TTL later), resolve merge sidecars (recovery.Recover), open each shard
// again (its claim fences the dead writer, its replay brings the unflushed entries into
// its memtable), flush and close it, then merge the WAL.
func recoverAll(t *testing.T, db *engine.DB, table string, shards []int) recovered {
	t.Helper()
	ctx := context.Background()
	enginetest.ExpireHolds(t, db, table)
	rep, err := recovery.Recover(ctx, db.Store(), db.Catalog(), table, recovery.Options{MinAge: -1})
	if err != nil {
		t.Fatalf("recover: %v (%+v)", err, rep)
	}
	out := recovered{Outcomes: rep.Outcomes, Replayed: map[int]int64{}}
	tbl, err := db.OpenTable(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		w, err := tbl.WAL(ctx, sh)
		if err != nil {
			t.Fatalf("reopen shard %d: %v", sh, err)
		}
		snap, err := w.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		out.Replayed[sh] = snap.Rows
		snap.Release()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("close shard %d: %v", sh, err)
		}
	}
	if err := tbl.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	out.Merge, err = tbl.MergeWAL(ctx, engine.MergeWALOptions{})
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	return out
}

// checkRecovered is the end state every crash test wants, after recoverAll: the rows
// exactly once (checkOnce), every row in the base table (nothing left in the WAL),
// published = HEAD, verify finds no fault, and a second recovery changes nothing (no
// sidecar to resolve, nothing replayed, nothing to merge, the same rows). It returns
// the count of present but unacknowledged rows.
func checkRecovered(t *testing.T, db *engine.DB, table string, shards []int, l *ledger) int {
	t.Helper()
	ctx := context.Background()
	ids, _, err := scanIDs(ctx, db, table, "")
	if err != nil {
		t.Fatal(err)
	}
	unacked, err := checkOnce(ids, l)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := db.OpenTable(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if n := tbl.Manifest().LiveRows(); n != int64(len(ids)) {
		t.Fatalf("after the merge the base table holds %d rows, the scan %d: rows left in the WAL", n, len(ids))
	}
	head, err := manifest.Head(ctx, db.Store(), table)
	if err != nil {
		t.Fatal(err)
	}
	if head != tbl.Version() {
		t.Fatalf("HEAD v%d, published v%d", head, tbl.Version())
	}
	checkVerify(t, db, table)
	again := recoverAll(t, db, table, shards)
	if len(again.Outcomes) != 0 || len(again.Merge.Shards) != 0 || again.Merge.Version != tbl.Version() {
		t.Fatalf("second recovery did something: %+v", again)
	}
	for sh, n := range again.Replayed {
		if n != 0 {
			t.Fatalf("second recovery replayed %d rows into shard %d", n, sh)
		}
	}
	ids2, _, err := scanIDs(ctx, db, table, "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	slices.Sort(ids2)
	if !slices.Equal(ids, ids2) {
		t.Fatalf("second recovery changed the rows: %d before, %d after", len(ids), len(ids2))
	}
	return unacked
}

// checkVerify: verify finds no fault in any version.
func checkVerify(t *testing.T, db *engine.DB, table string) {
	t.Helper()
	vr, err := verify.Table(context.Background(), db.Store(), db.Catalog(), table, verify.Options{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify: %v", vr.Err())
	}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
