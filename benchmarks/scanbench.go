package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/store"
)

// scanParallelism is the engine's default ScanParallelism, used for the engine scans and
// as the worker count of the parallel baseline so the two compare like with like.
const scanParallelism = 4

// Scan variant names (Sample.Name); filtered scans are named ScanFilteredPrefix + filter.
var (
	ScanEngine          = fmt.Sprintf("engine: full scan (ScanParallelism %d)", scanParallelism)
	ScanRaw             = fmt.Sprintf("baseline: GET + IPC decode (%d workers)", scanParallelism)
	ScanEngineSerial    = "engine: full scan (ScanParallelism 1)"
	ScanRawSerial       = "baseline: GET + IPC decode (1 worker)"
	ScanProjectedPrefix = "engine: projected scan "
	ScanFilteredPrefix  = "engine: filtered scan "
)

// rawScan reads every data file with one whole-object GET and decodes every record batch
// with arrow-go's ipc.FileReader over a bytes.Reader, on workers goroutines (batches are
// handed out in file order; each file is fetched once, by the first worker that needs it).
// It returns the rows and in-memory Arrow bytes decoded.
func rawScan(ctx context.Context, s store.Store, files []fragment.DataFile, workers int) (rows, nbytes int64, err error) {
	type openFile struct {
		once sync.Once
		fr   *ipc.FileReader
		err  error
	}
	opened := make([]openFile, len(files))
	open := func(i int) (*ipc.FileReader, error) {
		of := &opened[i]
		of.once.Do(func() {
			b, err := s.Get(ctx, files[i].Key)
			if err != nil {
				of.err = err
				return
			}
			of.fr, of.err = ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(memory.DefaultAllocator))
		})
		return of.fr, of.err
	}
	defer func() {
		for i := range opened {
			if opened[i].fr != nil {
				opened[i].fr.Close()
			}
		}
	}()
	type task struct{ file, batch int }
	tasks := make(chan task)
	go func() {
		defer close(tasks)
		for fi, df := range files {
			for b := range df.Batches {
				select {
				case tasks <- task{fi, b}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r, n int64
			for t := range tasks {
				fr, err := open(t.file)
				if err == nil {
					rec, derr := fr.RecordBatchAt(t.batch)
					if derr == nil {
						r += rec.NumRows()
						n += recordBytes(rec)
						rec.Release()
					}
					err = derr
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("benchmarks: raw read of %s: %w", files[t.file].Key, err)
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			rows += r
			nbytes += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return rows, nbytes, firstErr
}

// engineScan drains one scan and returns its rows and in-memory Arrow bytes.
func engineScan(ctx context.Context, t *engine.Table, opts engine.ScanOptions) (rows, nbytes int64, err error) {
	sc, err := t.Scan(ctx, opts)
	if err != nil {
		return 0, 0, err
	}
	defer sc.Release()
	for sc.Next() {
		rec := sc.RecordBatch()
		rows += rec.NumRows()
		nbytes += recordBytes(rec)
	}
	return rows, nbytes, sc.Err()
}

// scanVariants imports ds once (untimed) and returns the timed scan variants over it.
func scanVariants(ctx context.Context, e *env, ds *Dataset, cfg Config) ([]variant, []fragment.DataFile, error) {
	tbl, err := e.db.CreateTable(ctx, "scan", ds.Schema)
	if err != nil {
		return nil, nil, err
	}
	rdr, err := ds.Reader()
	if err != nil {
		return nil, nil, err
	}
	_, err = tbl.Append(ctx, rdr)
	rdr.Release()
	if err != nil {
		return nil, nil, fmt.Errorf("benchmarks: import the scan table: %w", err)
	}
	var files []fragment.DataFile
	for _, f := range tbl.Manifest().Fragments {
		files = append(files, f.Files...)
	}
	serialDB, err := e.openDB(ctx, func(o *engine.Options) { o.ScanParallelism = 1 })
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialDB.OpenTable(ctx, "scan")
	if err != nil {
		return nil, nil, err
	}
	parDB, err := e.openDB(ctx, func(o *engine.Options) { o.ScanParallelism = scanParallelism })
	if err != nil {
		return nil, nil, err
	}
	par, err := parDB.OpenTable(ctx, "scan")
	if err != nil {
		return nil, nil, err
	}

	// measure times one scan; wantRows < 0 accepts any row count (and records it).
	measure := func(s *Sample, wantRows int64, scan func(ctx context.Context) (int64, int64, error)) func(context.Context, int) (Took, error) {
		return func(ctx context.Context, rep int) (Took, error) {
			before, kvBefore := e.storeRequests(), e.etcdRequests()
			var rows, n int64
			d, err := timeStep(func() (err error) {
				rows, n, err = scan(ctx)
				return err
			})
			if err != nil {
				return Took{}, fmt.Errorf("benchmarks: %s: %w", s.Name, err)
			}
			if wantRows >= 0 && rows != wantRows {
				return Took{}, fmt.Errorf("benchmarks: %s returned %d rows, the table has %d", s.Name, rows, wantRows)
			}
			if len(s.Times) == 0 {
				s.Requests = e.storeRequests().Sub(before)
				s.Etcd = subCounts(e.etcdRequests(), kvBefore)
				s.Rows, s.Bytes = rows, n
			} else if rows != s.Rows {
				return Took{}, fmt.Errorf("benchmarks: %s returned %d rows, %d in the first repetition", s.Name, rows, s.Rows)
			}
			return d, nil
		}
	}
	var vs []variant
	add := func(key, name string, wantRows int64, scan func(ctx context.Context) (int64, int64, error)) {
		s := &Sample{Name: name}
		vs = append(vs, variant{key, s, measure(s, wantRows, scan)})
	}
	add("engine", ScanEngine, ds.Rows, func(ctx context.Context) (int64, int64, error) {
		return engineScan(ctx, par, engine.ScanOptions{})
	})
	add("raw", ScanRaw, ds.Rows, func(ctx context.Context) (int64, int64, error) {
		return rawScan(ctx, e.store, files, scanParallelism)
	})
	add("engine-p1", ScanEngineSerial, ds.Rows, func(ctx context.Context) (int64, int64, error) {
		return engineScan(ctx, serial, engine.ScanOptions{})
	})
	add("raw-p1", ScanRawSerial, ds.Rows, func(ctx context.Context) (int64, int64, error) {
		return rawScan(ctx, e.store, files, 1)
	})
	if len(cfg.ScanColumns) > 0 {
		cols := cfg.ScanColumns
		add("projected", ScanProjectedPrefix+"("+strings.Join(cols, ", ")+")", ds.Rows, func(ctx context.Context) (int64, int64, error) {
			return engineScan(ctx, par, engine.ScanOptions{Columns: cols})
		})
	}
	for i, f := range cfg.Filters {
		add(fmt.Sprintf("filter-%d", i+1), ScanFilteredPrefix+"WHERE "+f, -1, func(ctx context.Context) (int64, int64, error) {
			return engineScan(ctx, par, engine.ScanOptions{Filter: f})
		})
	}
	return vs, files, nil
}

// runScan measures engine scans of an imported copy of ds against raw reads of the same
// data files.
func runScan(ctx context.Context, e *env, ds *Dataset, cfg Config, log io.Writer) (*SuiteResult, error) {
	vs, files, err := scanVariants(ctx, e, ds, cfg)
	if err != nil {
		return nil, err
	}
	if err := alternate(ctx, cfg.Reps, logged(vs, log)); err != nil {
		return nil, err
	}
	res := &SuiteResult{}
	for _, v := range vs {
		res.Samples = append(res.Samples, v.s)
	}
	raw, rawSerial := res.Sample(ScanRaw), res.Sample(ScanRawSerial)
	res.Ratios = append(res.Ratios,
		newRatio("full scan: engine vs GET + decode", res.Sample(ScanEngine), raw, 0.8),
		newRatio("full scan, one worker each: engine vs GET + decode", res.Sample(ScanEngineSerial), rawSerial, 0),
	)
	for _, s := range res.Samples {
		if strings.HasPrefix(s.Name, ScanProjectedPrefix) || strings.HasPrefix(s.Name, ScanFilteredPrefix) {
			res.Ratios = append(res.Ratios, newRatio(strings.TrimPrefix(s.Name, "engine: ")+" vs full GET + decode", s, raw, 0))
		}
	}
	var stored int64
	for _, f := range files {
		stored += f.Size
	}
	res.Notes = append(res.Notes, fmt.Sprintf("The table holds %s rows in %d data files (%.1f MB stored, ZSTD); every variant reads those same files. "+
		"MB/s is decoded in-memory Arrow MB (10^6 bytes) returned per second.", group(ds.Rows), len(files), float64(stored)/1e6))
	return res, nil
}
