package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/store"
)

// Suite names accepted by Config.Suites.
const (
	SuiteImport  = "import"  // engine import vs encode+put of the same Arrow IPC files
	SuiteScan    = "scan"    // engine scans vs GET + arrow-go IPC decode of the same files
	SuiteOpen    = "open"    // OpenTable latency and requests at each history size
	SuiteCommit  = "commit"  // requests and latency of one small append at each history size
	SuiteTxn     = "txn"     // writer processes on one table; open and commit on long histories
	SuiteCompact = "compact" // compaction of small fragments vs scan + write of the same rows
	SuiteRecover = "recover" // recovery.Recover with 0, 10 and 100 pending sidecars
	SuiteWAL     = "wal"     // WAL appends vs plain appends, queries over unmerged generations, MergeWAL vs scan + write
)

// AllSuites lists every suite in the order Run runs them.
var AllSuites = []string{SuiteImport, SuiteScan, SuiteOpen, SuiteCommit, SuiteTxn, SuiteCompact, SuiteRecover, SuiteWAL}

// DefaultSuites are the suites Run runs when Config.Suites is nil (txn takes a few
// minutes, mostly building its 10,000-version history, and compact and recover build a
// fresh table or fresh sidecars for every repetition, so they run when asked for).
var DefaultSuites = []string{SuiteImport, SuiteScan, SuiteOpen, SuiteCommit}

// ErrConfig is wrapped by errors about a bad Config.
var ErrConfig = errors.New("benchmarks: bad config")

// Config says what Run measures and where. Zero values take the defaults.
type Config struct {
	// StoreURL is the store the suites write to (file:///dir, mem://name, s3://…, gs://…).
	// Run works under a fresh sub-location <StoreURL>/shale-bench-<ULID> and deletes it at
	// the end unless Keep. "" = a new temporary directory on local disk (file://).
	StoreURL string
	// Etcd is the catalog's etcd client (not closed by Run). When nil, EtcdEndpoints are
	// dialled; when both are empty Run starts an embedded etcd in a temporary directory.
	Etcd          *clientv3.Client
	EtcdEndpoints []string
	// Data is a Parquet file with the flights schema (date timestamp[us], delay int64,
	// distance int64, origin and destination large_utf8), e.g. testdata/flights-3m.parquet.
	// "" = synthetic flights-like rows (SyntheticFlights, seed 1).
	Data string
	// Rows caps the rows read from Data (0 = all). Without Data it is the number of
	// synthetic rows (0 = 1,000,000).
	Rows int
	// Suites to run, from AllSuites (nil = DefaultSuites).
	Suites []string
	// Reps is the number of timed repetitions of each import and scan variant and of the
	// commits at each history size (default 5). Reported figures are medians.
	Reps int
	// Versions are the history sizes of the open and commit suites: a table with N
	// versions is made by CreateTable plus N-1 small appends (default 10 and 1000).
	Versions []int
	// OpenReps is the number of timed opens per history size (default 20).
	OpenReps int
	// BatchRows and FileRows shape the data files of the engine and the baselines alike
	// (defaults fragment.DefaultMaxRowsPerBatch = 65,536 and DefaultMaxRowsPerFile =
	// 1,048,576). Compression is ZSTD for both.
	BatchRows, FileRows int
	// ScanColumns is the projection of the projected scan (default origin, delay).
	ScanColumns []string
	// Filters are the WHERE expressions of the filtered scans (default: one that statistics
	// cannot prune and one date range they can).
	Filters []string
	// Keep leaves the written objects and catalog keys in place.
	Keep bool

	// TxnWriters are the numbers of writer processes of the txn suite (default 1, 2, 4).
	// Writers need a store other processes can open (not mem://).
	TxnWriters []int
	// TxnWindow is how long each writer appends (default 3 s); TxnReps how many windows
	// each writer count gets, alternating counts (default 3).
	TxnWindow time.Duration
	TxnReps   int
	// TxnVersions are the sizes of the txn suite's histories built by configuration changes
	// (default 10, 1,000, 10,000); TxnAppendVersions those built by small appends, for
	// information (default 10, 1,000).
	TxnVersions, TxnAppendVersions []int

	// CompactFragmentRows is the size of the small fragments the compact suite compacts
	// (default DefaultCompactFragmentRows = 10,000: 300 fragments for the flights data);
	// CompactTargetRows its compaction target and the baseline's rows per data file
	// (default compaction.DefaultTargetRows = 1,048,576).
	CompactFragmentRows int
	CompactTargetRows   int64

	// RecoverSidecars are the numbers of pending sidecars the recover suite resolves
	// (default 0, 10, 100); every RecoverForwardEvery-th of them rolls forward, the others
	// back (default 10). RecoverFragments of RecoverFragmentRows rows shape its small
	// tables (default 8 of 1,000).
	RecoverSidecars                                            []int
	RecoverForwardEvery, RecoverFragments, RecoverFragmentRows int

	// WALGoroutines append WALBatchRows-row batches for WALWindow per repetition in the
	// wal suite's append part (defaults 16, 100, 3 s).
	WALGoroutines, WALBatchRows int
	WALWindow                   time.Duration
	// WALGenerations are the unmerged generation counts its queries read (default 0, 64,
	// 256), each generation WALGenerationRows rows (default 1,000) over a base table of
	// WALBaseRows rows (default 100,000); WALMergeGenerations generations are merged per
	// repetition of its merge part (default 64).
	WALGenerations                                      []int
	WALGenerationRows, WALBaseRows, WALMergeGenerations int
}

// Defaults for Config.
const (
	DefaultReps          = 5
	DefaultOpenReps      = 20
	DefaultSyntheticRows = 1_000_000
)

// DefaultVersions are the history sizes of the open and commit suites.
var DefaultVersions = []int{10, 1000}

// Defaults of the txn suite.
var (
	DefaultTxnWriters        = []int{1, 2, 4}
	DefaultTxnVersions       = []int{10, 1000, 10000}
	DefaultTxnAppendVersions = []int{10, 1000}
)

const (
	DefaultTxnWindow = 3 * time.Second
	DefaultTxnReps   = 3
)

// DefaultScanColumns and DefaultFilters shape the informational scans.
var (
	DefaultScanColumns = []string{"origin", "delay"}
	DefaultFilters     = []string{
		"origin = 'SFO' AND delay > 60",                       // selective; statistics cannot prune
		"date BETWEEN '2001-03-01' AND '2001-03-07 23:59:59'", // ~2% of a year; batch statistics prune
	}
)

func (c Config) withDefaults() (Config, error) {
	if c.Reps <= 0 {
		c.Reps = DefaultReps
	}
	if c.OpenReps <= 0 {
		c.OpenReps = DefaultOpenReps
	}
	if len(c.Versions) == 0 {
		c.Versions = DefaultVersions
	}
	for _, v := range c.Versions {
		if v < 2 {
			return c, fmt.Errorf("%w: history size %d (need >= 2: CreateTable plus at least one append)", ErrConfig, v)
		}
	}
	if c.BatchRows <= 0 {
		c.BatchRows = fragment.DefaultMaxRowsPerBatch
	}
	if c.FileRows <= 0 {
		c.FileRows = fragment.DefaultMaxRowsPerFile
	}
	if c.FileRows < c.BatchRows {
		return c, fmt.Errorf("%w: FileRows %d < BatchRows %d", ErrConfig, c.FileRows, c.BatchRows)
	}
	if c.Data == "" && c.Rows <= 0 {
		c.Rows = DefaultSyntheticRows
	}
	if c.Rows < 0 {
		return c, fmt.Errorf("%w: Rows %d", ErrConfig, c.Rows)
	}
	if c.ScanColumns == nil {
		c.ScanColumns = DefaultScanColumns
	}
	if c.Filters == nil {
		c.Filters = DefaultFilters
	}
	if c.Suites == nil {
		c.Suites = DefaultSuites
	}
	if len(c.TxnWriters) == 0 {
		c.TxnWriters = DefaultTxnWriters
	}
	if c.TxnWindow <= 0 {
		c.TxnWindow = DefaultTxnWindow
	}
	if c.TxnReps <= 0 {
		c.TxnReps = DefaultTxnReps
	}
	if c.TxnVersions == nil {
		c.TxnVersions = DefaultTxnVersions
	}
	if c.TxnAppendVersions == nil {
		c.TxnAppendVersions = DefaultTxnAppendVersions
	}
	if c.CompactFragmentRows <= 0 {
		c.CompactFragmentRows = DefaultCompactFragmentRows
	}
	if c.CompactTargetRows <= 0 {
		c.CompactTargetRows = DefaultCompactTargetRows
	}
	if c.RecoverSidecars == nil {
		c.RecoverSidecars = DefaultRecoverSidecars
	}
	if c.RecoverForwardEvery <= 0 {
		c.RecoverForwardEvery = DefaultRecoverForwardEvery
	}
	if c.RecoverFragments <= 0 {
		c.RecoverFragments = DefaultRecoverFragments
	}
	if c.RecoverFragmentRows <= 0 {
		c.RecoverFragmentRows = DefaultRecoverFragmentRows
	}
	if c.WALGoroutines <= 0 {
		c.WALGoroutines = DefaultWALGoroutines
	}
	if c.WALBatchRows <= 0 {
		c.WALBatchRows = DefaultWALBatchRows
	}
	if c.WALWindow <= 0 {
		c.WALWindow = DefaultWALWindow
	}
	if c.WALGenerations == nil {
		c.WALGenerations = DefaultWALGenerations
	}
	if c.WALGenerationRows <= 0 {
		c.WALGenerationRows = DefaultWALGenerationRows
	}
	if c.WALGenerationRows%c.WALBatchRows != 0 {
		return c, fmt.Errorf("%w: WALGenerationRows %d is not a multiple of WALBatchRows %d", ErrConfig, c.WALGenerationRows, c.WALBatchRows)
	}
	if c.WALBaseRows <= 0 {
		c.WALBaseRows = DefaultWALBaseRows
	}
	if c.WALMergeGenerations <= 0 {
		c.WALMergeGenerations = DefaultWALMergeGenerations
	}
	for _, n := range c.WALGenerations {
		if n < 0 {
			return c, fmt.Errorf("%w: %d unmerged generations", ErrConfig, n)
		}
	}
	for _, n := range c.RecoverSidecars {
		if n < 0 {
			return c, fmt.Errorf("%w: %d pending sidecars", ErrConfig, n)
		}
	}
	for _, n := range c.TxnWriters {
		if n < 1 {
			return c, fmt.Errorf("%w: %d writer processes", ErrConfig, n)
		}
	}
	for _, v := range append(slices.Clone(c.TxnVersions), c.TxnAppendVersions...) {
		if v < 2 {
			return c, fmt.Errorf("%w: txn history size %d (need >= 2)", ErrConfig, v)
		}
	}
	for _, s := range c.Suites {
		if !slices.Contains(AllSuites, s) {
			return c, fmt.Errorf("%w: unknown suite %q (want %s)", ErrConfig, s, strings.Join(AllSuites, ", "))
		}
	}
	return c, nil
}

func (c Config) has(suite string) bool { return slices.Contains(c.Suites, suite) }

// env is what the suites run against: one store under a fresh sub-location, a DB over it
// whose catalog lives under a fresh etcd prefix, and counters of both.
type env struct {
	store     store.Store
	db        *engine.DB
	etcd      *clientv3.Client // counting wrapper of the caller's client
	endpoints []string         // the caller's client's, for writer processes
	kv        *countingKV
	prefix    string // catalog prefix
	opts      engine.Options
	cleanup   []func() error
}

func (e *env) close() error {
	var errs []error
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		errs = append(errs, e.cleanup[i]())
	}
	return errors.Join(errs...)
}

// openDB opens another DB over the same store and catalog with changed options.
func (e *env) openDB(ctx context.Context, change func(*engine.Options)) (*engine.DB, error) {
	o := e.opts
	change(&o)
	return engine.Open(ctx, e.store, o)
}

// storeRequests and etcdRequests snapshot the counters.
func (e *env) storeRequests() store.Requests  { return e.store.Counters().Snapshot() }
func (e *env) etcdRequests() map[string]int64 { return e.kv.Snapshot() }

// newEnv connects to etcd (or starts an embedded one) and opens the run's store.
func newEnv(ctx context.Context, cfg Config, log io.Writer) (_ *env, err error) {
	e := &env{}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
		}
	}()
	cli := cfg.Etcd
	if cli == nil {
		endpoints := cfg.EtcdEndpoints
		if len(endpoints) == 0 {
			dir, err := os.MkdirTemp("", "shale-bench-etcd-")
			if err != nil {
				return nil, fmt.Errorf("benchmarks: etcd state dir: %w", err)
			}
			e.cleanup = append(e.cleanup, func() error { return os.RemoveAll(dir) })
			emb, err := coord.StartEmbedded(dir)
			if err != nil {
				return nil, err
			}
			e.cleanup = append(e.cleanup, func() error { emb.Close(); return nil })
			endpoints = emb.Endpoints()
			fmt.Fprintf(log, "started embedded etcd at %s\n", strings.Join(endpoints, ","))
		}
		c, err := coord.Connect(ctx, coord.Config{Endpoints: endpoints})
		if err != nil {
			return nil, err
		}
		e.cleanup = append(e.cleanup, c.Close)
		cli = c.Etcd()
	}
	e.etcd, e.kv = newCountingClient(ctx, cli)
	e.endpoints = cli.Endpoints()

	runID := strings.ToLower(ulid.Make().String())
	base := cfg.StoreURL
	if base == "" {
		dir, err := os.MkdirTemp("", "shale-bench-store-")
		if err != nil {
			return nil, fmt.Errorf("benchmarks: store dir: %w", err)
		}
		e.cleanup = append(e.cleanup, func() error { return os.RemoveAll(dir) })
		base = "file://" + dir
	}
	runURL, localDir, err := subURL(base, "shale-bench-"+runID)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, runURL, store.Options{})
	if err != nil {
		return nil, err
	}
	e.store = st
	e.cleanup = append(e.cleanup, st.Close)
	if !cfg.Keep {
		e.cleanup = append(e.cleanup, func() error {
			if localDir != "" {
				return os.RemoveAll(localDir)
			}
			return clearPrefix(context.WithoutCancel(ctx), st, "")
		})
	}

	e.prefix = "/shale-bench/" + runID
	if !cfg.Keep {
		e.cleanup = append(e.cleanup, func() error {
			_, err := cli.Delete(context.WithoutCancel(ctx), e.prefix+"/", clientv3.WithPrefix())
			return err
		})
	}
	e.opts = engine.Options{
		Etcd:          e.etcd,
		CatalogPrefix: e.prefix,
		Write:         fragment.WriterOptions{Compression: fragment.CompressionZstd, MaxRowsPerBatch: cfg.BatchRows, MaxRowsPerFile: cfg.FileRows},
	}
	db, err := engine.Open(ctx, e.store, e.opts)
	if err != nil {
		return nil, err
	}
	e.db = db
	return e, nil
}

// subURL appends a path segment to a store URL. For a file:// URL it also returns the
// local directory, so cleanup can remove it whole.
func subURL(base, name string) (string, string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return "", "", fmt.Errorf("%w: store URL %q: want file://, mem://, s3:// or gs://", ErrConfig, base)
	}
	u.Path = path.Join("/", u.Path, name)
	local := ""
	if u.Scheme == "file" && (u.Host == "" || u.Host == "localhost") {
		local = u.Path
	}
	if u.Scheme == "mem" && u.Host == "" {
		u.Host, u.Path = strings.TrimPrefix(u.Path, "/"), ""
	}
	return u.String(), local, nil
}

// Run runs the configured suites in this process, alternating each engine variant with its
// baselines repetition by repetition, and returns the report (Report.Markdown renders it).
// Progress lines go to log (nil = none). With the defaults and the 3M-row flights data it
// takes about a minute on 2 cores and peaks near 0.6 GB of memory; the 1,000-version
// history alone costs ~1,000 small appends (about 9 s on local disk).
// Errors: ErrConfig; data, store and etcd errors; an engine result that disagrees with the
// data (row counts, versions) is an error, not a number.
func Run(ctx context.Context, cfg Config, log io.Writer) (rep Report, err error) {
	if log == nil {
		log = io.Discard
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		return Report{}, err
	}
	started := time.Now()
	rep = Report{Machine: CurrentMachine(), Started: started, Reps: cfg.Reps, Suites: cfg.Suites, LoadStart: loadAvg()}

	var ds *Dataset
	if cfg.has(SuiteImport) || cfg.has(SuiteScan) || cfg.has(SuiteCompact) {
		t0 := time.Now()
		if cfg.Data != "" {
			ds, err = LoadParquet(ctx, cfg.Data, int64(cfg.Rows), cfg.BatchRows)
		} else {
			ds, err = SyntheticFlights(int64(cfg.Rows), 1, cfg.BatchRows)
		}
		if err != nil {
			return rep, err
		}
		defer ds.Release()
		fmt.Fprintf(log, "data: %s, %d rows, %.1f MB in memory, loaded in %v (not timed)\n",
			ds.Source, ds.Rows, float64(ds.Bytes)/1e6, time.Since(t0).Round(time.Millisecond))
		rep.Data = DataInfo{Source: ds.Source, Rows: ds.Rows, Bytes: ds.Bytes, BatchRows: cfg.BatchRows, FileRows: cfg.FileRows}
	}

	e, err := newEnv(ctx, cfg, log)
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := e.close(); cerr != nil && err == nil {
			err = fmt.Errorf("benchmarks: cleanup: %w", cerr)
		}
	}()
	rep.StoreURL = e.store.URL()

	if cfg.has(SuiteImport) {
		fmt.Fprintln(log, "suite import")
		if rep.Import, err = runImport(ctx, e, ds, cfg, log); err != nil {
			return rep, err
		}
	}
	if cfg.has(SuiteScan) {
		fmt.Fprintln(log, "suite scan")
		if rep.Scan, err = runScan(ctx, e, ds, cfg, log); err != nil {
			return rep, err
		}
	}
	if cfg.has(SuiteOpen) || cfg.has(SuiteCommit) {
		fmt.Fprintln(log, "suites open/commit")
		if rep.History, err = runHistory(ctx, e, cfg, log); err != nil {
			return rep, err
		}
	}
	if cfg.has(SuiteTxn) {
		fmt.Fprintln(log, "suite txn")
		if rep.Txn, err = runTxn(ctx, e, cfg, log); err != nil {
			return rep, err
		}
	}
	if cfg.has(SuiteCompact) {
		fmt.Fprintln(log, "suite compact")
		if rep.Compact, err = runCompact(ctx, e, ds, cfg, log); err != nil {
			return rep, err
		}
	}
	if cfg.has(SuiteRecover) {
		fmt.Fprintln(log, "suite recover")
		if rep.Recover, err = runRecover(ctx, e, cfg, log); err != nil {
			return rep, err
		}
	}
	if cfg.has(SuiteWAL) {
		fmt.Fprintln(log, "suite wal")
		if rep.WAL, err = runWAL(ctx, e, cfg, log); err != nil {
			return rep, err
		}
	}
	rep.Checks = checks(rep)
	rep.Elapsed = time.Since(started)
	rep.LoadEnd = loadAvg()
	return rep, nil
}

// clearPrefix deletes every object under prefix (untimed cleanup between repetitions).
func clearPrefix(ctx context.Context, s store.Store, prefix string) error {
	_, err := store.DeletePrefix(ctx, s, prefix)
	return err
}
