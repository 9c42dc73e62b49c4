package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

// TestRunTxnTiny runs the txn suite small: 1 and 2 writer processes for a short window,
// histories of 3 and 30 versions. It checks the runner's bookkeeping (every acknowledged
// commit is a version of the table, requests are counted in the writers), never timing.
func TestRunTxnTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{
		StoreURL:          "file://" + t.TempDir(),
		EtcdEndpoints:     testEtcd.Endpoints(),
		Suites:            []string{SuiteTxn},
		Reps:              2,
		OpenReps:          2,
		TxnWriters:        []int{1, 2},
		TxnWindow:         300 * time.Millisecond,
		TxnReps:           1,
		TxnVersions:       []int{3, 30},
		TxnAppendVersions: []int{3},
	}
	var log bytes.Buffer
	rep, err := Run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
	}
	r := rep.Txn
	if r == nil || rep.Import != nil || len(rep.History) != 0 {
		t.Fatalf("suites: txn %v import %v history %d", r != nil, rep.Import != nil, len(rep.History))
	}
	if len(r.Writers) != 2 {
		t.Fatalf("%d writer results, want 2", len(r.Writers))
	}
	for _, w := range r.Writers {
		if len(w.Reps) != 1 {
			t.Fatalf("%d writers: %d windows", w.Procs, len(w.Reps))
		}
		rp := w.Reps[0]
		if len(rp.PerWriter) != w.Procs || rp.Commits < w.Procs || rp.Elapsed < cfg.TxnWindow {
			t.Errorf("%d writers: %d commits %v per writer in %v", w.Procs, rp.Commits, rp.PerWriter, rp.Elapsed)
		}
		for i, n := range rp.PerWriter {
			if n == 0 {
				t.Errorf("%d writers: writer %d committed nothing", w.Procs, i)
			}
		}
		// Each commit made at least its data file, its transaction record and one
		// put-if-absent of its manifest, all counted in the writer processes.
		if got := rp.Requests.ByOp[store.OpPutIfAbsent]; got < int64(rp.Commits) || rp.Requests.ByOp[store.OpPut] < 2*int64(rp.Commits) {
			t.Errorf("%d writers: %d commits made %s", w.Procs, rp.Commits, rp.Requests)
		}
		if rp.Attempts < rp.Commits || rp.Etcd["txn"] < int64(rp.Commits) {
			t.Errorf("%d writers: %d commits, %d attempts, etcd %v", w.Procs, rp.Commits, rp.Attempts, rp.Etcd)
		}
	}
	if len(r.Histories) != 3 {
		t.Fatalf("%d histories, want 3", len(r.Histories))
	}
	var cfgSmall, cfgBig *TxnHistory
	for i := range r.Histories {
		h := &r.Histories[i]
		if len(h.Open.Times) != cfg.OpenReps || len(h.Commit.Times) != cfg.Reps || h.Open.Requests.ByOp[store.OpGet] != 1 {
			t.Errorf("%s %d: %d opens (%s), %d commits", h.Kind, h.Versions, len(h.Open.Times), h.Open.Requests, len(h.Commit.Times))
		}
		if h.Kind == HistoryConfig && h.Versions == 3 {
			cfgSmall = h
		}
		if h.Kind == HistoryConfig && h.Versions == 30 {
			cfgBig = h
		}
	}
	// Configuration changes do not grow the manifest (one fragment at 3 and at 30 versions;
	// only the key's value differs).
	if cfgSmall == nil || cfgBig == nil || cfgBig.ManifestBytes-cfgSmall.ManifestBytes > 8 {
		t.Fatalf("configuration histories: %+v %+v", cfgSmall, cfgBig)
	}
	if len(rep.Checks) != 2 {
		t.Errorf("%d checks, want open and commit: %+v", len(rep.Checks), rep.Checks)
	}
	md := rep.Markdown()
	for _, want := range []string{"### Transactions", "#### Writer processes", "#### Long histories", "configuration history"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestTxnMemStoreSkipsWriters(t *testing.T) {
	cfg := Config{StoreURL: "mem://bench-txn-mem", EtcdEndpoints: testEtcd.Endpoints(), Suites: []string{SuiteTxn},
		Reps: 1, OpenReps: 1, TxnVersions: []int{2}, TxnAppendVersions: []int{}}
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Txn.Writers) != 0 || len(rep.Txn.Notes) != 1 || len(rep.Txn.Histories) != 1 {
		t.Errorf("mem:// txn: %d writer results, notes %v, %d histories", len(rep.Txn.Writers), rep.Txn.Notes, len(rep.Txn.Histories))
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if p := percentile(ds, 50); p != 3 {
		t.Errorf("p50 %v", p)
	}
	if p := percentile(ds, 100); p != 5 {
		t.Errorf("max %v", p)
	}
	if p := percentile(ds, 1); p != 1 {
		t.Errorf("p1 %v", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("empty %v", p)
	}
}

// BenchmarkTxnWriters: commit throughput of 1, 2 and 4 writer processes appending to one
// table (a fresh table per iteration; one iteration is one window of DefaultTxnWindow).
// ns/op is the window's elapsed time per commit; commits/s, attempts/commit and
// rebased/commit are the window's figures.
//
//	go test -bench TxnWriters -run '^$' ./benchmarks/
func BenchmarkTxnWriters(b *testing.B) {
	e, _, _ := benchFixture(b)
	if strings.HasPrefix(e.store.URL(), "mem://") {
		b.Skip("writer processes need a store they can share (not mem://)")
	}
	small, err := SyntheticFlights(HistoryRows, 2, HistoryRows)
	if err != nil {
		b.Fatal(err)
	}
	defer small.Release()
	for _, n := range DefaultTxnWriters {
		b.Run(fmt.Sprintf("procs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			var sum WritersRep
			var elapsed time.Duration
			var p50, p99 []time.Duration
			for b.Loop() {
				res := &TxnResult{}
				cfg := Config{TxnWriters: []int{n}, TxnWindow: DefaultTxnWindow, TxnReps: 1}
				// A fresh table per window: runTxnWriters names it by rep, so make names unique.
				name := fmt.Sprintf("bench-writers-%d-%d", n, benchRep.Add(1))
				if err := runWindow(ctx, e, cfg, small.Records[0], name, n, res); err != nil {
					b.Fatal(err)
				}
				r := res.Writers[0].Reps[0]
				sum.Commits += r.Commits
				sum.Attempts += r.Attempts
				sum.Rebased += r.Rebased
				elapsed += r.Elapsed
				p50, p99 = append(p50, r.P50), append(p99, r.P99)
				if sum.Requests.ByOp == nil {
					sum.Requests.ByOp = map[store.Op]int64{}
				}
				for op, c := range r.Requests.ByOp {
					sum.Requests.ByOp[op] += c
				}
			}
			c := float64(sum.Commits)
			b.ReportMetric(float64(elapsed.Nanoseconds())/c, "ns/op")
			b.ReportMetric(c/elapsed.Seconds(), "commits/s")
			b.ReportMetric(float64(sum.Attempts)/c, "attempts/commit")
			b.ReportMetric(float64(sum.Rebased)/c, "rebased/commit")
			b.ReportMetric(float64(median(p50).Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(median(p99).Nanoseconds()), "p99-ns")
			for op, n := range sum.Requests.ByOp {
				b.ReportMetric(float64(n)/c, string(op)+"/commit")
			}
		})
	}
}

// BenchmarkTxnHistory: OpenTable and one small append on tables whose 10, 1,000 and
// 10,000 versions were made by configuration changes (the manifest does not grow). The
// tables are built on first use (10,000 versions take about a minute on local disk).
//
//	go test -bench TxnHistory -run '^$' -timeout 30m ./benchmarks/
func BenchmarkTxnHistory(b *testing.B) {
	small, err := SyntheticFlights(HistoryRows, 3, HistoryRows)
	if err != nil {
		b.Fatal(err)
	}
	defer small.Release()
	for _, n := range DefaultTxnVersions {
		for _, what := range []string{"open", "commit"} {
			b.Run(fmt.Sprintf("versions=%d/%s", n, what), func(b *testing.B) {
				e, t := benchConfigHistory(b, n, small.Records[0])
				r := &HistoryResult{Versions: n, Commit: &Sample{Rows: HistoryRows}}
				s := &Sample{Rows: 1}
				v := variant{s: s, run: openRun(e, e.db, t.Name(), t.Version(), s)}
				if what == "commit" {
					s = r.Commit
					v = variant{s: s, run: commitRun(e, t, small.Records[0], r)}
				}
				runVariant(b, v)
				for op, c := range s.Etcd {
					b.ReportMetric(float64(c), "etcd-"+op+"/op")
				}
			})
		}
	}
}

var configTbls = map[int]*engine.Table{}

func benchConfigHistory(b *testing.B, n int, rec arrow.RecordBatch) (*env, *engine.Table) {
	e, _, _ := benchFixture(b)
	historyMu.Lock()
	defer historyMu.Unlock()
	if t, ok := configTbls[n]; ok {
		return e, t
	}
	t, err := configHistory(context.Background(), e.db, fmt.Sprintf("bench-config-history-%d", n), n, rec, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	configTbls[n] = t
	return e, t
}
