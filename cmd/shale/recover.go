package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// recoverCommand is `shale recover [TABLE] [--min-age D] [--json]`.
func (a *app) recoverCommand() *cobra.Command {
	var minAge time.Duration
	cmd := &cobra.Command{
		Use:   "recover [TABLE] [--min-age D]",
		Short: "Finish or undo maintenance operations that crashed (recovery sidecars)",
		Long: `A compaction records what it may leave behind in a sidecar under _recovery/ before
writing anything, and removes it when done. A sidecar left by a crashed or failed
compaction is resolved here: if its version was committed it is published (roll
forward); otherwise the data files it wrote, which no version references, are deleted
(roll back). Then the sidecar is deleted. Running it again does nothing.
Sidecars younger than --min-age may belong to a compaction still running and are
skipped; --min-age 0 acts on all (only when no compaction is running).`,
		Example: `  shale recover
  shale recover flights --min-age 0 --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			table := ""
			if len(args) == 1 {
				table = args[0]
				if err := manifest.ValidateTableName(table); err != nil {
					return err
				}
			}
			if minAge < 0 {
				return usagef("--min-age must be 0 or more")
			}
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			opts := recovery.Options{MinAge: minAge}
			if minAge == 0 {
				opts.MinAge = -1
			}
			rep, rerr := recovery.Recover(cmd.Context(), db.Store(), db.Catalog(), table, opts)
			if a.jsonOut {
				if rep.Outcomes == nil {
					rep.Outcomes = []recovery.Outcome{}
				}
				if err := a.printJSON(rep); err != nil {
					return err
				}
				return rerr
			}
			if len(rep.Outcomes) == 0 && rerr == nil {
				a.printf("No recovery sidecars%s\n", forTable(table))
			}
			for _, o := range rep.Outcomes {
				switch o.Action {
				case recovery.RolledForward:
					a.printf("%s: operation %s rolled forward: version %d published (pointer now %d)\n", o.Table, o.Operation, o.Version, o.Published)
				case recovery.AlreadyPublished:
					a.printf("%s: operation %s already published at version %d; sidecar removed\n", o.Table, o.Operation, o.Version)
				case recovery.RolledBack:
					a.printf("%s: operation %s rolled back: nothing committed, %d data file(s) deleted\n", o.Table, o.Operation, len(o.DeletedFiles))
				case recovery.SkippedYoung:
					a.printf("%s: operation %s skipped: younger than --min-age %s (may still be running)\n", o.Table, o.Operation, minAge)
				case recovery.SkippedClaimed:
					a.printf("%s: operation %s skipped: another recover is resolving it\n", o.Table, o.Operation)
				case recovery.Gone:
					a.printf("operation %s: already resolved by someone else\n", o.Operation)
				case recovery.Failed:
					a.printf("%s: operation %s FAILED, sidecar %s kept: %s\n", o.Table, o.Operation, o.Key, o.Err)
				}
			}
			return rerr
		},
	}
	cmd.Flags().DurationVar(&minAge, "min-age", recovery.DefaultMinAge, "skip sidecars younger than this (0: act on all)")
	return cmd
}

func forTable(table string) string {
	if table == "" {
		return ""
	}
	return " for " + table
}
