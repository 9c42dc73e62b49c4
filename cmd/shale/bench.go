package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/benchmarks"
	"github.com/shale-db/shale/coord"
)

func (a *app) benchCommand() *cobra.Command {
	var (
		data, suites string
		rows, reps   int
		keep         bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure import, scan, open and commit against raw baselines",
		Long: `Runs the benchmark suites of benchmarks.Run against --store (default: a new temporary
directory on local disk) with the etcd of --etcd or the embedded default, and prints a
Markdown report: import vs encode+put of the same bytes, full scan vs read+IPC decode of the
same files, open latency and requests at 10 and 1,000 versions, and requests per commit;
on request (--suites), txn, compaction vs scan+write of the same table version (compact)
recover time with 0, 10 and 100 pending sidecars (recover), and WAL appends vs plain appends,
queries over unmerged generations and MergeWAL vs scan+write (wal).
Baselines and engine runs alternate in one process; figures are medians, ratios are
baseline time / engine time. Progress goes to stderr. benchmarks/RESULTS.md records runs.

What the baselines are: Shale's own building blocks without the engine around them.
Import is compared with arrow-go's IPC file writer (ZSTD) plus a Put of each file to the
same store; scan with a GET of each data file plus arrow-go's IPC reader; compaction
with Table.Scan plus fragment.Writer. They show the engine's overhead over the encoding
and decoding it uses, not how Shale compares with other engines: against Lance, Delta
Lake, DuckDB and pyarrow (writing and reading the same Arrow IPC bytes) on the same data
and machine, run benchmarks/peers/run.sh (Python 3; see benchmarks/RESULTS.md).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if reps < 1 {
				return usagef("--reps must be at least 1, got %d", reps)
			}
			if rows < 0 {
				return usagef("--rows must be 0 (all) or more, got %d", rows)
			}
			var suiteList []string
			if suites != "" {
				for _, s := range strings.Split(suites, ",") {
					s = strings.TrimSpace(s)
					if !slices.Contains(benchmarks.AllSuites, s) {
						return usagef("unknown suite %q in --suites (want %s)", s, strings.Join(benchmarks.AllSuites, ", "))
					}
					suiteList = append(suiteList, s)
				}
			}
			c, err := coord.Connect(ctx, a.coordConfig())
			if err != nil {
				return err
			}
			defer c.Close()
			cfg := benchmarks.Config{StoreURL: a.storeFlag, Etcd: c.Etcd(), Rows: rows, Reps: reps, Keep: keep}
			if data != "" {
				if cfg.Data, err = findDemoData(data); err != nil {
					return err
				}
			}
			cfg.Suites = suiteList
			rep, err := benchmarks.Run(ctx, cfg, a.stderr)
			if err != nil {
				return err
			}
			if a.jsonOut {
				// benchmarks.Report has no JSON tags: its keys are its field names in
				// snake_case (durations in nanoseconds).
				return writeReport(a.stdout, rep, true)
			}
			a.printf("%s", rep.Markdown())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", defaultDemoData, "Parquet file with the flights schema (\"\" = synthetic rows)")
	f.StringVar(&suites, "suites", "", "comma-separated suites: import, scan, open, commit, txn, compact, recover, wal (default: import, scan, open, commit; txn builds a 10,000-version history and runs writer processes, compact and recover rebuild their tables or sidecars every repetition)")
	f.IntVar(&rows, "rows", 0, "cap on rows read from --data (0 = all)")
	f.IntVar(&reps, "reps", benchmarks.DefaultReps, "timed repetitions per variant (at least 1)")
	f.BoolVar(&keep, "keep", false, "leave the benchmark's objects and catalog keys in place")
	return cmd
}
