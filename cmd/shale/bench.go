package main

import (
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
and recover time with 0, 10 and 100 pending sidecars (recover).
Baselines and engine runs alternate in one process; figures are medians, ratios are
baseline time / engine time. Progress goes to stderr. benchmarks/RESULTS.md records runs.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
			if suites != "" {
				cfg.Suites = strings.Split(suites, ",")
			}
			rep, err := benchmarks.Run(ctx, cfg, a.stderr)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(rep)
			}
			a.printf("%s", rep.Markdown())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", defaultDemoData, "Parquet file with the flights schema (\"\" = synthetic rows)")
	f.StringVar(&suites, "suites", "", "comma-separated suites: import, scan, open, commit, txn, compact, recover (default: import, scan, open, commit; txn builds a 10,000-version history and runs writer processes, compact and recover rebuild their tables or sidecars every repetition)")
	f.IntVar(&rows, "rows", 0, "cap on rows read from --data (0 = all)")
	f.IntVar(&reps, "reps", 0, "timed repetitions per variant (default 5)")
	f.BoolVar(&keep, "keep", false, "leave the benchmark's objects and catalog keys in place")
	return cmd
}
