package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// faultDB opens a DB on local disk behind a fault-injecting store, with its own etcd
// client whose KV injects etcd faults.
func faultDB(t *testing.T) (*DB, *faults.Store, *faults.EtcdKV) {
	t.Helper()
	ctx := context.Background()
	seed := faults.NewSeed(t)
	fs := faults.NewStore(storetest.Local(t), seed)
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: testEtcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	kv := faults.WrapKV(cli.Etcd(), seed)
	db, err := Open(ctx, fs, Options{Etcd: cli.Etcd(), PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return db, fs, kv
}

// requireReferencedFiles checks that every object any version of table references still
// exists (nothing a version needs was deleted, whatever failed), and HEAD ≥ published.
func requireReferencedFiles(t *testing.T, db *DB, table string) {
	t.Helper()
	ctx := context.Background()
	vs, err := manifest.Versions(ctx, db.store, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		m, err := manifest.Load(ctx, db.store, table, v)
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		for _, f := range m.Fragments {
			keys := []string{}
			for _, df := range f.Files {
				keys = append(keys, df.Key)
			}
			if f.Deletion != nil {
				keys = append(keys, f.Deletion.Key)
			}
			for _, k := range keys {
				if _, err := db.store.Head(ctx, k); err != nil {
					t.Fatalf("version %d references %s: %v", v, k, err)
				}
			}
		}
	}
	if db.cat != nil {
		p, _, err := db.cat.Get(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		if head := vs[len(vs)-1]; p.Version > head {
			t.Fatalf("published %d above HEAD %d", p.Version, head)
		}
	}
}

// versionsOf counts the versions that committed transaction id.
func versionsOf(t *testing.T, db *DB, table, id string) int {
	t.Helper()
	ctx := context.Background()
	vs, _ := manifest.Versions(ctx, db.store, table)
	n := 0
	for _, v := range vs {
		m, err := manifest.Load(ctx, db.store, table, v)
		if err != nil {
			t.Fatal(err)
		}
		if m.Txn.ID == id {
			n++
		}
	}
	return n
}

// TestDroppedManifestResponseIsUnknownThenRetryCommitsOnce: the manifest put lands but
// its response is lost and the version cannot be read back: the write is Unknown (not
// rejected); a retry with the same transaction finds its version and the rows exist once.
func TestDroppedManifestResponseIsUnknownThenRetryCommitsOnce(t *testing.T) {
	ctx := context.Background()
	db, fs, _ := faultDB(t)
	tbl, err := db.CreateTable(ctx, "u", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	// Every attempt's reply is lost (an identical retry would otherwise succeed at once:
	// the same transaction on the same parent encodes to the same bytes).
	// (Armed once the append has planned on HEAD and written its files.)
	atSeam(t, "manifest.before_txn_put", func() {
		fs.Add(faults.Rule{Name: "lost reply", Ops: []store.Op{store.OpPutIfAbsent}, Key: "u/_versions/*", Kind: faults.DropResponse})
		fs.Add(faults.Rule{Name: "no read-back", Ops: []store.Op{store.OpGet}, Key: "u/_versions/*", Kind: faults.DropRequest})
	})
	rec := kvBatch(0, 5)
	_, err = tbl.AppendRecord(ctx, rec)
	rec.Release()
	var ue *UnknownError
	if OutcomeOf(err) != Unknown || !errors.As(err, &ue) || ue.Committed {
		t.Fatalf("append: %v (outcome %v), want unknown", err, OutcomeOf(err))
	}
	fs.Clear()
	res, err := tbl.Retry(ctx, ue.Txn)
	if err != nil || !res.Published {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if n := versionsOf(t, db, "u", ue.Txn.ID); n != 1 {
		t.Fatalf("transaction committed %d times", n)
	}
	if got := ids(t, mustOpen(t, db, "u"), ""); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("rows %v", got)
	}
	requireReferencedFiles(t, db, "u")
}

// TestDroppedPublishResponseIsUnknownThenRetryPublishesOnce: the pointer write lands in
// etcd but the reply never comes (the publish runs out of time). The publish then decides
// on a fresh read: it finds its pointer in place and reports success. When that read
// fails too, the append is Unknown with the version committed, and a retry publishes it
// without committing again.
func TestDroppedPublishResponseIsUnknownThenRetryPublishesOnce(t *testing.T) {
	ctx := context.Background()
	t.Run("decided by a fresh read", func(t *testing.T) {
		db, _, kv := faultDB(t)
		db.opts.PublishTimeout = 300 * time.Millisecond
		tbl, err := db.CreateTable(ctx, "p", kvSchema)
		if err != nil {
			t.Fatal(err)
		}
		h := kv.Add(faults.EtcdRule{Name: "lost publish reply", Ops: []faults.EtcdOp{faults.EtcdTxn}, WritesOnly: true, Kind: faults.HangAfterSend, Times: 1})
		rec := kvBatch(0, 3)
		res, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil || !res.Published || h.Injected() != 1 {
			t.Fatalf("append: %+v, %v (lost replies %d); want published: the re-read finds our pointer", res, err, h.Injected())
		}
		if p, _, err := db.Catalog().Get(ctx, "p"); err != nil || p.Version != res.Version {
			t.Fatalf("pointer %+v, %v; want version %d", p, err, res.Version)
		}
	})
	t.Run("undecidable then retried", func(t *testing.T) {
		db, _, kv := faultDB(t)
		db.opts.PublishTimeout = 300 * time.Millisecond
		tbl, err := db.CreateTable(ctx, "p", kvSchema)
		if err != nil {
			t.Fatal(err)
		}
		lost := kv.Add(faults.EtcdRule{Name: "lost publish reply", Ops: []faults.EtcdOp{faults.EtcdTxn}, WritesOnly: true, Kind: faults.HangAfterSend, Times: 1})
		// Once the write has been sent (it then hangs until the 300 ms deadline), etcd
		// stops answering, so the deciding read fails too.
		done := make(chan struct{})
		go func() {
			defer close(done)
			deadline := time.Now().Add(10 * time.Second)
			for lost.Injected() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			kv.Add(faults.EtcdRule{Name: "etcd down", Kind: faults.DropRequest})
		}()
		rec := kvBatch(0, 3)
		_, err = tbl.AppendRecord(ctx, rec)
		rec.Release()
		<-done
		var ue *UnknownError
		if OutcomeOf(err) != Unknown || !errors.As(err, &ue) || !ue.Committed {
			t.Fatalf("append: %v, want unknown with the version committed", err)
		}
		kv.Clear()
		res, err := mustOpen(t, db, "p").Retry(ctx, ue.Txn)
		if err != nil || res.Version != ue.Version {
			t.Fatalf("retry: %+v %v (want version %d)", res, err, ue.Version)
		}
		if n := versionsOf(t, db, "p", ue.Txn.ID); n != 1 {
			t.Fatalf("transaction committed %d times", n)
		}
		if got := ids(t, mustOpen(t, db, "p"), ""); fmt.Sprint(got) != "[0 1 2]" {
			t.Fatalf("rows %v", got)
		}
	})
}

// TestStormEndsCommittedOrRejected: under a seeded storm of 503s and lost replies on every
// store request, every append ends Committed, Rejected or Unknown; after the storm the
// unknown ones are retried, and the table holds exactly the rows of the committed appends,
// once each, with every referenced file present.
func TestStormEndsCommittedOrRejected(t *testing.T) {
	ctx := context.Background()
	db, fs, _ := faultDB(t)
	tbl, err := db.CreateTable(ctx, "storm", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	handles := []*Table{mustOpen(t, db, "storm"), mustOpen(t, db, "storm"), mustOpen(t, db, "storm")}
	fs.Add(faults.Rule{Name: "lost reply", Ops: []store.Op{store.OpPutIfAbsent, store.OpPut}, Kind: faults.DropResponse, Probability: 0.1})
	fs.Add(faults.Rule{Name: "503", Kind: faults.DropRequest, Probability: 0.15})
	type result struct {
		from int64
		err  error
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := handles[w]
			for i := 0; i < 10; i++ {
				from := int64(w*1000 + i*10)
				rec := kvBatch(from, from+10)
				_, err := h.AppendRecord(ctx, rec)
				rec.Release()
				mu.Lock()
				results = append(results, result{from, err})
				mu.Unlock()
				if OutcomeOf(err) != Committed {
					h.Refresh(ctx) // may fail in the storm; the next commit rebases anyway
				}
			}
		}()
	}
	wg.Wait()
	_ = tbl
	fs.Clear()
	var want []int64
	counts := map[Outcome]int{}
	for _, r := range results {
		counts[OutcomeOf(r.err)]++
		var ue *UnknownError
		switch {
		case r.err == nil:
		case errors.As(r.err, &ue):
			if _, err := mustOpen(t, db, "storm").Retry(ctx, ue.Txn); err != nil {
				t.Fatalf("retry after the storm: %v", err)
			}
		default:
			continue // rejected: its rows must not appear
		}
		want = append(want, seq(r.from, r.from+10)...)
	}
	t.Logf("outcomes: %d committed, %d rejected, %d unknown (retried); injections %d", counts[Committed], counts[Rejected], counts[Unknown], len(fs.Injections()))
	got := ids(t, mustOpen(t, db, "storm"), "")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows: got %d, want %d (committed exactly once, rejected never)", len(got), len(want))
	}
	requireReferencedFiles(t, db, "storm")
}

// TestEtcdRestartInTheCommitLoop: etcd stops just before a version is put and comes back
// while the writer is publishing: the write ends committed and published.
func TestEtcdRestartInTheCommitLoop(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	db.opts.PublishTimeout = 20 * time.Second
	tbl, err := db.CreateTable(ctx, "r", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	restart := faults.RestartEtcdAt(testEtcd, "manifest.before_version_put", faults.RestartOptions{Down: 300 * time.Millisecond})
	defer restart.Cancel()
	res := appendRange(t, tbl, 0, 4)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := restart.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	p, _, err := db.cat.Get(ctx, "r")
	if err != nil || p.Version != res.Version || !res.Published {
		t.Fatalf("after the restart: published %d (%v), committed %+v", p.Version, err, res)
	}
	requireReferencedFiles(t, db, "r")
}
