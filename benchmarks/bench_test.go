package benchmarks

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
)

// Go benchmarks over the same variants Run measures. Each sub-benchmark times one variant
// alone (ns/op is the variant's timed part, without per-run setup such as CreateTable);
// BenchmarkRatio runs engine and baseline back to back per iteration and reports the
// paired ratio (wall and CPU time), which is the figure to compare against the targets.
// cpu-ns/op is the process CPU time of the timed part (every thread).
//
//	go test -bench . -run '^$' ./benchmarks/
//
// Data: $SHALE_BENCH_DATA, else testdata/flights-3m.parquet or the shared copy, else
// 1,000,000 synthetic rows. Store: $SHALE_BENCH_STORE (default: a temporary directory,
// file://). Etcd: the package's embedded server.

var (
	benchOnce sync.Once
	benchEnv  *env
	benchDS   *Dataset
	benchCfg  Config
	benchErr  error
	benchRep  atomic.Int64 // unique rep numbers across benchmark runs

	scanOnce     sync.Once
	scanVs       []variant
	scanErr      error
	historyMu    sync.Mutex
	historyTbls  = map[int]*engine.Table{}
	historyNoCat *engine.DB
)

func benchFixture(b *testing.B) (*env, *Dataset, Config) {
	b.Helper()
	benchOnce.Do(func() {
		ctx := context.Background()
		benchCfg, benchErr = Config{StoreURL: os.Getenv("SHALE_BENCH_STORE"), EtcdEndpoints: testEtcd.Endpoints(), Data: flightsPath()}.withDefaults()
		if benchErr != nil {
			return
		}
		if benchCfg.Data != "" {
			benchDS, benchErr = LoadParquet(ctx, benchCfg.Data, int64(benchCfg.Rows), benchCfg.BatchRows)
		} else {
			benchDS, benchErr = SyntheticFlights(int64(benchCfg.Rows), 1, benchCfg.BatchRows)
		}
		if benchErr != nil {
			return
		}
		benchEnv, benchErr = newEnv(ctx, benchCfg, io.Discard)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchEnv, benchDS, benchCfg
}

// closeBenchFixture is called by TestMain after the run.
func closeBenchFixture() {
	if benchEnv != nil {
		if err := benchEnv.close(); err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks: cleanup:", err)
		}
	}
	if benchDS != nil {
		benchDS.Release()
	}
}

// runVariant runs v once per iteration and reports its timed part as ns/op, plus rows/s,
// MB/s (the sample's Rows and Bytes per run) and store requests per run by kind.
func runVariant(b *testing.B, v variant) {
	ctx := context.Background()
	var total, cpu time.Duration
	n := 0
	for b.Loop() {
		runtime.GC()
		t, err := v.run(ctx, int(benchRep.Add(1)))
		if err != nil {
			b.Fatal(err)
		}
		v.s.add(t)
		total += t.Wall
		cpu += t.CPU
		n++
	}
	per := total / time.Duration(n)
	b.ReportMetric(float64(per.Nanoseconds()), "ns/op")
	b.ReportMetric(float64((cpu / time.Duration(n)).Nanoseconds()), "cpu-ns/op")
	if v.s.Rows > 1 {
		b.ReportMetric(float64(v.s.Rows)/per.Seconds(), "rows/s")
	}
	if v.s.Bytes > 0 {
		b.ReportMetric(float64(v.s.Bytes)/1e6/per.Seconds(), "MB/s")
	}
	for op, c := range v.s.Requests.ByOp {
		b.ReportMetric(float64(c), string(op)+"/op")
	}
}

func BenchmarkImport(b *testing.B) {
	e, ds, cfg := benchFixture(b)
	vs, err := importVariants(e, ds, cfg.FileRows)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range vs {
		b.Run(v.key, func(b *testing.B) { runVariant(b, v) })
	}
}

func benchScanVariants(b *testing.B) []variant {
	e, ds, cfg := benchFixture(b)
	scanOnce.Do(func() { scanVs, _, scanErr = scanVariants(context.Background(), e, ds, cfg) })
	if scanErr != nil {
		b.Fatal(scanErr)
	}
	return scanVs
}

func BenchmarkScan(b *testing.B) {
	for _, v := range benchScanVariants(b) {
		b.Run(v.key, func(b *testing.B) { runVariant(b, v) })
	}
}

// BenchmarkRatio reports engine throughput / baseline throughput (the median of per-
// iteration pairs, run back to back in alternating order) for the two throughput targets.
func BenchmarkRatio(b *testing.B) {
	pair := func(b *testing.B, engineV, baseV variant) {
		ctx := context.Background()
		eng, base := &Sample{}, &Sample{}
		i := 0
		for b.Loop() {
			order := []variant{{s: eng, run: engineV.run}, {s: base, run: baseV.run}}
			if i%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, v := range order {
				runtime.GC()
				t, err := v.run(ctx, int(benchRep.Add(1)))
				if err != nil {
					b.Fatal(err)
				}
				v.s.add(t)
			}
			i++
		}
		r := newRatio("", eng, base, 0)
		b.ReportMetric(r.Median(), "engine/baseline")
		b.ReportMetric(r.MedianCPU(), "engine/baseline-cpu")
		b.ReportMetric(float64(eng.Median().Nanoseconds()), "engine-ns/op")
		b.ReportMetric(float64(base.Median().Nanoseconds()), "baseline-ns/op")
	}
	b.Run("import", func(b *testing.B) {
		e, ds, cfg := benchFixture(b)
		vs, err := importVariants(e, ds, cfg.FileRows)
		if err != nil {
			b.Fatal(err)
		}
		pair(b, byKey(b, vs, "engine"), byKey(b, vs, "encode+put"))
	})
	b.Run("scan", func(b *testing.B) {
		vs := benchScanVariants(b)
		pair(b, byKey(b, vs, "engine"), byKey(b, vs, "raw"))
	})
}

func byKey(b *testing.B, vs []variant, key string) variant {
	for _, v := range vs {
		if v.key == key {
			return v
		}
	}
	b.Fatalf("no variant %q", key)
	return variant{}
}

// benchHistory returns the shared table with n versions (built on first use; commits by
// BenchmarkCommit make it grow).
func benchHistory(b *testing.B, n int) (*env, *engine.Table, *engine.DB) {
	e, _, _ := benchFixture(b)
	historyMu.Lock()
	defer historyMu.Unlock()
	ctx := context.Background()
	if historyNoCat == nil {
		db, err := e.openDB(ctx, func(o *engine.Options) { o.Etcd = nil })
		if err != nil {
			b.Fatal(err)
		}
		historyNoCat = db
	}
	if t, ok := historyTbls[n]; ok {
		return e, t, historyNoCat
	}
	small, err := SyntheticFlights(HistoryRows, 2, HistoryRows)
	if err != nil {
		b.Fatal(err)
	}
	t, err := historyTable(ctx, e.db, fmt.Sprintf("bench-history-%d", n), n, small.Records[0], io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	historyTbls[n] = t
	return e, t, historyNoCat
}

// BenchmarkOpen reports OpenTable latency and its store requests on tables with 10 and
// 1,000 versions.
func BenchmarkOpen(b *testing.B) {
	for _, n := range DefaultVersions {
		for _, catalog := range []bool{true, false} {
			name := fmt.Sprintf("versions=%d/catalog", n)
			if !catalog {
				name = fmt.Sprintf("versions=%d/no-catalog", n)
			}
			b.Run(name, func(b *testing.B) {
				e, t, noCat := benchHistory(b, n)
				db := e.db
				if !catalog {
					db = noCat
				}
				s := &Sample{Name: name, Rows: 1}
				runVariant(b, variant{s: s, run: openRun(e, db, t.Name(), t.Version(), s)})
				for op, c := range s.Etcd {
					b.ReportMetric(float64(c), "etcd-"+op+"/op")
				}
			})
		}
	}
}

// BenchmarkCommit reports the latency and requests of one small append on tables with 10
// and 1,000 versions (each iteration adds a version).
func BenchmarkCommit(b *testing.B) {
	small, err := SyntheticFlights(HistoryRows, 3, HistoryRows)
	if err != nil {
		b.Fatal(err)
	}
	defer small.Release()
	for _, n := range DefaultVersions {
		b.Run(fmt.Sprintf("versions=%d", n), func(b *testing.B) {
			e, t, _ := benchHistory(b, n)
			r := &HistoryResult{Versions: n, Commit: &Sample{Rows: HistoryRows}}
			runVariant(b, variant{s: r.Commit, run: commitRun(e, t, small.Records[0], r)})
			for op, c := range r.Commit.Etcd {
				b.ReportMetric(float64(c), "etcd-"+op+"/op")
			}
			if r.CommitRequestsVary {
				b.Errorf("store requests varied between commits (first: %s)", r.Commit.Requests)
			}
		})
	}
}
