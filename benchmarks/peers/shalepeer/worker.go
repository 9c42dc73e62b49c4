//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/benchmarks"
	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/pqinput"
	"github.com/shale-db/shale/store"
)

// worker holds one table of one store and the catalog it is published in.
type worker struct {
	log     io.Writer
	emb     *coord.Embedded
	cli     *coord.Client
	st      store.Store
	opts    engine.Options
	db      *engine.DB
	tbl     *engine.Table
	table   string
	dir     string // the working directory prepare was given
	cleanup []func() error
}

func (w *worker) close() error {
	var errs []error
	for i := len(w.cleanup) - 1; i >= 0; i-- {
		errs = append(errs, w.cleanup[i]())
	}
	w.cleanup = nil
	return errors.Join(errs...)
}

// timed is what every timed operation reports.
type timed struct {
	WallS        float64          `json:"wall_s"`
	CPUS         float64          `json:"cpu_s"`
	RSSPeakBytes int64            `json:"rss_peak_bytes"`
	Requests     map[string]int64 `json:"requests"`       // store requests by kind
	RequestsAll  int64            `json:"requests_total"` // their sum
	BytesRead    int64            `json:"bytes_read"`
	BytesWritten int64            `json:"bytes_written"`
}

// measure runs step after a GC that returns freed memory to the OS, with the peak RSS
// reset, and fills t. Without the return, the peak included heap pages an earlier
// operation freed but the runtime had not yet handed back (the Parquet input of prepare,
// ~400 MB at its peak, left the process at ~175 MB resident for every later query), so
// it measured the worker's history rather than the operation.
//
// Two collections: the first moves pooled objects (sync.Pool, such as transient decode
// bodies) to the pools' victim caches, the second (FreeOSMemory's) frees them, so what an
// earlier operation pooled is not counted against this one either; what this operation
// pools while it runs is.
func (w *worker) measure(t *timed, step func() error) error {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	before := w.st.Counters().Snapshot()
	c0, t0 := processCPU(), time.Now()
	err := step()
	t.WallS = time.Since(t0).Seconds()
	t.CPUS = (processCPU() - c0).Seconds()
	t.RSSPeakBytes = peakRSS()
	d := w.st.Counters().Snapshot().Sub(before)
	t.Requests = map[string]int64{}
	for op, n := range d.ByOp {
		t.Requests[string(op)] = n
	}
	t.RequestsAll, t.BytesRead, t.BytesWritten = d.Total(), d.BytesRead, d.BytesWritten
	return err
}

func (w *worker) do(ctx context.Context, op string, raw json.RawMessage) (any, error) {
	decode := func(v any) error {
		if len(raw) == 0 {
			return nil
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%s: bad args: %w", op, err)
		}
		return nil
	}
	if op != "hello" && op != "prepare" && w.tbl == nil {
		return nil, fmt.Errorf("%s before prepare", op)
	}
	switch op {
	case "hello":
		return w.hello(), nil
	case "prepare":
		var a prepareArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return w.prepare(ctx, a)
	case "create_index":
		var a indexArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return w.createIndex(ctx, a)
	case "drop_index":
		var a indexArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		if _, err := w.tbl.DropIndex(ctx, a.Name); err != nil {
			return nil, err
		}
		return map[string]any{}, w.refresh(ctx)
	case "import":
		var a importArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return w.importParquet(ctx, a)
	case "drop_table":
		var a importArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		if _, err := w.db.DropTable(ctx, a.Table); err != nil {
			return nil, err
		}
		return map[string]any{}, nil
	case "data_files":
		return w.dataFiles()
	case "appends", "history", "writers":
		var a smallArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		switch op {
		case "appends":
			return w.appends(ctx, a)
		case "history":
			return w.history(ctx, a)
		}
		return w.writers(ctx, a)
	case "open":
		var a openArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return w.open(ctx, a)
	case "query":
		var a queryArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return w.query(ctx, a)
	}
	return nil, fmt.Errorf("unknown op %q (want hello, prepare, create_index, drop_index, import, drop_table, data_files, query, appends, history, open, writers, quit)", op)
}

func (w *worker) hello() map[string]any {
	out := map[string]any{"system": "shale", "go": runtime.Version(), "gomaxprocs": runtime.GOMAXPROCS(0), "pid": os.Getpid()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out["commit"] = s.Value
			case "vcs.modified":
				out["modified"] = s.Value == "true"
			}
		}
	}
	return out
}

type prepareArgs struct {
	Dir   string `json:"dir"`   // working directory (etcd/ and store/ are made below it)
	Data  string `json:"data"`  // Parquet file with the flights schema; "" = synthetic rows
	Rows  int64  `json:"rows"`  // cap on rows (0 = all; synthetic default 100,000)
	Table string `json:"table"` // default "flights"
}

type prepareResult struct {
	timed
	Rows      int64   `json:"rows"`
	Fragments int     `json:"fragments"`
	Batches   int     `json:"batches"`
	Bytes     int64   `json:"bytes"` // stored size of the data files
	Version   uint64  `json:"version"`
	StoreURL  string  `json:"store_url"`
	LoadS     float64 `json:"load_s"` // reading the Parquet into memory (untimed by wall_s)
}

// prepare starts the catalog and store and imports the data: the Parquet file is read
// into memory first (load_s), then one Table.Append of every row is timed.
func (w *worker) prepare(ctx context.Context, a prepareArgs) (*prepareResult, error) {
	if w.tbl != nil {
		return nil, errors.New("prepare: already prepared")
	}
	if a.Dir == "" {
		return nil, errors.New("prepare: args.dir is required")
	}
	if a.Table == "" {
		a.Table = "flights"
	}
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		return nil, err
	}
	emb, err := coord.StartEmbedded(filepath.Join(a.Dir, "etcd"))
	if err != nil {
		return nil, err
	}
	w.emb = emb
	w.cleanup = append(w.cleanup, func() error { emb.Close(); return nil })
	// The engine calls the server in-process (no gRPC, no TCP), as a program hosting its
	// own etcd would; the writer processes connect to emb.Endpoints().
	cli, err := emb.Client()
	if err != nil {
		return nil, err
	}
	w.cli = cli
	w.cleanup = append(w.cleanup, cli.Close)
	storeDir := filepath.Join(a.Dir, "store")
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, "file://"+storeDir, store.Options{})
	if err != nil {
		return nil, err
	}
	w.st = st
	w.cleanup = append(w.cleanup, st.Close)
	w.opts = engine.Options{Etcd: cli.Etcd(), Write: fragment.WriterOptions{Compression: fragment.CompressionZstd}}
	if v := os.Getenv("SHALEPEER_SCAN_PARALLELISM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("prepare: SHALEPEER_SCAN_PARALLELISM=%q is not a positive integer", v)
		}
		w.opts.ScanParallelism = n
	}
	if w.db, err = engine.Open(ctx, st, w.opts); err != nil {
		return nil, err
	}

	t0 := time.Now()
	var ds *benchmarks.Dataset
	if a.Data != "" {
		ds, err = benchmarks.LoadParquet(ctx, a.Data, a.Rows, fragment.DefaultMaxRowsPerBatch)
	} else {
		if a.Rows <= 0 {
			a.Rows = 100_000
		}
		ds, err = benchmarks.SyntheticFlights(a.Rows, 1, fragment.DefaultMaxRowsPerBatch)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		// Return the loaded dataset's heap to the OS: the runtime keeps freed spans
		// mapped for minutes, and the next operation's peak RSS (VmHWM reset to the
		// current RSS) would start from it (the first import after prepare peaked at
		// 408 MB, later ones at 205 MB).
		ds.Release()
		debug.FreeOSMemory()
	}()
	res := &prepareResult{LoadS: time.Since(t0).Seconds(), StoreURL: st.URL()}
	fmt.Fprintf(w.log, "shalepeer: loaded %d rows in %.1f s\n", ds.Rows, res.LoadS)
	w.table, w.dir = a.Table, a.Dir
	err = w.measure(&res.timed, func() error {
		tbl, err := w.db.CreateTable(ctx, a.Table, ds.Schema)
		if err != nil {
			return err
		}
		rdr, err := ds.Reader()
		if err != nil {
			return err
		}
		defer rdr.Release()
		if _, err := tbl.Append(ctx, rdr); err != nil {
			return err
		}
		w.tbl = tbl
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := w.refresh(ctx); err != nil {
		return nil, err
	}
	m := w.tbl.Manifest()
	res.Rows, res.Fragments, res.Version = m.LiveRows(), len(m.Fragments), m.Version
	for _, f := range m.Fragments {
		for _, df := range f.Files {
			res.Batches += len(df.Batches)
			res.Bytes += df.Size
		}
	}
	return res, nil
}

// refresh reopens the table at HEAD (after a commit of this worker).
func (w *worker) refresh(ctx context.Context) error {
	t, err := w.db.OpenTable(ctx, w.table)
	if err != nil {
		return err
	}
	w.tbl = t
	return nil
}

type indexArgs struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`    // btree (default) or zonemap
	Column  string   `json:"column"`  // one column, or
	Columns []string `json:"columns"` // several (zone map)
}

type indexResult struct {
	timed
	RowsIndexed  int64   `json:"rows_indexed"`
	IndexBytes   int64   `json:"index_bytes"`
	RowsPerS     float64 `json:"rows_per_s"`
	Version      uint64  `json:"version"`
	FragmentsCov int     `json:"fragments_covered"`
}

// createIndex builds the index, replacing one of the same name, and commits it.
func (w *worker) createIndex(ctx context.Context, a indexArgs) (*indexResult, error) {
	cols := a.Columns
	if a.Column != "" {
		cols = append([]string{a.Column}, cols...)
	}
	spec := engine.IndexSpec{Name: a.Name, Kind: a.Kind, Columns: cols, Replace: true}
	var res indexResult
	var ir engine.IndexResult
	err := w.measure(&res.timed, func() error {
		var err error
		ir, err = w.tbl.CreateIndex(ctx, spec)
		return err
	})
	if err != nil {
		return nil, err
	}
	res.RowsIndexed, res.IndexBytes, res.Version = ir.RowsIndexed, ir.BytesWritten, ir.Version
	res.FragmentsCov = ir.Index.FragmentsCovered
	if res.WallS > 0 {
		res.RowsPerS = float64(ir.RowsIndexed) / res.WallS
	}
	return &res, w.refresh(ctx)
}

type queryArgs struct {
	Filter  string   `json:"filter"`
	Columns []string `json:"columns"` // nil = every column
	// Mode: planner (the cost-based plan), force (ScanOptions.ForceIndexes), noindex
	// (NoIndex: statistics pruning only), fullscan (NoIndex and NoStatistics).
	Mode string `json:"mode"`
	// Cold opens a new DB (empty index cache) and the table, untimed, before the scan.
	Cold bool `json:"cold"`
	// Table scans another table of the worker's store (one import made), opened untimed;
	// "" = the prepared table.
	Table string `json:"table"`
}

type queryResult struct {
	timed
	Rows         int64            `json:"rows"`
	Plan         engine.ScanPlan  `json:"plan"`
	OpenRequests map[string]int64 `json:"open_requests,omitempty"` // cold: the untimed DB and table open
}

func (w *worker) query(ctx context.Context, a queryArgs) (*queryResult, error) {
	opts := engine.ScanOptions{Filter: a.Filter, Columns: a.Columns}
	switch a.Mode {
	case "", "planner":
	case "force":
		opts.ForceIndexes = true
	case "noindex":
		opts.NoIndex = true
	case "fullscan":
		opts.NoIndex, opts.NoStatistics = true, true
	default:
		return nil, fmt.Errorf("query: unknown mode %q (want planner, force, noindex, fullscan)", a.Mode)
	}
	res := &queryResult{}
	tbl, name := w.tbl, w.table
	if a.Table != "" && a.Table != w.table {
		t, err := w.db.OpenTable(ctx, a.Table)
		if err != nil {
			return nil, err
		}
		tbl, name = t, a.Table
	}
	if a.Cold {
		before := w.st.Counters().Snapshot()
		db, err := engine.Open(ctx, w.st, w.opts)
		if err != nil {
			return nil, err
		}
		if tbl, err = db.OpenTable(ctx, name); err != nil {
			return nil, err
		}
		res.OpenRequests = map[string]int64{}
		for op, n := range w.st.Counters().Snapshot().Sub(before).ByOp {
			res.OpenRequests[string(op)] = n
		}
	}
	err := w.measure(&res.timed, func() error {
		sc, err := tbl.Scan(ctx, opts)
		if err != nil {
			return err
		}
		defer sc.Release()
		for sc.Next() {
			res.Rows += sc.RecordBatch().NumRows()
		}
		res.Plan = sc.Plan()
		return sc.Err()
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

type importArgs struct {
	Data  string `json:"data"`  // Parquet file (import)
	Table string `json:"table"` // the table to create (import) or drop (drop_table)
	// Config is table configuration set (UpdateConfig, one more commit) between the
	// create and the append, e.g. {"shale.write.compression": "lz4"} (import).
	Config map[string]string `json:"config"`
}

type importResult struct {
	timed
	Rows      int64 `json:"rows"`
	Fragments int   `json:"fragments"`
	Bytes     int64 `json:"bytes"` // stored size of the data files
}

// importParquet creates args.table and appends every row of the Parquet file, streamed
// with internal/pqinput in 65,536-row batches as `shale import` reads it (timed: reading, encoding,
// storing and the commit).
func (w *worker) importParquet(ctx context.Context, a importArgs) (*importResult, error) {
	if a.Data == "" || a.Table == "" {
		return nil, errors.New("import: args.data and args.table are required")
	}
	res := &importResult{}
	err := w.measure(&res.timed, func() error {
		f, err := os.Open(a.Data)
		if err != nil {
			return err
		}
		defer f.Close()
		rr, err := pqinput.Open(ctx, f, pqinput.Options{BatchRows: fragment.DefaultMaxRowsPerBatch}) // as shale import reads it
		if err != nil {
			return err
		}
		defer rr.Release()
		tbl, err := w.db.CreateTable(ctx, a.Table, arrow.NewSchema(rr.Schema().Fields(), nil))
		if err != nil {
			return err
		}
		if len(a.Config) > 0 {
			if _, err := tbl.UpdateConfig(ctx, a.Config, nil); err != nil {
				return err
			}
		}
		_, err = tbl.Append(ctx, rr)
		return err
	})
	if err != nil {
		return nil, err
	}
	t, err := w.db.OpenTable(ctx, a.Table)
	if err != nil {
		return nil, err
	}
	m := t.Manifest()
	res.Rows, res.Fragments = m.LiveRows(), len(m.Fragments)
	for _, f := range m.Fragments {
		for _, df := range f.Files {
			res.Bytes += df.Size
		}
	}
	return res, nil
}

// dataFiles lists the local paths of the prepared table's data files (file:// store), so
// a baseline can read the very same bytes.
func (w *worker) dataFiles() (map[string]any, error) {
	root := strings.TrimPrefix(w.st.URL(), "file://")
	if root == w.st.URL() {
		return nil, fmt.Errorf("data_files: store %s is not file://", w.st.URL())
	}
	var paths []string
	var rows int64
	for _, f := range w.tbl.Manifest().Fragments {
		for _, df := range f.Files {
			paths = append(paths, filepath.Join(root, filepath.FromSlash(df.Key)))
			rows += df.Rows
		}
	}
	return map[string]any{"paths": paths, "rows": rows}, nil
}
