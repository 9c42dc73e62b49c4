package benchmarks

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// Defaults of the wal suite.
const (
	DefaultWALGoroutines = 16
	DefaultWALBatchRows  = 100
	DefaultWALWindow     = 3 * time.Second
	// DefaultWALGenerationRows are the rows of each generation the query and merge parts
	// flush (10 batches of DefaultWALBatchRows).
	DefaultWALGenerationRows = 1000
	// DefaultWALBaseRows are the base table's rows under the query part's generations.
	DefaultWALBaseRows = 100_000
	// DefaultWALMergeGenerations is how many generations each merge repetition merges.
	DefaultWALMergeGenerations = 64
)

// DefaultWALGenerations are the unmerged generation counts the query part reads.
var DefaultWALGenerations = []int{0, 64, 256}

// WAL variant names (Sample.Name).
const (
	WALAppend    = "engine: WALWriter.Append (group commit, one shard)"
	PlainAppend  = "baseline: Table.AppendRecord (one commit per batch)"
	WALMerge     = "engine: Table.MergeWAL (zero copy: one commit)"
	WALScanWrite = "baseline: Table.Scan + fragment.Writer of the same rows"
)

// WALResult holds the wal suite's measurements.
type WALResult struct {
	Goroutines, BatchRows int
	Window                time.Duration
	// Appends: acknowledged rows per second and acknowledgement latency of the WAL and of
	// plain appends, one window each per repetition, alternating.
	Appends []WALAppendRun
	Ratio   Ratio // rows/s of the WAL over rows/s of plain appends, paired by repetition
	// Queries: a full count and a filtered scan with N unmerged generations, and after
	// merging them.
	Queries []WALQueryRun
	// Merge: MergeWAL of DefaultWALMergeGenerations generations vs a scan and write of
	// the same rows.
	Merge *SuiteResult
	Notes []string
}

// WALAppendRun is one variant's windows.
type WALAppendRun struct {
	Name string
	Reps []WALWindow
}

// WALWindow is one window of Goroutines goroutines appending BatchRows-row batches.
type WALWindow struct {
	Rows     int64 // acknowledged
	Elapsed  time.Duration
	P50, P99 time.Duration // acknowledgement latency of one Append
	Entries  int64         // WAL entries written (group commits); 0 for plain appends
	Versions int64         // table versions committed (plain appends)
}

// RowsPerSec is acknowledged rows over the window.
func (w WALWindow) RowsPerSec() float64 { return perSec(float64(w.Rows), w.Elapsed) }

// Median picks the median window by rows/s (and its latencies).
func (r WALAppendRun) Median() WALWindow {
	s := slices.Clone(r.Reps)
	slices.SortFunc(s, func(a, b WALWindow) int {
		switch {
		case a.RowsPerSec() < b.RowsPerSec():
			return -1
		case a.RowsPerSec() > b.RowsPerSec():
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

// WALQueryRun is the query latency with Generations unmerged generations (Merged: after
// the merge, all in the base table).
type WALQueryRun struct {
	Generations int
	Merged      bool
	Rows        int64   // rows counted
	Count       *Sample // Table.Count("")
	Filtered    *Sample // Table.Scan with a filter statistics cannot prune
	Matched     int64   // rows the filter matched
}

// walFilter is the filtered scan of the query part: selective, not prunable by statistics.
const walFilter = "origin = 'SFO' AND delay > 60"

// runWAL measures the wal suite.
func runWAL(ctx context.Context, e *env, cfg Config, log io.Writer) (*WALResult, error) {
	res := &WALResult{Goroutines: cfg.WALGoroutines, BatchRows: cfg.WALBatchRows, Window: cfg.WALWindow}
	if err := runWALAppends(ctx, e, cfg, res, log); err != nil {
		return nil, err
	}
	if err := runWALQueries(ctx, e, cfg, res, log); err != nil {
		return nil, err
	}
	if err := runWALMerge(ctx, e, cfg, res, log); err != nil {
		return nil, err
	}
	return res, nil
}

// walBatches are one batch per goroutine (distinct rows, reused by its goroutine).
func walBatches(cfg Config) (*Dataset, error) {
	return SyntheticFlights(int64(cfg.WALGoroutines*cfg.WALBatchRows), 5, cfg.WALBatchRows)
}

// walTable creates table name with one WAL shard (and the config extra).
func walTable(ctx context.Context, e *env, name string, schema *arrow.Schema, extra map[string]string) (*engine.Table, error) {
	tbl, err := e.db.CreateTable(ctx, name, schema)
	if err != nil {
		return nil, err
	}
	cfg := map[string]string{engine.ConfigWALShards: "1"}
	for k, v := range extra {
		cfg[k] = v
	}
	if _, err := tbl.UpdateConfig(ctx, cfg, nil); err != nil {
		return nil, err
	}
	return tbl, nil
}

func runWALAppends(ctx context.Context, e *env, cfg Config, res *WALResult, log io.Writer) error {
	ds, err := walBatches(cfg)
	if err != nil {
		return err
	}
	defer ds.Release()
	wal := WALAppendRun{Name: WALAppend}
	plain := WALAppendRun{Name: PlainAppend}
	walS, plainS := &Sample{Name: WALAppend}, &Sample{Name: PlainAppend}
	for rep := range cfg.Reps {
		for k := range 2 {
			var w WALWindow
			var err error
			if (rep+k)%2 == 0 {
				w, err = walWindow(ctx, e, cfg, ds, fmt.Sprintf("wal-append-%d", rep))
				wal.Reps = append(wal.Reps, w)
				walS.Times = append(walS.Times, perRowsTime(w))
			} else {
				w, err = plainWindow(ctx, e, cfg, ds, fmt.Sprintf("wal-plain-%d", rep))
				plain.Reps = append(plain.Reps, w)
				plainS.Times = append(plainS.Times, perRowsTime(w))
			}
			if err != nil {
				return err
			}
			name := PlainAppend
			if (rep+k)%2 == 0 {
				name = WALAppend
			}
			fmt.Fprintf(log, "  %s: %d rows in %v (%.0f rows/s), ack p50 %v p99 %v, %d entries, %d versions\n", name, w.Rows,
				w.Elapsed.Round(time.Millisecond), w.RowsPerSec(), w.P50.Round(10*time.Microsecond), w.P99.Round(10*time.Microsecond), w.Entries, w.Versions)
		}
	}
	res.Appends = []WALAppendRun{wal, plain}
	res.Ratio = newRatio("WAL appends vs plain appends (acknowledged rows/s)", walS, plainS, 0)
	res.Notes = append(res.Notes, fmt.Sprintf("Appends: %d goroutines each append one %d-row batch (flights columns) after another for a %v window, "+
		"through one WALWriter of a one-shard table (Append returns once the entry holding the rows is durable: put-if-absent returned), or through "+
		"Table.AppendRecord on a handle of their own (one commit and publish per batch); rows/s counts acknowledged rows over the window, latency "+
		"is of each Append call. Each window uses a fresh table; the WAL window ends with the writer's Close (its last flush) outside the timed "+
		"window, and both check the table's count (WAL included) equals the acknowledged rows. Windows alternate WAL and plain, rotating which "+
		"goes first; ratios pair the windows of one repetition.", cfg.WALGoroutines, cfg.WALBatchRows, cfg.WALWindow))
	return nil
}

// perRowsTime is the window's time per million rows (so that newRatio's baseline/engine
// ratio of times is the engine/baseline ratio of rows/s).
func perRowsTime(w WALWindow) time.Duration {
	if w.Rows == 0 {
		return 0
	}
	return time.Duration(float64(w.Elapsed) * 1e6 / float64(w.Rows))
}

// appendWindow runs cfg.WALGoroutines goroutines calling do(i) until the window ends and
// returns the acknowledged rows, elapsed time and latencies.
func appendWindow(cfg Config, do func(i int) error) (WALWindow, error) {
	var (
		rows     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	t0 := time.Now()
	end := t0.Add(cfg.WALWindow)
	for i := range cfg.WALGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) {
				s := time.Now()
				if err := do(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(s))
				rows.Add(int64(cfg.WALBatchRows))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	w := WALWindow{Rows: rows.Load(), Elapsed: time.Since(t0)}
	if firstErr != nil {
		return w, firstErr
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		w.P50, w.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return w, nil
}

func walWindow(ctx context.Context, e *env, cfg Config, ds *Dataset, name string) (WALWindow, error) {
	tbl, err := walTable(ctx, e, name, ds.Schema, nil)
	if err != nil {
		return WALWindow{}, err
	}
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		return WALWindow{}, err
	}
	entries := map[wal0Pos]bool{}
	var emu sync.Mutex
	win, err := appendWindow(cfg, func(i int) error {
		ack, err := w.Append(ctx, ds.Records[i])
		if err == nil {
			emu.Lock()
			entries[wal0Pos{ack.Position.Epoch, ack.Position.Pos}] = true
			emu.Unlock()
		}
		return err
	})
	win.Entries = int64(len(entries))
	if cerr := w.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return win, err
	}
	return win, checkCount(ctx, e, name, win.Rows)
}

type wal0Pos struct{ epoch, pos uint64 }

func plainWindow(ctx context.Context, e *env, cfg Config, ds *Dataset, name string) (WALWindow, error) {
	if _, err := e.db.CreateTable(ctx, name, ds.Schema); err != nil {
		return WALWindow{}, err
	}
	handles := make([]*engine.Table, cfg.WALGoroutines)
	for i := range handles {
		h, err := e.db.OpenTable(ctx, name)
		if err != nil {
			return WALWindow{}, err
		}
		handles[i] = h
	}
	win, err := appendWindow(cfg, func(i int) error {
		_, err := handles[i].AppendRecord(ctx, ds.Records[i])
		return err
	})
	if err != nil {
		return win, err
	}
	h, err := e.db.OpenTable(ctx, name)
	if err != nil {
		return win, err
	}
	win.Versions = int64(h.Version()) - 1
	return win, checkCount(ctx, e, name, win.Rows)
}

// checkCount fails unless table's published version (WAL included) counts rows rows.
func checkCount(ctx context.Context, e *env, table string, rows int64) error {
	h, err := e.db.OpenTable(ctx, table)
	if err != nil {
		return err
	}
	n, err := h.Count(ctx, "")
	if err != nil {
		return err
	}
	if n != rows {
		return fmt.Errorf("benchmarks: table %s counts %d rows, %d were acknowledged", table, n, rows)
	}
	return nil
}

// flushGenerations appends gens generations of cfg.WALGenerationRows rows (batches of
// cfg.WALBatchRows) through shard 0 of tbl and closes the writer. Untimed setup.
func flushGenerations(ctx context.Context, tbl *engine.Table, ds *Dataset, gens int) error {
	w, err := tbl.WAL(ctx, 0)
	if err != nil {
		return err
	}
	for range gens {
		for _, r := range ds.Records {
			if _, err := w.Append(ctx, r); err != nil {
				_ = w.Close(ctx)
				return err
			}
		}
		if err := w.Flush(ctx); err != nil {
			_ = w.Close(ctx)
			return err
		}
	}
	return w.Close(ctx)
}

func runWALQueries(ctx context.Context, e *env, cfg Config, res *WALResult, log io.Writer) error {
	base, err := SyntheticFlights(int64(cfg.WALBaseRows), 6, cfg.BatchRows)
	if err != nil {
		return err
	}
	defer base.Release()
	gen, err := SyntheticFlights(int64(cfg.WALGenerationRows), 7, cfg.WALBatchRows)
	if err != nil {
		return err
	}
	defer gen.Release()
	// One table per generation count (made untimed), queried alternately; then each is
	// merged and queried again.
	type tq struct {
		name string
		gens int
		run  *WALQueryRun
		post *WALQueryRun
	}
	var tables []*tq
	for _, g := range cfg.WALGenerations {
		name := "wal-query-" + strconv.Itoa(g)
		tbl, err := walTable(ctx, e, name, base.Schema, map[string]string{engine.ConfigWALFlushBytes: "-1"})
		if err != nil {
			return err
		}
		rdr, err := base.Reader()
		if err != nil {
			return err
		}
		_, err = tbl.Append(ctx, rdr)
		rdr.Release()
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := flushGenerations(ctx, tbl, gen, g); err != nil {
			return err
		}
		fmt.Fprintf(log, "  %s: %d generations of %d rows flushed in %v (untimed)\n", name, g, gen.Rows, time.Since(t0).Round(time.Millisecond))
		tables = append(tables, &tq{name: name, gens: g,
			run:  &WALQueryRun{Generations: g, Count: &Sample{Name: fmt.Sprintf("count, %d generations", g)}, Filtered: &Sample{Name: fmt.Sprintf("filtered scan, %d generations", g)}},
			post: &WALQueryRun{Generations: g, Merged: true, Count: &Sample{Name: fmt.Sprintf("count, %d generations merged", g)}, Filtered: &Sample{Name: fmt.Sprintf("filtered scan, %d generations merged", g)}}})
	}
	want := func(q *tq) int64 { return base.Rows + int64(q.gens)*gen.Rows }
	queryVariants := func(post bool) []variant {
		var vs []variant
		for _, q := range tables {
			r := q.run
			if post {
				r = q.post
			}
			vs = append(vs, variant{key: r.Count.Name, s: r.Count, run: func(ctx context.Context, rep int) (Took, error) {
				h, err := e.db.OpenTable(ctx, q.name)
				if err != nil {
					return Took{}, err
				}
				var n int64
				d, err := timeStep(func() error { n, err = h.Count(ctx, ""); return err })
				if err == nil && n != want(q) {
					err = fmt.Errorf("benchmarks: %s counts %d rows, want %d", q.name, n, want(q))
				}
				r.Rows = n
				return d, err
			}}, variant{key: r.Filtered.Name, s: r.Filtered, run: func(ctx context.Context, rep int) (Took, error) {
				h, err := e.db.OpenTable(ctx, q.name)
				if err != nil {
					return Took{}, err
				}
				var n int64
				d, err := timeStep(func() error {
					sc, err := h.Scan(ctx, engine.ScanOptions{Filter: walFilter})
					if err != nil {
						return err
					}
					defer sc.Release()
					n = 0
					for sc.Next() {
						n += sc.RecordBatch().NumRows()
					}
					return sc.Err()
				})
				if err == nil && r.Matched != 0 && n != r.Matched {
					err = fmt.Errorf("benchmarks: %s: the filtered scan matched %d rows, earlier %d", q.name, n, r.Matched)
				}
				r.Matched = n
				return d, err
			}})
		}
		return vs
	}
	if err := alternate(ctx, cfg.Reps, logged(queryVariants(false), log)); err != nil {
		return err
	}
	for _, q := range tables {
		h, err := e.db.OpenTable(ctx, q.name)
		if err != nil {
			return err
		}
		if q.gens > 0 {
			mr, err := h.MergeWAL(ctx, engine.MergeWALOptions{})
			if err != nil {
				return err
			}
			if len(mr.Shards) != 1 || mr.Shards[0].Generations != q.gens {
				return fmt.Errorf("benchmarks: merge of %s: %+v, want %d generations", q.name, mr.Shards, q.gens)
			}
		}
	}
	if err := alternate(ctx, cfg.Reps, logged(queryVariants(true), log)); err != nil {
		return err
	}
	for _, q := range tables {
		if q.run.Matched != q.post.Matched {
			return fmt.Errorf("benchmarks: %s: the filtered scan matched %d rows before the merge, %d after", q.name, q.run.Matched, q.post.Matched)
		}
		res.Queries = append(res.Queries, *q.run)
	}
	for _, q := range tables {
		res.Queries = append(res.Queries, *q.post)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Queries: a table of %s base rows (one fragment) plus N unmerged generations of %s rows each (flushed "+
		"through one shard, writer closed: every WAL row is in a generation, none in the log), read from a DB with no writer of its own "+
		"(the shard manifest and generation files come from the store). Count(\"\") and a Scan of every column with WHERE %s "+
		"(statistics cannot prune it), each on a fresh handle; then MergeWAL folds the generations into the base table (one fragment per "+
		"generation) and the same queries run again.", group(int64(cfg.WALBaseRows)), group(int64(cfg.WALGenerationRows)), walFilter))
	return nil
}

func runWALMerge(ctx context.Context, e *env, cfg Config, res *WALResult, log io.Writer) error {
	gen, err := SyntheticFlights(int64(cfg.WALGenerationRows), 8, cfg.WALBatchRows)
	if err != nil {
		return err
	}
	defer gen.Release()
	rows := int64(cfg.WALMergeGenerations) * gen.Rows
	merge := &Sample{Name: WALMerge, Rows: rows}
	base := &Sample{Name: WALScanWrite, Rows: rows}
	setup := func(name string) (*engine.Table, error) {
		tbl, err := walTable(ctx, e, name, gen.Schema, map[string]string{engine.ConfigWALFlushBytes: "-1"})
		if err != nil {
			return nil, err
		}
		if err := flushGenerations(ctx, tbl, gen, cfg.WALMergeGenerations); err != nil {
			return nil, err
		}
		return e.db.OpenTable(ctx, name)
	}
	var genBytes int64
	vs := []variant{
		{key: "merge", s: merge, run: func(ctx context.Context, rep int) (Took, error) {
			tbl, err := setup(fmt.Sprintf("wal-merge-%d", rep))
			if err != nil {
				return Took{}, err
			}
			before, kvBefore := e.storeRequests(), e.etcdRequests()
			var mr engine.MergeWALResult
			d, err := timeStep(func() error { mr, err = tbl.MergeWAL(ctx, engine.MergeWALOptions{}); return err })
			if err != nil {
				return Took{}, err
			}
			if len(mr.Shards) != 1 || mr.Shards[0].Rows != rows {
				return Took{}, fmt.Errorf("benchmarks: merge: %+v, want %d rows", mr.Shards, rows)
			}
			if len(merge.Times) == 0 {
				merge.Requests = e.storeRequests().Sub(before)
				merge.Etcd = subCounts(e.etcdRequests(), kvBefore)
			}
			genBytes = mr.Shards[0].Bytes
			merge.Bytes = genBytes
			return d, nil
		}},
		{key: "scan+write", s: base, run: func(ctx context.Context, rep int) (Took, error) {
			tbl, err := setup(fmt.Sprintf("wal-scanwrite-%d", rep))
			if err != nil {
				return Took{}, err
			}
			before := e.storeRequests()
			var n int64
			d, err := timeStep(func() error {
				n, _, err = scanWrite(ctx, e, tbl, manifest.DataDir(tbl.Name()), fragment.WriterOptions{Compression: fragment.CompressionZstd,
					MaxRowsPerBatch: cfg.BatchRows, MaxRowsPerFile: cfg.FileRows}, 1)
				return err
			})
			if err == nil && n != rows {
				err = fmt.Errorf("benchmarks: scan+write wrote %d rows, want %d", n, rows)
			}
			if len(base.Times) == 0 {
				base.Requests = e.storeRequests().Sub(before)
			}
			base.Bytes = genBytes
			return d, err
		}},
	}
	if err := alternate(ctx, cfg.Reps, logged(vs, log)); err != nil {
		return err
	}
	res.Merge = &SuiteResult{Samples: []*Sample{merge, base},
		Ratios: []Ratio{newRatio("WAL merge vs scan + write of the same rows", merge, base, 0.8)}}
	res.Notes = append(res.Notes, fmt.Sprintf("Merge: each repetition flushes %d generations of %s rows through one shard of a fresh table (untimed), "+
		"then times Table.MergeWAL, or a Table.Scan of the same table (its rows are all in the generations) written by one fragment.Writer "+
		"(ZSTD) as the baseline. MergeWAL is zero copy: the generations' data files become the base table's fragments as they are (one "+
		"commit, no data read or written), so its ratio to the baseline measures a commit against reading and rewriting the bytes.",
		cfg.WALMergeGenerations, group(int64(cfg.WALGenerationRows))))
	return nil
}

// WALTargetRowsPerSec is issue 11's target for acknowledged rows per second per shard.
const WALTargetRowsPerSec = 200_000

// walChecks: the WAL's acknowledged rows/s per shard (median window) against
// WALTargetRowsPerSec, and the merge against 0.8× scan + write.
func walChecks(r *WALResult) []Check {
	var out []Check
	if len(r.Appends) > 0 && len(r.Appends[0].Reps) > 0 {
		w := r.Appends[0].Median()
		out = append(out, Check{Name: "WAL acknowledged rows/s per shard", Target: fmt.Sprintf("≥ %s rows/s (%d goroutines, %d-row batches)", group(WALTargetRowsPerSec), r.Goroutines, r.BatchRows),
			Measured: fmt.Sprintf("%s rows/s (median of %d windows), ack p50 %s p99 %s; %.1f× plain appends", group(int64(w.RowsPerSec())), len(r.Appends[0].Reps),
				ms(w.P50), ms(w.P99), r.Ratio.Median()), Met: w.RowsPerSec() >= WALTargetRowsPerSec})
	}
	if r.Merge != nil {
		for _, q := range r.Merge.Ratios {
			out = append(out, Check{Name: q.Name, Target: fmt.Sprintf("≥ %.2f× baseline throughput (wall time)", q.Target),
				Measured: fmt.Sprintf("%.1f× wall, %.1f× CPU (medians of %d paired runs; zero copy)", q.Median(), q.MedianCPU(), len(q.Paired)), Met: q.Met()})
		}
	}
	return out
}

// wal renders the wal suite.
func (p *mdWriter) wal(r *WALResult) {
	for _, n := range r.Notes {
		p.f("%s\n\n", n)
	}
	p.f("| appends (%d goroutines × %d-row batches, %v windows) | acknowledged rows/s (median window) | windows (rows/s) | ack p50 | ack p99 | entries or versions per window |\n| --- | ---: | --- | ---: | ---: | ---: |\n",
		r.Goroutines, r.BatchRows, r.Window)
	for _, a := range r.Appends {
		if len(a.Reps) == 0 {
			continue
		}
		m := a.Median()
		var each []string
		for _, w := range a.Reps {
			each = append(each, group(int64(w.RowsPerSec())))
		}
		n := m.Entries
		if n == 0 {
			n = m.Versions
		}
		p.f("| %s | %s | %s | %s | %s | %s |\n", a.Name, group(int64(m.RowsPerSec())), joinStrings(each), ms(m.P50), ms(m.P99), group(n))
	}
	p.f("\nWAL over plain appends (acknowledged rows/s, paired windows): median %.1f×, windows %s.\n\n", r.Ratio.Median(), floats(r.Ratio.Paired))
	if len(r.Queries) > 0 {
		p.f("| query | rows | count: wall median | min | max | filtered scan: wall median | min | max | rows matched |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, q := range r.Queries {
			what := fmt.Sprintf("%d unmerged generations", q.Generations)
			if q.Merged {
				what = fmt.Sprintf("after merging %d generations", q.Generations)
			}
			p.f("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", what, group(q.Rows), ms(q.Count.Median()), ms(q.Count.Min()), ms(q.Count.Max()),
				ms(q.Filtered.Median()), ms(q.Filtered.Min()), ms(q.Filtered.Max()), group(q.Matched))
		}
		p.f("\n")
	}
	if r.Merge != nil {
		p.suite(r.Merge, false)
	}
}

func joinStrings(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

func floats(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.1f", x))
	}
	return joinStrings(s)
}
