package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/recovery"
)

func (a *app) compactCommand() *cobra.Command {
	var (
		dryRun       bool
		targetRows   int64
		deletedRatio float64
	)
	cmd := &cobra.Command{
		Use:   "compact TABLE [--dry-run] [--target-rows N] [--deleted-ratio R]",
		Short: "Rewrite small fragments, and fragments with many deleted rows, into larger ones",
		Long: `Rewrite runs of adjacent small fragments (fewer than --target-rows rows), and
fragments whose deleted/physical ratio exceeds --deleted-ratio, into new fragments of up
to --target-rows live rows, as one new version. The rows and their order do not change;
older versions still read the old fragments. Fragments covered by different indexes are
never merged. Appends committed meanwhile are kept; a concurrent delete or update of a
fragment being rewritten makes compaction replan (up to 3 attempts).
--dry-run prints the plan and writes nothing.`,
		Example: `  shale compact flights --dry-run
  shale compact flights --target-rows 500000 --deleted-ratio 0.2`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if targetRows <= 0 {
				return usagef("--target-rows must be positive")
			}
			if deletedRatio < 0 {
				return usagef("--deleted-ratio must be 0 or more (0 rewrites any fragment with a deleted row, 1 or more none)")
			}
			opts := compaction.Options{TargetRows: targetRows, DeletedRatio: deletedRatio}
			if deletedRatio == 0 {
				opts.DeletedRatio = -1 // the CLI's 0 means any deletion; the package's 0 means the default
			}
			if !flagChanged(cmd.Flags(), "deleted-ratio") {
				opts.DeletedRatio = 0
			}
			if err := checkTableName(args[0]); err != nil {
				return err
			}
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			ex := compaction.New(db)
			recovery.Enable(ex) // Phase A sidecar before the first write; `shale recover` resolves a crash
			if dryRun {
				p, err := ex.Plan(cmd.Context(), args[0], opts)
				if err != nil {
					return err
				}
				return a.printPlan(p)
			}
			start := time.Now()
			st, err := ex.Run(cmd.Context(), args[0], opts)
			if err != nil && cmd.Context().Err() != nil && st.Operation != "" {
				return a.abandonCompaction(db, st, err)
			}
			if err != nil {
				return err
			}
			elapsed := time.Since(start)
			if a.jsonOut {
				return a.printJSON(map[string]any{"table": st.Table, "committed": st.Version != 0, "version": st.Version,
					"read_version": st.ReadVersion, "transaction": st.TxnID, "attempts": st.Attempts, "groups": st.Groups,
					"fragments_before": st.FragmentsBefore, "fragments_after": st.FragmentsAfter,
					"fragments_removed": st.FragmentsRemoved, "fragments_added": st.FragmentsAdded,
					"rows_rewritten": st.RowsRewritten, "rows_dropped": st.RowsDropped,
					"bytes_read": st.BytesRead, "bytes_written": st.BytesWritten, "elapsed_ms": elapsed.Milliseconds()})
			}
			if st.Version == 0 {
				a.printf("Nothing to compact in %s (version %d, %s)\n", st.Table, st.ReadVersion, plural(st.FragmentsBefore, "fragment"))
				return nil
			}
			a.printf("Compacted %s: version %d, %s → %s (%s rewritten into %s), %s, %s → %s, %s dropped, %s, %s\n",
				st.Table, st.Version, plural(st.FragmentsBefore, "fragment"), plural(st.FragmentsAfter, "fragment"),
				thousands(int64(st.FragmentsRemoved)), thousands(int64(st.FragmentsAdded)), plural(st.RowsRewritten, "row"),
				humanBytes(st.BytesRead), humanBytes(st.BytesWritten), plural(st.RowsDropped, "deleted row"), plural(st.Attempts, "attempt"), seconds(elapsed))
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "print the plan (groups of fragments, rows) without writing")
	f.Int64Var(&targetRows, "target-rows", compaction.DefaultTargetRows, "rows per output fragment; fragments with fewer are merged with their neighbours")
	f.Float64Var(&deletedRatio, "deleted-ratio", compaction.DefaultDeletedRatio, "rewrite a fragment alone when deleted/physical rows exceeds this (0: any deletion; 1: never)")
	return cmd
}

// printPlan prints a compaction plan: one line per group, then the totals.
func (a *app) printPlan(p *compaction.Plan) error {
	if a.jsonOut {
		return a.printJSON(map[string]any{"table": p.Table, "read_version": p.ReadVersion, "transaction": p.Txn.ID,
			"target_rows": p.Options.TargetRows, "deleted_ratio": p.Options.DeletedRatio,
			"fragments": p.FragmentsBefore, "groups": p.Groups, "rows": p.Rows()})
	}
	if p.Empty() {
		a.printf("Nothing to compact in %s (version %d, %s)\n", p.Table, p.ReadVersion, plural(p.FragmentsBefore, "fragment"))
		return nil
	}
	a.printf("Plan for %s at version %d (target %s rows, deleted ratio %g):\n", p.Table, p.ReadVersion, thousands(p.Options.TargetRows), p.Options.DeletedRatio)
	for i, g := range p.Groups {
		idx := ""
		if len(g.Indexes) > 0 {
			idx = ", indexes " + strings.Join(g.Indexes, ",")
		}
		a.printf("  group %d: %s %s, %s live of %s, %s%s\n", i+1, plural(len(g.Old), "fragment"), idRange(g.Old),
			thousands(g.LiveRows), plural(g.PhysicalRows, "row"), humanBytes(g.Bytes), idx)
	}
	verb := "rewrite"
	if len(p.Groups) == 1 {
		verb = "rewrites"
	}
	a.printf("%s %s %s of %s (%s); nothing written (--dry-run)\n",
		plural(len(p.Groups), "group"), verb, thousands(int64(p.OldFragments())), plural(p.FragmentsBefore, "fragment"), plural(p.Rows(), "live row"))
	return nil
}

// idRange renders fragment ids compactly: "[3]", "[3..9]" when consecutive, else the list.
func idRange(ids []uint32) string {
	if len(ids) == 1 {
		return fmt.Sprintf("[%d]", ids[0])
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1]+1 {
			return fmt.Sprint(ids)
		}
	}
	return fmt.Sprintf("[%d..%d]", ids[0], ids[len(ids)-1])
}

// abandonCompaction resolves the recovery sidecar of a compaction that Ctrl-C (or
// SIGTERM) stopped, at once: this process ran it and Run has returned, so it is not
// running (recovery.Options.Exited), and the user need not wait past --min-age and run
// 'shale recover'. A roll back commits an abort version that fences the compaction's
// transactions (a manifest put cut short could still land) and deletes its files; a
// compaction that had committed is published. Other sidecars are left alone (a minimum
// age no sidecar has). When the clean-up fails the sidecar stays for 'shale recover'.
func (a *app) abandonCompaction(db *engine.DB, st compaction.Stats, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	rep, err := recovery.Recover(ctx, db.Store(), db.Catalog(), st.Table, recovery.Options{
		MinAge: 100 * 365 * 24 * time.Hour,
		Exited: map[string]bool{st.Operation: true},
	})
	for _, o := range rep.Outcomes {
		if o.Operation != st.Operation {
			continue
		}
		switch o.Action {
		case recovery.RolledBack, recovery.Gone:
			files := ""
			if n := len(o.DeletedFiles); n > 0 {
				files = fmt.Sprintf("; the %s it had written deleted", plural(n, "data file"))
			}
			fence := ""
			if o.Fence > 0 {
				fence = fmt.Sprintf(" (abort version %d fences its transactions)", o.Fence)
			}
			return &interruptedError{fmt.Sprintf("nothing was compacted: %s is unchanged%s%s", st.Table, fence, files), cause}
		case recovery.RolledForward, recovery.AlreadyPublished:
			fmt.Fprintf(a.stderr, "note: interrupted, but the compaction had committed already, as version %d of %s; it is published\n", o.Version, st.Table)
			return nil
		}
	}
	if err == nil {
		err = errors.New("its sidecar was not resolved")
	}
	return &interruptedError{fmt.Sprintf("the compaction of %s stopped and its clean-up failed (%v): its rows are unchanged; 'shale recover %s' deletes the files it wrote", st.Table, err, st.Table), cause}
}
