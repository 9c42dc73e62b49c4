package benchmarks

// Issue 12's benchmarks of `shale serve` (benchmarks/RESULTS.md, "shale serve"): a
// planning pass at 1,000 and 10,000 tables, schedule-to-bind latency with 1,000 tables of
// synthetic demand, and a steady WAL workload with a Server running. Benchmarks only: no
// Test function here, so `go test ./benchmarks/` never runs them.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/gather"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
	"github.com/shale-db/shale/store"
)

// Environment gates of the serve benchmarks.
const (
	// EnvServeBench10k, set to 1, adds 10,000 tables to BenchmarkServePass (setup creates
	// them: minutes on a loaded machine).
	EnvServeBench10k = "SHALE_SERVE_BENCH_10K"
	// EnvServeSteady is the steady workload's duration (a Go duration, e.g. 4m); unset,
	// BenchmarkServeSteady skips.
	EnvServeSteady = "SHALE_SERVE_STEADY"
	// EnvServeBindPlacements is BenchmarkServeScheduleToBind's MaxPlacements (default 64;
	// each executor gets half as many merge_wal slots).
	EnvServeBindPlacements = "SHALE_SERVE_BIND_PLACEMENTS"
	// EnvServePassProfile is a file BenchmarkServePass writes a CPU profile of its timed
	// passes to (of the last size run; setup excluded).
	EnvServePassProfile = "SHALE_SERVE_PASS_PROFILE"
)

// serveDB opens a DB on a fresh local-disk store (removed by closeServeFixtures) with
// the package's embedded etcd as its catalog (a store of its own: its catalog prefix, and
// so its serve keys, are its own).
func serveDB(b *testing.B) (*engine.DB, *clientv3.Client) {
	b.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "shale-serve-bench-")
	if err != nil {
		b.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: testEtcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	serveCleanups = append(serveCleanups, func() { cli.Close(); os.RemoveAll(dir) })
	st, err := store.Open(ctx, "file://"+dir, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	db, err := engine.Open(ctx, st, engine.Options{Etcd: cli})
	if err != nil {
		b.Fatal(err)
	}
	return db, cli
}

// serveFixture is BenchmarkServePass's tables, built once per size and kept across the
// benchmark's runs (the framework calls it again for each b.N).
type serveFixture struct {
	db  *engine.DB
	cli *clientv3.Client
}

var (
	serveFixtures = map[int]*serveFixture{}
	serveCleanups []func()
)

// closeServeFixtures removes the serve benchmarks' stores (TestMain calls it).
func closeServeFixtures() {
	for _, f := range serveCleanups {
		f()
	}
}

// syntheticDemandTables creates n tables ("t00000" …) of one 10-row fragment each, each
// with a demand record of gens pending generations on shard 0 (published as its writer
// would, flushed now; the tables have no WAL: the demand is synthetic).
func syntheticDemandTables(b *testing.B, db *engine.DB, n int, gens uint64) {
	b.Helper()
	ds, err := SyntheticFlights(10, 7, 10)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	next := make(chan int)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := syntheticDemandTable(ctx, db, fmt.Sprintf("t%05d", i), ds, gens); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	b.Logf("setup: %d tables with %d pending generations each in %v", n, gens, time.Since(start).Round(time.Second))
}

func syntheticDemandTable(ctx context.Context, db *engine.DB, name string, ds *Dataset, gens uint64) error {
	tbl, err := db.CreateTable(ctx, name, ds.Schema)
	if err != nil {
		return err
	}
	if _, err := tbl.AppendRecord(ctx, ds.Records[0]); err != nil {
		return err
	}
	_, err = db.Demand().Publish(ctx, name, demand.Event{V: demand.CurrentVersion, Shard: "0", SealedThrough: gens,
		SealedBytesThrough: gens * 1000, FlushedAtMs: time.Now().UnixMilli(), WriterEpoch: 1, Source: demand.SourceWriter,
		IncarnationSince: tbl.Manifest().IncarnationSince})
	return err
}

// prefixBytes is the size of every key under prefix (keys, values and 24 bytes of
// revisions each, as demand.Snapshot.Bytes counts): what a read of the prefix returns.
func prefixBytes(b *testing.B, cli *clientv3.Client, prefix string) int64 {
	b.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, kv := range resp.Kvs {
		n += int64(len(kv.Key) + len(kv.Value) + 24)
	}
	return n
}

// benchPass is one planning pass as serve's planner makes it (serve/planner.go: pass and
// input), with serve/gather's real picture in place of the runtime's temporary stub:
// state.Read of every serve key, gather.Tables, plan.Plan, then one guarded placement
// transaction (state.Place) per placement.
type benchPass struct {
	st   *state.State
	db   *engine.DB
	lead state.Guard
	seq  int
}

type passTimes struct {
	read, gather, plan, place time.Duration
	demandBytes               int64
	manifestReads             int
	placed, refused           int
	tables                    int
}

func (p *benchPass) run(ctx context.Context) (passTimes, error) {
	var pt passTimes
	t0 := time.Now()
	snap, err := p.st.Read(ctx)
	if err != nil {
		return pt, err
	}
	t1 := time.Now()
	tables, stats, err := gather.Tables(ctx, p.db, gather.Options{})
	if err != nil {
		return pt, err
	}
	t2 := time.Now()
	in := plan.Input{Now: t2, Tables: tables, Policies: map[string]plan.Policy{}, Histories: snap.Histories, Failures: snap.Failures}
	for _, t := range tables {
		pol, ok := snap.Policies[t.Table]
		if !ok {
			pol = plan.DefaultPolicy()
		}
		in.Policies[t.Table] = pol.WithDefaults()
	}
	for _, e := range snap.Executors {
		in.Executors = append(in.Executors, e.Plan())
	}
	for _, a := range snap.Assignments {
		in.Assignments = append(in.Assignments, a.Plan())
	}
	out := plan.Plan(in)
	t3 := time.Now()
	execs := map[string]state.Executor{}
	for _, e := range snap.Executors {
		execs[e.ID] = e
	}
	for _, pl := range out.Placements {
		p.seq++
		a := state.Assignment{ID: fmt.Sprintf("bench-%08d", p.seq), Table: pl.Unit.Table, Kind: pl.Unit.Kind, Executor: pl.Executor,
			Bytes: pl.Bytes, Slots: max(pl.Unit.Slots, 1), PlacedAt: time.Now().UTC(), State: state.StateAssigned}
		var hist *plan.History
		if plan.TakesWriteTurn(pl.Unit.Kind) {
			turns := append(append([]plan.Kind(nil), snap.Histories[pl.Unit.Table].Turns...), pl.Unit.Kind)
			if keep := in.Policies[pl.Unit.Table].MaxConsecutiveTurns + 1; len(turns) > keep {
				turns = turns[len(turns)-keep:]
			}
			hist = &plan.History{Turns: turns}
		}
		g := p.lead
		g.Executor = execs[pl.Executor]
		if _, err := p.st.Place(ctx, g, a, hist); err != nil {
			pt.refused++
			continue
		}
		pt.placed++
	}
	t4 := time.Now()
	pt.read, pt.gather, pt.plan, pt.place = t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3)
	pt.demandBytes, pt.manifestReads, pt.tables = stats.DemandBytes, stats.ManifestReads, len(tables)
	return pt, nil
}

// BenchmarkServePass measures one whole planning pass (serve state read, gather.Tables,
// plan.Plan, the placement transactions) over n tables of synthetic WAL demand, with the
// pass's process holding the election and two registered executors of 8 merge_wal slots
// each (nobody runs the work: between passes, untimed, the pass's assignments are
// deleted, so every pass places the default MaxPlacements, 8). Metrics: the phases' wall
// times, process CPU per pass (the embedded etcd server is in this process), etcd bytes
// read per pass (demand as gather counts it, plus the catalog's pointers and the serve
// keys measured by a prefix read), manifest reads.
func BenchmarkServePass(b *testing.B) {
	sizes := []int{1000}
	if os.Getenv(EnvServeBench10k) == "1" {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("tables=%d", n), func(b *testing.B) {
			ctx := context.Background()
			fx := serveFixtures[n]
			if fx == nil {
				db, cli := serveDB(b)
				syntheticDemandTables(b, db, n, 16)
				fx = &serveFixture{db: db, cli: cli}
				serveFixtures[n] = fx
			}
			db, cli := fx.db, fx.cli
			st := serve.StateOf(db)
			sess, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close()
			el := concurrency.NewElection(sess, st.Keys().Leader())
			if err := el.Campaign(ctx, "bench-planner"); err != nil {
				b.Fatal(err)
			}
			p := &benchPass{st: st, db: db, lead: state.Guard{LeaderKey: el.Key(), LeaderRevision: el.Rev()}}
			for i := range 2 {
				e := state.Executor{ID: fmt.Sprintf("bench-exec-%d", i), PID: os.Getpid(), Host: "bench",
					Slots: map[string]int{string(plan.KindMergeWAL): 8, string(plan.KindCompact): 2, string(plan.KindIndex): 2,
						string(plan.KindRecover): 2, string(plan.KindPublish): 2},
					Bytes: 8 << 30, Started: time.Now().UTC(), Lease: int64(sess.Lease())}
				if _, err := st.RegisterExecutor(ctx, e, sess.Lease()); err != nil {
					b.Fatal(err)
				}
			}
			clear := func() {
				if _, err := cli.Delete(ctx, st.Keys().Assignments(), clientv3.WithPrefix()); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			cold, err := p.run(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("first pass of this run (manifests cached only after the fixture's first run): %v (read %v, gather %v, plan %v, place %v), %d placed, %d manifest reads",
				time.Since(start).Round(time.Millisecond), cold.read, cold.gather, cold.plan, cold.place, cold.placed, cold.manifestReads)
			if cold.placed == 0 || cold.tables != n {
				b.Fatalf("cold pass placed %d over %d tables", cold.placed, cold.tables)
			}
			clear()
			catPrefix := strings.TrimSuffix(db.Catalog().Key("x"), "x")
			ptrBytes := prefixBytes(b, cli, catPrefix)
			var sum passTimes
			var cpu time.Duration
			var serveBytes int64
			if path := os.Getenv(EnvServePassProfile); path != "" {
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
			b.ResetTimer()
			for range b.N {
				serveBytes += prefixBytes(b, cli, st.Keys().Root())
				c0 := processCPU()
				b.StartTimer()
				pt, err := p.run(ctx)
				b.StopTimer()
				cpu += processCPU() - c0
				if err != nil {
					b.Fatal(err)
				}
				if pt.placed != plan.DefaultMaxPlacements {
					b.Fatalf("pass placed %d (refused %d), want %d", pt.placed, pt.refused, plan.DefaultMaxPlacements)
				}
				sum.read += pt.read
				sum.gather += pt.gather
				sum.plan += pt.plan
				sum.place += pt.place
				sum.demandBytes += pt.demandBytes
				sum.manifestReads += pt.manifestReads
				clear()
			}
			nb := float64(b.N)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / nb }
			b.ReportMetric(ms(cpu), "cpu-ms/op")
			b.ReportMetric(ms(sum.read), "read-ms/op")
			b.ReportMetric(ms(sum.gather), "gather-ms/op")
			b.ReportMetric(ms(sum.plan), "plan-ms/op")
			b.ReportMetric(ms(sum.place), "place-ms/op")
			b.ReportMetric(float64(sum.demandBytes)/nb, "demand-B/op")
			b.ReportMetric(float64(ptrBytes), "pointer-B/op")
			b.ReportMetric(float64(serveBytes)/nb, "serve-B/op")
			b.ReportMetric(float64(sum.demandBytes)/nb+float64(ptrBytes)+float64(serveBytes)/nb, "etcd-B/op")
			b.ReportMetric(float64(sum.manifestReads)/nb, "manifests/op")
		})
	}
}

// bindRecorder is a serve.Metrics that keeps every schedule-to-bind observation.
type bindRecorder struct {
	mu    sync.Mutex
	binds []time.Duration
	execs map[string]int
}

func (r *bindRecorder) ObserveScheduleToBind(kind string, d time.Duration) {
	r.mu.Lock()
	r.binds = append(r.binds, d)
	r.mu.Unlock()
}
func (r *bindRecorder) Execution(kind, phase string) {
	r.mu.Lock()
	r.execs[kind+"/"+phase]++
	r.mu.Unlock()
}
func (r *bindRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.binds)
}
func (r *bindRecorder) ObserveTurnWait(string, time.Duration) {}
func (r *bindRecorder) Placement(string)                      {}
func (r *bindRecorder) SetBacklog(map[string]int)             {}
func (r *bindRecorder) SetRunning(string, int)                {}
func (r *bindRecorder) Stall(string)                          {}
func (r *bindRecorder) Recovery(string)                       {}
func (r *bindRecorder) SetLeader(bool)                        {}
func (r *bindRecorder) ObservePass(time.Duration, int64)      {}
func (r *bindRecorder) SetTopTables(map[string]uint64)        {}

// quantile is the q-quantile of sorted ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// BenchmarkServeScheduleToBind runs the real runtime: two serve.Servers (in this
// process, on the package's embedded etcd) over 1,000 tables of synthetic WAL demand (16
// pending generations each; the tables have no WAL, so each merge_wal execution ends at
// once with engine.ErrNoWAL, a data failure the planner then holds: the run is trivial and
// every table is placed exactly once). It records the runtime's own schedule-to-bind
// observation (serve.Metrics.ObserveScheduleToBind: the executor's bind start minus the
// assignment's PlacedAt, set just before the placement transaction) until 1,000 binds.
// Config: pass interval 1 s, MaxPlacements 64 (SHALE_SERVE_BIND_PLACEMENTS), half as
// many merge_wal slots per executor. Run with -benchtime=1x.
func BenchmarkServeScheduleToBind(b *testing.B) {
	const n, executors = 1000, 2
	if b.N > 1 {
		b.Skip("every table is placed once: run with -benchtime=1x")
	}
	ctx := context.Background()
	db, _ := serveDB(b)
	syntheticDemandTables(b, db, n, 16)
	rec := &bindRecorder{execs: map[string]int{}}
	places := 64
	if v := os.Getenv(EnvServeBindPlacements); v != "" {
		if _, err := fmt.Sscan(v, &places); err != nil || places < 2 {
			b.Fatalf("%s=%q: want a number of at least 2", EnvServeBindPlacements, v)
		}
	}
	cfg := state.Config{PassInterval: time.Second, MaxPlacements: places}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rec.binds = nil
		b.StartTimer()
		c0 := processCPU()
		start := time.Now()
		var servers []*serve.Server
		for i := range executors {
			s, err := serve.New(ctx, db, serve.Options{ID: fmt.Sprintf("bind-%d", i), Config: cfg,
				Slots:   map[plan.Kind]int{plan.KindMergeWAL: places / executors},
				Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
				Metrics: rec})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Start(ctx); err != nil {
				b.Fatal(err)
			}
			servers = append(servers, s)
		}
		deadline := time.Now().Add(15 * time.Minute)
		for rec.count() < n && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		elapsed := time.Since(start)
		cpu := processCPU() - c0
		for _, s := range servers {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_ = s.Close(cctx)
			cancel()
		}
		rec.mu.Lock()
		ds := slices.Clone(rec.binds)
		execs := fmt.Sprint(rec.execs)
		rec.mu.Unlock()
		if len(ds) < n {
			b.Fatalf("%d binds of %d within the deadline", len(ds), n)
		}
		slices.Sort(ds)
		b.Logf("%d binds in %v (CPU %v): p50 %v, p90 %v, p99 %v, max %v; executions %s", len(ds), elapsed.Round(time.Millisecond),
			cpu.Round(time.Millisecond), quantile(ds, .5), quantile(ds, .9), quantile(ds, .99), ds[len(ds)-1], execs)
		b.ReportMetric(float64(quantile(ds, .5).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(quantile(ds, .99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(len(ds)), "binds")
		b.ReportMetric(float64(cpu.Milliseconds()), "cpu-ms")
	}
}

// steadySample is one sample of BenchmarkServeSteady.
type steadySample struct {
	at        time.Duration
	pending   []uint64 // pending generations per table (demand)
	fragments []int    // fragments of the published version per table
	count     time.Duration
	scan      time.Duration // filtered scan of table 0
	appendP99 time.Duration // WAL append latency p99 since the last sample, over all writers
	acked     int64
	merges    int
	compacts  int
	cpu       time.Duration // process CPU since the last sample
}

// BenchmarkServeSteady is issue 12's steady workload scaled down: three tables with one
// WAL shard each (flush interval 1 s), one writer per table appending a 100-row batch
// every 100 ms through the WAL (1,000 rows/s per table), and one serve.Server in this
// process (pass interval 2 s, default policy: merge at 8 pending generations, compact at
// 16 small fragments; one slot of each kind). Every 10 s it samples each table's pending
// generations (demand), fragments (published manifest), the latency of Count("") and of a
// filtered scan on a fresh handle, and the writers' append p99. At the end it checks that
// every acknowledged row is counted. Duration from SHALE_SERVE_STEADY (skipped when unset);
// run with -benchtime=1x -v.
func BenchmarkServeSteady(b *testing.B) {
	durText := os.Getenv(EnvServeSteady)
	if durText == "" {
		b.Skip("set " + EnvServeSteady + " to a duration (e.g. 4m)")
	}
	dur, err := time.ParseDuration(durText)
	if err != nil {
		b.Fatal(err)
	}
	if b.N > 1 {
		b.Skip("run with -benchtime=1x")
	}
	const tables, batchRows, every, sampleEvery = 3, 100, 100 * time.Millisecond, 10 * time.Second
	ctx := context.Background()
	db, _ := serveDB(b)
	ds, err := SyntheticFlights(1000, 11, batchRows)
	if err != nil {
		b.Fatal(err)
	}
	base, err := SyntheticFlights(10_000, 12, 10_000)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, tables)
	writers := make([]*engine.WALWriter, tables)
	for i := range tables {
		names[i] = fmt.Sprintf("steady%d", i)
		tbl, err := db.CreateTable(ctx, names[i], ds.Schema)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.AppendRecord(ctx, base.Records[0]); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.UpdateConfig(ctx, map[string]string{engine.ConfigWALShards: "1", engine.ConfigWALFlushInterval: "1s"}, nil); err != nil {
			b.Fatal(err)
		}
		if writers[i], err = tbl.WAL(ctx, 0); err != nil {
			b.Fatal(err)
		}
	}
	rec := &bindRecorder{execs: map[string]int{}}
	srv, err := serve.New(ctx, db, serve.Options{ID: "steady", Config: state.Config{PassInterval: 2 * time.Second},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: rec})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := srv.Start(ctx); err != nil {
		b.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	var acked atomic.Int64
	var lmu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var werr atomic.Pointer[error]
	for i := range tables {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
				// Append under ctx, not wctx: an append cancelled while its entry is
				// being written may still land, unacknowledged, and the count at the
				// end would not match.
				t0 := time.Now()
				if _, err := writers[i].Append(ctx, ds.Records[k%len(ds.Records)]); err != nil {
					werr.CompareAndSwap(nil, &err)
					return
				}
				acked.Add(batchRows)
				lmu.Lock()
				lat = append(lat, time.Since(t0))
				lmu.Unlock()
			}
		}()
	}
	start := time.Now()
	var samples []steadySample
	lastCPU := processCPU()
	for time.Since(start) < dur && werr.Load() == nil {
		time.Sleep(sampleEvery - time.Since(start)%sampleEvery)
		s := steadySample{at: time.Since(start).Round(time.Second), acked: acked.Load()}
		for _, n := range names {
			snap, err := db.Demand().ReadTable(ctx, n)
			if err != nil {
				b.Fatal(err)
			}
			var p uint64
			if td := snap.Tables[n]; td != nil {
				p = td.PendingGenerations()
			}
			s.pending = append(s.pending, p)
			h, err := db.OpenTable(ctx, n)
			if err != nil {
				b.Fatal(err)
			}
			s.fragments = append(s.fragments, len(h.Manifest().Fragments))
		}
		h, err := db.OpenTable(ctx, names[0])
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := h.Count(ctx, ""); err != nil {
			b.Fatal(err)
		}
		s.count = time.Since(t0)
		t0 = time.Now()
		sc, err := h.Scan(ctx, engine.ScanOptions{Filter: walFilter})
		if err != nil {
			b.Fatal(err)
		}
		for sc.Next() {
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
		sc.Release()
		s.scan = time.Since(t0)
		lmu.Lock()
		ls := lat
		lat = nil
		lmu.Unlock()
		slices.Sort(ls)
		s.appendP99 = quantile(ls, .99)
		rec.mu.Lock()
		s.merges, s.compacts = rec.execs["merge_wal/succeeded"], rec.execs["compact/succeeded"]
		rec.mu.Unlock()
		c := processCPU()
		s.cpu, lastCPU = c-lastCPU, c
		samples = append(samples, s)
		b.Logf("t=%v pending=%v fragments=%v count=%v scan=%v append-p99=%v acked=%d merges=%d compactions=%d cpu=%v",
			s.at, s.pending, s.fragments, s.count.Round(time.Millisecond), s.scan.Round(time.Millisecond),
			s.appendP99.Round(time.Millisecond), s.acked, s.merges, s.compacts, s.cpu.Round(time.Millisecond))
	}
	stop()
	wg.Wait()
	if p := werr.Load(); p != nil {
		b.Fatal(*p)
	}
	for _, w := range writers {
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	if err := srv.Close(cctx); err != nil {
		b.Log("close:", err)
	}
	cancel()
	b.StopTimer()
	var total int64
	for _, n := range names {
		h, err := db.OpenTable(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		c, err := h.Count(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %d rows", n, c)
		total += c - base.Records[0].NumRows()
	}
	b.Logf("rows counted above the base %d, acknowledged %d; executions %v", total, acked.Load(), rec.execs)
	if total != acked.Load() {
		b.Fatalf("counted %d rows above the base, %d acknowledged", total, acked.Load())
	}
	var maxPending uint64
	var maxFrags int
	for _, s := range samples {
		maxPending = max(maxPending, slices.Max(s.pending))
		maxFrags = max(maxFrags, slices.Max(s.fragments))
	}
	half := len(samples) / 2
	med := func(ss []steadySample, f func(steadySample) time.Duration) time.Duration {
		var ds []time.Duration
		for _, s := range ss {
			ds = append(ds, f(s))
		}
		slices.Sort(ds)
		return quantile(ds, .5)
	}
	countOf := func(s steadySample) time.Duration { return s.count }
	scanOf := func(s steadySample) time.Duration { return s.scan }
	b.Logf("max pending %d, max fragments %d; count median first half %v, second half %v; scan median %v, %v", maxPending, maxFrags,
		med(samples[:half], countOf), med(samples[half:], countOf), med(samples[:half], scanOf), med(samples[half:], scanOf))
	b.ReportMetric(float64(maxPending), "max-pending-gens")
	b.ReportMetric(float64(maxFrags), "max-fragments")
}
