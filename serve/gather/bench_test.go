package gather

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// EnvBench10k, set to 1, adds the 10,000-table case to BenchmarkTables (its setup
// creates 10,000 tables, which takes minutes).
const EnvBench10k = "SHALE_GATHER_BENCH_10K"

// BenchmarkTables measures one gathering pass over n tables on a local-disk store, each
// with three fragments and one WAL demand record (issue 12's planner pass at 1,000 and
// 10,000 tables; target under 1 s at 10,000). The pass after the first finds every
// manifest in the cache. Metrics: etcd-B/op (demand and pointers read), store-req/op,
// store-GET/op.
func BenchmarkTables(b *testing.B) {
	sizes := []int{1000}
	if os.Getenv(EnvBench10k) == "1" {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tables=%d", n), func(b *testing.B) {
			db, s := benchTables(b, n)
			ctx := context.Background()
			start := time.Now()
			states, st, err := Tables(ctx, db, Options{})
			if err != nil || len(states) != n {
				b.Fatalf("first pass: %d states, %v", len(states), err)
			}
			b.Logf("first (cold cache) pass over %d tables: %v, %d demand bytes, %d manifest reads", n, time.Since(start), st.DemandBytes, st.ManifestReads)
			ptrBytes := pointerBytes(b, db)
			logPhases(b, db)
			before := s.Counters().Snapshot()
			cpu0 := cpuTime()
			var demandBytes int64
			b.ResetTimer()
			for b.Loop() {
				states, st, err := Tables(ctx, db, Options{})
				if err != nil || len(states) != n || states[0].PendingGenerations != 2 {
					b.Fatalf("pass: %d states, %v", len(states), err)
				}
				demandBytes = st.DemandBytes
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			d := s.Counters().Snapshot().Sub(before)
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(demandBytes+ptrBytes), "etcd-B/op")
			b.ReportMetric(float64(d.Total())/float64(b.N), "store-req/op")
			b.ReportMetric(float64(d.ByOp[store.OpGet])/float64(b.N), "store-GET/op")
		})
	}
}

// benchTables creates n tables of three small fragments each, with a demand record of two
// pending generations each, on a fresh local-disk store.
func benchTables(b *testing.B, n int) (*engine.DB, store.Store) {
	b.Helper()
	s := storetest.Local(b)
	db := enginetest.OpenDB(b, s, engine.Options{})
	ctx := context.Background()
	next := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := benchTable(ctx, db, fmt.Sprintf("t%05d", i)); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return db, s
}

func benchTable(ctx context.Context, db *engine.DB, name string) error {
	tbl, err := db.CreateTable(ctx, name, schema)
	if err != nil {
		return err
	}
	for i := range 3 {
		rec := batch(i*10, 10)
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	_, err = db.Demand().Publish(ctx, name, flushEv("0", 2, time.Now().UnixMilli(), tbl.Manifest().IncarnationSince))
	return err
}

// cpuTime is the process's user and system CPU time so far (the embedded etcd server
// runs in this process, so its share of a pass counts too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// logPhases logs how long a pass's shared reads take alone: demand, pointers, sidecars.
func logPhases(b *testing.B, db *engine.DB) {
	ctx := context.Background()
	t0 := time.Now()
	if _, err := db.Demand().ReadAll(ctx); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	if _, _, err := db.Catalog().Snapshot(ctx, nil); err != nil {
		b.Fatal(err)
	}
	t2 := time.Now()
	if _, err := recovery.PendingSidecars(ctx, db.Store(), ""); err != nil {
		b.Fatal(err)
	}
	b.Logf("alone: demand ReadAll %v, pointers Snapshot %v, sidecar listing %v", t1.Sub(t0), t2.Sub(t1), time.Since(t2))
}

// pointerBytes is the size of every published pointer of db's catalog in etcd (keys and
// values, as demand.Snapshot.Bytes counts), what the pass's catalog.Snapshot reads.
func pointerBytes(b *testing.B, db *engine.DB) int64 {
	b.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: enginetest.Etcd().Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	pre := strings.TrimSuffix(db.Catalog().Key("x"), "x")
	resp, err := cli.Get(context.Background(), pre, clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, kv := range resp.Kvs {
		n += int64(len(kv.Key) + len(kv.Value) + 24)
	}
	return n
}
