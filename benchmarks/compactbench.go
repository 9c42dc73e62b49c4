package benchmarks

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/recovery"
)

// Compact variant names (Sample.Name).
const (
	CompactEngine       = "engine: compaction (sidecars, Parallelism 2)"
	CompactEngineSerial = "engine: compaction (sidecars, Parallelism 1)"
	CompactScanWrite    = "baseline: Table.Scan + fragment.Writer (2 writers)"
	CompactScanWrite1   = "baseline: Table.Scan + fragment.Writer (1 writer)"
)

// Defaults of the compact suite.
const (
	DefaultCompactFragmentRows = 10_000
	DefaultCompactTargetRows   = compaction.DefaultTargetRows
)

// fragmentedTable creates table name and appends ds in one Append through a DB whose
// writer cuts data files (= fragments) of fragRows rows: the layout of many small appends
// (one fragment each) without their history. Untimed setup.
func fragmentedTable(ctx context.Context, db *engine.DB, name string, ds *Dataset) (*engine.Table, error) {
	tbl, err := db.CreateTable(ctx, name, ds.Schema)
	if err != nil {
		return nil, err
	}
	rdr, err := ds.Reader()
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	res, err := tbl.Append(ctx, rdr)
	if err != nil {
		return nil, err
	}
	if res.Rows != ds.Rows {
		return nil, fmt.Errorf("benchmarks: %s: appended %d rows, the data has %d", name, res.Rows, ds.Rows)
	}
	return tbl, nil
}

// scanWrite reads every row of tbl with Table.Scan (all columns, default parallelism) and
// writes them as data files of at most opts.MaxRowsPerFile rows under dir: consecutive
// runs of MaxRowsPerFile rows go to up to writers fragment.Writers at once (one output
// file each), like compaction's groups. It returns the rows written and the files.
func scanWrite(ctx context.Context, e *env, tbl *engine.Table, dir string, opts fragment.WriterOptions, writers int) (int64, []fragment.DataFile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sc, err := tbl.Scan(ctx, engine.ScanOptions{})
	if err != nil {
		return 0, nil, err
	}
	defer sc.Release()
	schema, fieldIDs := tbl.Schema(), tbl.Manifest().Schema.FieldIDs

	chunks := make(chan chan arrow.RecordBatch)
	var mu sync.Mutex
	var files []fragment.DataFile
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for recs := range chunks {
				w, err := fragment.NewWriter(ctx, e.store, dir, schema, fieldIDs, opts)
				for rec := range recs {
					if err == nil {
						err = w.Write(rec)
					}
					rec.Release()
				}
				if w != nil {
					written, cerr := w.Close()
					if err == nil {
						err = cerr
					}
					mu.Lock()
					files = append(files, written...)
					mu.Unlock()
				}
				if err != nil {
					fail(err)
				}
			}
		}()
	}

	var rows, inChunk int64
	var cur chan arrow.RecordBatch
	send := func(rec arrow.RecordBatch) bool {
		if cur == nil {
			cur = make(chan arrow.RecordBatch, 4)
			select {
			case chunks <- cur:
			case <-ctx.Done():
				rec.Release()
				return false
			}
		}
		select {
		case cur <- rec:
			return true
		case <-ctx.Done():
			rec.Release()
			return false
		}
	}
	target := int64(opts.MaxRowsPerFile)
scan:
	for sc.Next() {
		rec := sc.RecordBatch()
		rows += rec.NumRows()
		for off := int64(0); off < rec.NumRows(); {
			n := min(rec.NumRows()-off, target-inChunk)
			if !send(rec.NewSlice(off, off+n)) {
				break scan
			}
			off += n
			if inChunk += n; inChunk == target {
				close(cur)
				cur, inChunk = nil, 0
			}
		}
	}
	if cur != nil {
		close(cur)
	}
	close(chunks)
	wg.Wait()
	if err := sc.Err(); err != nil && firstErr == nil {
		firstErr = err
	}
	return rows, files, firstErr
}

// runCompact measures compaction of a table of small fragments against a plain scan of
// the same table version written back through fragment.Writer.
func runCompact(ctx context.Context, e *env, ds *Dataset, cfg Config, log io.Writer) (*SuiteResult, error) {
	target := cfg.CompactTargetRows
	small, err := e.openDB(ctx, func(o *engine.Options) {
		o.Write.MaxRowsPerFile = cfg.CompactFragmentRows
		o.Write.MaxRowsPerBatch = min(cfg.BatchRows, cfg.CompactFragmentRows)
	})
	if err != nil {
		return nil, err
	}
	// The baselines read one table that is never compacted; each compaction gets a fresh one.
	src, err := fragmentedTable(ctx, small, "compact-src", ds)
	if err != nil {
		return nil, err
	}
	nfrag := len(src.Manifest().Fragments)
	wopts := e.opts.Write
	wopts.MaxRowsPerFile = int(target)
	wantFiles := int((ds.Rows + target - 1) / target)

	mk := func(name string) *Sample { return &Sample{Name: name, Rows: ds.Rows, Bytes: ds.Bytes} }
	engS, eng1S, baseS, base1S := mk(CompactEngine), mk(CompactEngineSerial), mk(CompactScanWrite), mk(CompactScanWrite1)
	var stats compaction.Stats
	// phases[s] are per-repetition splits of a compaction's wall time, taken with its hooks:
	// [0] start → BeforeFirstWrite (read the published version, hold, plan), [1] →
	// BeforeCommit (sidecar and rewrite: every new data file stored), [2] → return
	// (commit, publish, sidecar delete, hold release).
	phases := map[*Sample][3][]time.Duration{}
	counted := func(s *Sample, step func() error) (Took, error) {
		before, kvBefore := e.storeRequests(), e.etcdRequests()
		d, err := timeStep(step)
		if err == nil && len(s.Times) == 0 {
			s.Requests = e.storeRequests().Sub(before)
			s.Etcd = subCounts(e.etcdRequests(), kvBefore)
		}
		return d, err
	}
	compactRun := func(s *Sample, par int) func(context.Context, int) (Took, error) {
		return func(ctx context.Context, rep int) (Took, error) {
			name := fmt.Sprintf("compact-p%d-%d", par, rep)
			if _, err := fragmentedTable(ctx, small, name, ds); err != nil {
				return Took{}, err
			}
			runtime.GC() // the build's garbage is not the compaction's
			ex := recovery.Enable(compaction.New(e.db))
			ex.Write = wopts
			var t0, tWrite, tCommit time.Time
			ex.Hooks.BeforeFirstWrite = func(context.Context, *compaction.Plan) error { tWrite = time.Now(); return nil }
			ex.Hooks.BeforeCommit = func(context.Context, *compaction.Plan) error { tCommit = time.Now(); return nil }
			var st compaction.Stats
			d, err := counted(s, func() error {
				var err error
				t0 = time.Now()
				st, err = ex.Run(ctx, name, compaction.Options{TargetRows: target, Parallelism: par})
				if err == nil {
					ph := phases[s]
					ph[0], ph[1], ph[2] = append(ph[0], tWrite.Sub(t0)), append(ph[1], tCommit.Sub(tWrite)), append(ph[2], time.Since(tCommit))
					phases[s] = ph
				}
				return err
			})
			if err != nil {
				return Took{}, fmt.Errorf("benchmarks: compaction of %s: %w", name, err)
			}
			if st.RowsRewritten != ds.Rows || st.FragmentsBefore != nfrag || st.FragmentsAfter != wantFiles || !st.Published {
				return Took{}, fmt.Errorf("benchmarks: compaction of %s: %+v; want %d rows, %d -> %d fragments, published", name, st, ds.Rows, nfrag, wantFiles)
			}
			stats = st
			return d, clearPrefix(ctx, e.store, name+"/")
		}
	}
	baseRun := func(s *Sample, writers int) func(context.Context, int) (Took, error) {
		return func(ctx context.Context, rep int) (Took, error) {
			dir := fmt.Sprintf("compact-scratch-%d-%d/data", writers, rep)
			var rows int64
			var files []fragment.DataFile
			d, err := counted(s, func() error {
				var err error
				rows, files, err = scanWrite(ctx, e, src, dir, wopts, writers)
				return err
			})
			if err != nil {
				return Took{}, fmt.Errorf("benchmarks: scan + write of %s: %w", src.Name(), err)
			}
			if rows != ds.Rows || len(files) != wantFiles {
				return Took{}, fmt.Errorf("benchmarks: scan + write of %s: %d rows in %d files, want %d in %d", src.Name(), rows, len(files), ds.Rows, wantFiles)
			}
			return d, clearPrefix(ctx, e.store, fmt.Sprintf("compact-scratch-%d-%d/", writers, rep))
		}
	}
	vs := []variant{
		{"compact", engS, compactRun(engS, 2)},
		{"scan+write", baseS, baseRun(baseS, 2)},
		{"compact-p1", eng1S, compactRun(eng1S, 1)},
		{"scan+write-1", base1S, baseRun(base1S, 1)},
	}
	if err := alternate(ctx, cfg.Reps, logged(vs, log)); err != nil {
		return nil, err
	}
	res := &SuiteResult{Samples: []*Sample{engS, baseS, eng1S, base1S}}
	res.Ratios = []Ratio{
		newRatio("compaction vs scan + write", engS, baseS, 0.8),
		newRatio("compaction vs scan + write, one group / writer at a time", eng1S, base1S, 0),
		newRatio("compaction (Parallelism 2) vs scan + write with 1 writer", engS, base1S, 0),
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Input: one table version of %s rows in %d fragments of up to %s rows (one Append through a writer cutting %s-row data files: "+
		"the layout of %d small appends, without their history), ZSTD, batches of %s rows. Compaction (recovery.Enable(compaction.New(db)).Run, target %s rows: plan, "+
		"sidecar, rewrite, commit, publish, sidecar delete) and the baseline (Table.Scan of every column at that version, rows cut into runs of %s and written by "+
		"fragment.Writer with the same options) both produce %d data files. Each compaction runs on a fresh copy of the table (built untimed). "+
		"Last compaction: %d groups, %.1f MB of data files read, %.1f MB written. MB/s is the table's in-memory Arrow MB (10^6 bytes) per second, so MB/s ratios equal time ratios.",
		group(ds.Rows), nfrag, group(int64(cfg.CompactFragmentRows)), group(int64(cfg.CompactFragmentRows)), nfrag, group(int64(min(cfg.BatchRows, cfg.CompactFragmentRows))),
		group(target), group(target), wantFiles, stats.Groups, float64(stats.BytesRead)/1e6, float64(stats.BytesWritten)/1e6))
	for _, s := range []*Sample{engS, eng1S} {
		ph := phases[s]
		res.Notes = append(res.Notes, fmt.Sprintf("%s, wall time by phase (medians; from its Hooks): read the published version, take the hold and plan %s; "+
			"sidecar and rewrite (every new data file stored) %s; commit, publish, sidecar delete and hold release %s.",
			s.Name, ms(median(ph[0])), ms(median(ph[1])), ms(median(ph[2]))))
	}
	return res, nil
}
