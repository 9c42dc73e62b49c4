package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/repair"
)

// repairCommand is `shale repair [TABLE] [--confirm] [--force] [--json]`.
func (a *app) repairCommand() *cobra.Command {
	var confirm, force bool
	cmd := &cobra.Command{
		Use:   "repair [TABLE] [--confirm] [--force]",
		Short: "Publish versions committed above the published one that no recovery sidecar explains",
		Long: `A writer that dies between its commit and its publish leaves drift: versions above
the table's published version that readers do not see. Drift that a recovery sidecar
names belongs to 'shale recover'. repair handles the rest: it lists every version from
published+1 to HEAD with its operation and class, maintenance (compaction, index, WAL
merge: the rows do not change) or logical (appends, deletes, updates, schema and config
changes), and by default changes nothing.
--confirm publishes maintenance-only drift (the pointer moves to HEAD).
Logical drift is refused unless --force --confirm: its writers never learned that it
committed, so publishing it may make writes visible that were reported as failed.
Drift named by a pending sidecar is always refused: run 'shale recover'. So is drift
holding a version of a multi-table group still pending; versions of aborted groups
count as empty and are never published themselves.
repair never writes, rewrites or deletes data; it only moves the published pointer.`,
		Example: `  shale repair
  shale repair flights --confirm
  shale repair flights --force --confirm`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if force && !confirm {
				// --force widens what --confirm publishes; alone it would be silently
				// ignored (a preview), which reads as if it had acted.
				return usagef("--force only takes effect with --confirm: 'shale repair [TABLE] --force --confirm' publishes logical drift; without either, repair previews")
			}
			var tables []string
			if len(args) == 1 {
				if err := checkTableName(args[0]); err != nil {
					return err
				}
				tables = args
			}
			db, err := a.open(ctx)
			if err != nil {
				return err
			}
			if db.Catalog() == nil {
				return repair.ErrNoCatalog
			}
			if tables == nil {
				if tables, err = db.Tables(ctx); err != nil {
					return err
				}
			}
			results := []repair.Result{}
			var errs []error
			for _, t := range tables {
				res, err := repair.Repair(ctx, db.Store(), db.Catalog(), t, repair.Options{Confirm: confirm, Force: force})
				if err != nil && res.Table == "" {
					return err // could not even inspect
				}
				results = append(results, res)
				if err != nil {
					errs = append(errs, err)
				}
				if !a.jsonOut {
					a.printRepair(res, err, len(args) == 1)
				}
			}
			if a.jsonOut {
				if err := a.printJSON(map[string]any{"tables": results}); err != nil {
					return err
				}
			} else if len(args) == 0 && !anyDrift(results) {
				a.printf("No drift: every table is published at HEAD\n")
			}
			if len(errs) == 1 {
				return errs[0]
			}
			if len(errs) > 1 {
				return fmt.Errorf("%s refused: %w", plural(len(errs), "table"), errors.Join(errs...))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&confirm, "confirm", false, "publish the drift (default: preview only)")
	cmd.Flags().BoolVar(&force, "force", false, "with --confirm, publish logical drift too")
	return cmd
}

func anyDrift(rs []repair.Result) bool {
	for _, r := range rs {
		if r.Decision != repair.NoDrift {
			return true
		}
	}
	return false
}

// printRepair prints one table's drift and what was done with it. Tables without drift
// are printed only when named.
func (a *app) printRepair(r repair.Result, err error, named bool) {
	if r.Decision == repair.NoDrift {
		if named {
			a.printf("%s: no drift (published = HEAD = %d)\n", r.Table, r.Head)
		}
		return
	}
	if r.Decision == repair.PublishedAhead {
		a.printf("%s: CORRUPT: published version %d is above HEAD %d\n", r.Table, r.Published, r.Head)
		return
	}
	a.printf("%s: published %d, HEAD %d: %s\n", r.Table, r.Published, r.Head, plural(len(r.Versions), "unpublished version"))
	for _, v := range r.Versions {
		owner := ""
		if v.Sidecar != "" {
			owner = ", named by sidecar " + v.Sidecar
		}
		if v.Group != "" {
			owner += fmt.Sprintf(", multi-table group %s (%s)", v.Group, v.GroupState)
		}
		a.printf("  version %d  %-13s %-11s transaction %s%s\n", v.Version, v.Kind, v.Class, v.TxnID, owner)
	}
	for _, k := range r.Unreadable {
		a.printf("  unreadable sidecar %s (may name any of these)\n", k)
	}
	// A refusal or failure is also the command's error, printed once on stderr; here
	// only what it means for this table and what to do next.
	prefix := "  "
	if err != nil && !r.Repaired {
		if !refusal(err) {
			a.printf("  not published; see the error\n")
			return
		}
		prefix = "  refused: "
	}
	switch {
	case r.Repaired:
		a.printf("  published version %d (pointer now %d)\n", r.Target, r.PublishedNow)
	case r.Decision == repair.GroupPending:
		a.printf("%sa multi-table group is still deciding: its commit publishes these versions; retry later\n", prefix)
	case r.Decision == repair.OnlyAborted:
		a.printf("%sonly versions of aborted multi-table groups: nothing to publish\n", prefix)
	case r.Decision == repair.RunRecover:
		a.printf("%sa recovery sidecar covers this drift: run 'shale recover %s'\n", prefix, r.Table)
	case r.Decision == repair.NeedsForce:
		a.printf("%slogical drift: 'shale repair %s --force --confirm' publishes it\n", prefix, r.Table)
	case r.Decision == repair.Publishable:
		a.printf("%smaintenance only: 'shale repair %s --confirm' publishes it\n", prefix, r.Table)
	}
}

// refusal reports whether err is repair declining to publish (as opposed to a failure
// while publishing).
func refusal(err error) bool {
	return errors.Is(err, repair.ErrLogicalDrift) || errors.Is(err, repair.ErrSidecarPending) ||
		errors.Is(err, repair.ErrGroupPending) || errors.Is(err, repair.ErrPublishedAhead)
}
