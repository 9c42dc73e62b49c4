package benchmarks

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

// TxnResult holds the txn suite's measurements.
type TxnResult struct {
	// Writers: commit throughput of 1, 2, 4, … writer processes on one table.
	Writers []WritersResult
	// Histories: open and commit at each history size, for histories built without growing
	// the table (configuration changes) and, for information, by small appends.
	Histories []TxnHistory
	Notes     []string
}

// WritersResult is the commit throughput of Procs writer processes appending HistoryRows
// rows per commit to one table for a window, repeated (a fresh table each time).
type WritersResult struct {
	Procs  int
	Window time.Duration
	Reps   []WritersRep
}

// WritersRep is one window of Procs writers.
type WritersRep struct {
	Commits int
	// Elapsed runs from the first writer's start to the end of the last commit (a commit
	// under way when its writer's window ends is finished and counted).
	Elapsed   time.Duration
	Attempts  int // put-if-absent attempts, summed over commits
	Rebased   int // versions rebased over, summed over commits
	P50, P99  time.Duration
	Max       time.Duration
	PerWriter []int // commits per writer
	Requests  store.Requests
	Etcd      map[string]int64
}

// CommitsPerSec is Commits over Elapsed.
func (r WritersRep) CommitsPerSec() float64 { return perSec(float64(r.Commits), r.Elapsed) }

// MedianCommitsPerSec is the median over repetitions.
func (w WritersResult) MedianCommitsPerSec() float64 {
	xs := make([]float64, len(w.Reps))
	for i, r := range w.Reps {
		xs[i] = r.CommitsPerSec()
	}
	return medianFloat(xs)
}

// Sum adds the repetitions up (commits, attempts, rebases, requests) for per-commit ratios.
func (w WritersResult) Sum() WritersRep {
	var s WritersRep
	s.Requests.ByOp, s.Etcd = map[store.Op]int64{}, map[string]int64{}
	for _, r := range w.Reps {
		s.Commits += r.Commits
		s.Attempts += r.Attempts
		s.Rebased += r.Rebased
		for op, n := range r.Requests.ByOp {
			s.Requests.ByOp[op] += n
		}
		s.Requests.BytesWritten += r.Requests.BytesWritten
		s.Requests.BytesRead += r.Requests.BytesRead
		for op, n := range r.Etcd {
			s.Etcd[op] += n
		}
	}
	return s
}

// History kinds of TxnHistory.
const (
	HistoryConfig = "config" // CreateTable, one small append, then UpdateConfig of one key
	HistoryAppend = "append" // CreateTable, then small appends (one fragment each)
)

// TxnHistory is a table with Versions versions built by Kind, opened and committed to.
type TxnHistory struct {
	Kind string
	HistoryResult
}

// runTxn measures the txn suite.
func runTxn(ctx context.Context, e *env, cfg Config, log io.Writer) (*TxnResult, error) {
	res := &TxnResult{}
	small, err := SyntheticFlights(HistoryRows, 2, HistoryRows)
	if err != nil {
		return nil, err
	}
	defer small.Release()
	rec := small.Records[0]

	if strings.HasPrefix(e.store.URL(), "mem://") {
		res.Notes = append(res.Notes, "Writer processes skipped: a mem:// store is not shared between processes.")
	} else if err := runTxnWriters(ctx, e, cfg, rec, res, log); err != nil {
		return nil, err
	}
	if err := runTxnHistories(ctx, e, cfg, rec, res, log); err != nil {
		return nil, err
	}
	return res, nil
}

func runTxnWriters(ctx context.Context, e *env, cfg Config, rec arrow.RecordBatch, res *TxnResult, log io.Writer) error {
	endpoints := e.endpoints
	if len(endpoints) == 0 {
		return fmt.Errorf("benchmarks: txn writers need etcd endpoints to hand to other processes")
	}
	for _, n := range cfg.TxnWriters {
		res.Writers = append(res.Writers, WritersResult{Procs: n, Window: cfg.TxnWindow})
	}
	for rep := 0; rep < cfg.TxnReps; rep++ {
		for k := range res.Writers {
			// Rotate the order each repetition, as alternate does.
			i := (rep + k) % len(res.Writers)
			w := &res.Writers[i]
			if err := runWindow(ctx, e, cfg, rec, fmt.Sprintf("txn-writers-%d-rep-%d", w.Procs, rep), w.Procs, res); err != nil {
				return err
			}
			r := w.Reps[len(w.Reps)-1]
			fmt.Fprintf(log, "  %d writer processes: %d commits in %v (%.1f/s), %.2f attempts and %.2f rebases per commit\n",
				w.Procs, r.Commits, r.Elapsed.Round(time.Millisecond), r.CommitsPerSec(),
				float64(r.Attempts)/float64(r.Commits), float64(r.Rebased)/float64(r.Commits))
		}
	}
	return nil
}

// runWindow creates table name, runs procs writer processes on it for cfg.TxnWindow, checks
// that every acknowledged commit is a version of the table, and adds the window to the
// result for procs in res (created if missing).
func runWindow(ctx context.Context, e *env, cfg Config, rec arrow.RecordBatch, name string, procs int, res *TxnResult) error {
	if _, err := e.db.CreateTable(ctx, name, rec.Schema()); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "shale-bench-writers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgs := make([]writerConfig, procs)
	for p := range cfgs {
		cfgs[p] = writerConfig{Proc: p, Store: e.store.URL(), Etcd: e.endpoints, Prefix: e.prefix, Table: name, Window: cfg.TxnWindow}
	}
	results, err := runWriters(ctx, dir, cfgs)
	if err != nil {
		return err
	}
	r := foldWriters(results)
	tbl, err := e.db.OpenTable(ctx, name)
	if err != nil {
		return err
	}
	if got := tbl.Version(); got != uint64(1+r.Commits) {
		return fmt.Errorf("benchmarks: %s is at version %d after %d acknowledged commits (want %d)", name, got, r.Commits, 1+r.Commits)
	}
	for i := range res.Writers {
		if res.Writers[i].Procs == procs {
			res.Writers[i].Reps = append(res.Writers[i].Reps, r)
			return nil
		}
	}
	res.Writers = append(res.Writers, WritersResult{Procs: procs, Window: cfg.TxnWindow, Reps: []WritersRep{r}})
	return nil
}

// foldWriters combines the writers of one window.
func foldWriters(results []writerResult) WritersRep {
	r := WritersRep{Requests: store.Requests{ByOp: map[store.Op]int64{}}, Etcd: map[string]int64{}}
	var start, end int64
	var lat []time.Duration
	for i, w := range results {
		if i == 0 || w.Start < start {
			start = w.Start
		}
		end = max(end, w.End)
		r.Commits += len(w.Latencies)
		r.PerWriter = append(r.PerWriter, len(w.Latencies))
		lat = append(lat, w.Latencies...)
		for j := range w.Attempts {
			r.Attempts += w.Attempts[j]
			r.Rebased += w.Rebased[j]
		}
		for op, n := range w.Requests.ByOp {
			r.Requests.ByOp[op] += n
		}
		r.Requests.BytesWritten += w.Requests.BytesWritten
		r.Requests.BytesRead += w.Requests.BytesRead
		for op, n := range w.Etcd {
			r.Etcd[op] += n
		}
	}
	r.Elapsed = time.Duration(end - start)
	r.P50, r.P99, r.Max = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	return r
}

// configHistory makes table name with n versions that all share one small fragment:
// CreateTable, one append of rec, then n-2 UpdateConfig commits rewriting one key, so the
// manifest stays the same size however long the history.
func configHistory(ctx context.Context, db *engine.DB, name string, n int, rec arrow.RecordBatch, log io.Writer) (*engine.Table, error) {
	tbl, err := db.CreateTable(ctx, name, rec.Schema())
	if err != nil {
		return nil, err
	}
	if n >= 2 {
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			return nil, err
		}
	}
	for v := 3; v <= n; v++ {
		if _, err := tbl.UpdateConfig(ctx, map[string]string{"bench.churn": strconv.Itoa(v)}, nil); err != nil {
			return nil, fmt.Errorf("benchmarks: build history of %s at version %d: %w", name, v, err)
		}
		if v%2500 == 0 {
			fmt.Fprintf(log, "  %s: %d/%d versions\n", name, v, n)
		}
	}
	if tbl.Version() != uint64(n) {
		return nil, fmt.Errorf("benchmarks: %s is at version %d after building %d", name, tbl.Version(), n)
	}
	return tbl, nil
}

// runTxnHistories builds a table per (kind, size) and measures opens, then commits, each
// alternating across every table repetition by repetition.
func runTxnHistories(ctx context.Context, e *env, cfg Config, rec arrow.RecordBatch, res *TxnResult, log io.Writer) error {
	noCat, err := e.openDB(ctx, func(o *engine.Options) { o.Etcd = nil })
	if err != nil {
		return err
	}
	type built struct {
		h   *TxnHistory
		tbl *engine.Table
	}
	var tables []built
	add := func(kind string, sizes []int, build func(context.Context, *engine.DB, string, int, arrow.RecordBatch, io.Writer) (*engine.Table, error)) error {
		for _, n := range sizes {
			name := fmt.Sprintf("txn-history-%s-%d", kind, n)
			t0 := time.Now()
			tbl, err := build(ctx, e.db, name, n, rec, log)
			if err != nil {
				return err
			}
			info, err := e.store.Head(ctx, tbl.Manifest().Key())
			if err != nil {
				return err
			}
			h := &TxnHistory{Kind: kind, HistoryResult: HistoryResult{Versions: n, ManifestBytes: info.Size, BuildTime: time.Since(t0)}}
			fmt.Fprintf(log, "  %s built in %v; manifest %d bytes\n", name, h.BuildTime.Round(time.Millisecond), info.Size)
			tables = append(tables, built{h, tbl})
		}
		return nil
	}
	if err := add(HistoryConfig, cfg.TxnVersions, configHistory); err != nil {
		return err
	}
	if err := add(HistoryAppend, cfg.TxnAppendVersions, historyTable); err != nil {
		return err
	}
	var opens, commits []variant
	for _, b := range tables {
		h, name, n := b.h, b.tbl.Name(), uint64(b.h.Versions)
		h.Open = &Sample{Name: fmt.Sprintf("OpenTable, etcd catalog, %s history, %d versions", h.Kind, n), Rows: 1}
		h.OpenNoCatalog = &Sample{Name: fmt.Sprintf("OpenTable, no catalog, %s history, %d versions", h.Kind, n), Rows: 1}
		h.Commit = &Sample{Name: fmt.Sprintf("AppendRecord (%d rows), %s history, %d versions", HistoryRows, h.Kind, n), Rows: HistoryRows}
		opens = append(opens,
			variant{fmt.Sprintf("%s/versions=%d/catalog", h.Kind, n), h.Open, openRun(e, e.db, name, n, h.Open)},
			variant{fmt.Sprintf("%s/versions=%d/no-catalog", h.Kind, n), h.OpenNoCatalog, openRun(e, noCat, name, n, h.OpenNoCatalog)})
		commits = append(commits, variant{fmt.Sprintf("%s/versions=%d", h.Kind, n), h.Commit, commitRun(e, b.tbl, rec, &h.HistoryResult)})
	}
	if err := alternate(ctx, cfg.OpenReps, opens); err != nil {
		return err
	}
	if err := alternate(ctx, cfg.Reps, commits); err != nil {
		return err
	}
	for _, b := range tables {
		res.Histories = append(res.Histories, *b.h)
	}
	return nil
}

// txnChecks compares the largest configuration-built history with the smallest: open and
// commit latency (medians) within 1.1×, and the same requests.
func txnChecks(r *TxnResult) []Check {
	var hs []TxnHistory
	for _, h := range r.Histories {
		if h.Kind == HistoryConfig {
			hs = append(hs, h)
		}
	}
	if len(hs) < 2 {
		return nil
	}
	lo, hi := hs[0], hs[len(hs)-1]
	var out []Check
	for _, c := range []struct {
		what   string
		lo, hi *Sample
	}{{"OpenTable (etcd catalog)", lo.Open, hi.Open}, {"commit (small append)", lo.Commit, hi.Commit}} {
		ratio := float64(c.hi.Median()) / float64(c.lo.Median())
		cpu := float64(c.hi.MedianCPU()) / float64(max(c.lo.MedianCPU(), 1))
		sameReqs := reqString(c.lo.Requests) == reqString(c.hi.Requests)
		out = append(out, Check{
			Name:   fmt.Sprintf("%s latency at %s vs %s versions (configuration history)", c.what, group(int64(hi.Versions)), group(int64(lo.Versions))),
			Target: "≤ 1.10× (wall, medians) and the same store requests",
			Measured: fmt.Sprintf("%.2f× wall (%s vs %s), %.2f× CPU (%s vs %s); requests %s vs %s", ratio, ms(c.hi.Median()), ms(c.lo.Median()),
				cpu, ms(c.hi.MedianCPU()), ms(c.lo.MedianCPU()), reqString(c.hi.Requests), reqString(c.lo.Requests)),
			Met: ratio <= 1.10 && sameReqs,
		})
	}
	return out
}

// txn renders the txn suite.
func (p *mdWriter) txn(r *TxnResult) {
	for _, n := range r.Notes {
		p.f("%s\n\n", n)
	}
	if len(r.Writers) > 0 {
		p.f("#### Writer processes\n\nEach writer is a separate OS process appending %d rows per commit to one table (a fresh table per window) for %v; "+
			"commits/s is commits over the time from the first writer's start to the last commit's end, the median over %d windows. "+
			"Attempts and rebases are per commit over all windows; latency percentiles are of the median window.\n\n",
			HistoryRows, r.Writers[0].Window, len(r.Writers[0].Reps))
		p.f("| writers | commits/s (median) | per window | attempts/commit | rebased versions/commit | commit p50 | p99 | max | commits per writer (median window) | store requests/commit | etcd requests/commit |\n" +
			"| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
		for _, w := range r.Writers {
			var per []string
			for _, rep := range w.Reps {
				per = append(per, fmt.Sprintf("%.1f", rep.CommitsPerSec()))
			}
			s := w.Sum()
			mid := w.medianRep()
			p.f("| %d | %.1f | %s | %.2f | %.2f | %s | %s | %s | %s | %s | %s |\n", w.Procs, w.MedianCommitsPerSec(), strings.Join(per, " "),
				float64(s.Attempts)/float64(s.Commits), float64(s.Rebased)/float64(s.Commits), ms(mid.P50), ms(mid.P99), ms(mid.Max),
				ints(mid.PerWriter), perCommit(s.Requests.ByOp, s.Commits), perCommitEtcd(s.Etcd, s.Commits))
		}
		p.f("\n")
	}
	if len(r.Histories) > 0 {
		p.f("#### Long histories\n\n`%s`: CreateTable, one append of %d rows, then UpdateConfig of one key (the manifest does not grow). `%s`: CreateTable and appends of %d rows (one fragment each; information).\n\n",
			HistoryConfig, HistoryRows, HistoryAppend, HistoryRows)
		p.f("| history | versions | manifest bytes | open (etcd) median | open min | open max | open (no catalog) median | commit median | commit min | commit max | open requests | commit requests | commit etcd | built in |\n" +
			"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |\n")
		for _, h := range r.Histories {
			reqs := reqString(h.Commit.Requests)
			if h.CommitRequestsVary {
				reqs += " (varied)"
			}
			p.f("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", h.Kind, group(int64(h.Versions)), group(h.ManifestBytes),
				ms(h.Open.Median()), ms(h.Open.Min()), ms(h.Open.Max()), ms(h.OpenNoCatalog.Median()),
				ms(h.Commit.Median()), ms(h.Commit.Min()), ms(h.Commit.Max()),
				reqString(h.Open.Requests)+" + etcd "+countString(h.Open.Etcd), reqs, countString(h.Commit.Etcd), h.BuildTime.Round(time.Millisecond))
		}
		p.f("\n")
	}
}

// medianRep is the window with the median throughput.
func (w WritersResult) medianRep() WritersRep {
	if len(w.Reps) == 0 {
		return WritersRep{}
	}
	best, m := 0, w.MedianCommitsPerSec()
	for i, r := range w.Reps {
		if d, bd := abs(r.CommitsPerSec()-m), abs(w.Reps[best].CommitsPerSec()-m); d < bd {
			best = i
		}
	}
	return w.Reps[best]
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " ")
}

func perCommit(by map[store.Op]int64, commits int) string {
	if commits == 0 || len(by) == 0 {
		return "none"
	}
	c := map[string]int64{}
	for op, n := range by {
		c[string(op)] = n
	}
	return perCommitEtcd(c, commits)
}

func perCommitEtcd(c map[string]int64, commits int) string {
	if commits == 0 || len(c) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.2f", k, float64(c[k])/float64(commits))
	}
	return strings.Join(parts, " ")
}
