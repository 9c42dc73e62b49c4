package main

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
)

// recoverCommand is `shale recover [TABLE] [--min-age D] [--claim-ttl D] [--json]`.
func (a *app) recoverCommand() *cobra.Command {
	var minAge, claimTTL time.Duration
	cmd := &cobra.Command{
		Use:   "recover [TABLE] [--min-age D] [--claim-ttl D]",
		Short: "Finish or undo maintenance operations that crashed (recovery sidecars)",
		Long: `A compaction records what it may leave behind in a sidecar under _recovery/ before
writing anything, and removes it when done. A sidecar left by a crashed or failed
compaction is resolved here: if its version was committed it is published (roll
forward); otherwise the data files it wrote, which no version references, are deleted
(roll back). Then the sidecar is deleted. Running it again does nothing.
A running compaction holds a catalog hold (lease) named by its operation; its sidecar
is skipped whatever its age ("still running"), unless the hold's holder is a process of
this host that has exited: then the hold is released and the sidecar resolved at once. Sidecars younger than --min-age are
skipped too (default 30s with a catalog, where holds prove liveness; 10m without);
--min-age 0 acts on every sidecar without a live hold.
A recover that died leaves a claim on the sidecar it was resolving; others skip it
until the claim is older than --claim-ttl (default 2m).`,
		Example: `  shale recover
  shale recover flights --min-age 0 --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			table := ""
			if len(args) == 1 {
				table = args[0]
				if err := checkTableName(table); err != nil {
					return err
				}
			}
			if minAge < 0 || claimTTL < 0 {
				return usagef("--min-age and --claim-ttl must be 0 or more")
			}
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			opts := recovery.Options{ClaimTTL: claimTTL}
			switch {
			case !cmd.Flags().Changed("min-age"):
				// The library default: shorter with a catalog, whose holds prove liveness.
				minAge = recovery.DefaultMinAge
				if db.Catalog() != nil {
					minAge = recovery.DefaultMinAgeWithHolds
				}
				opts.MinAge = minAge
			case minAge == 0:
				opts.MinAge = -1
			default:
				opts.MinAge = minAge
			}
			// An operation whose hold's holder is a process of this host that has exited is
			// not running: release its hold now instead of waiting for the lease, and
			// resolve its sidecar whatever its age.
			exited, released, err := a.releaseExited(cmd.Context(), db, table)
			if err != nil {
				return err
			}
			opts.Exited = map[string]bool{}
			for _, h := range exited {
				opts.Exited[h.ID] = true
			}
			rep, rerr := recovery.Recover(cmd.Context(), db.Store(), db.Catalog(), table, opts)
			if table != "" && len(rep.Outcomes) == 0 && rerr == nil {
				// No sidecar names it: say so if the table does not exist, as every other
				// command does (a dropped table's leftover sidecars are still resolved).
				if _, err := manifest.LoadHead(cmd.Context(), db.Store(), table); errors.Is(err, manifest.ErrTableNotFound) {
					return err
				}
			}
			if a.jsonOut {
				if rep.Outcomes == nil {
					rep.Outcomes = []recovery.Outcome{}
				}
				if err := a.printJSON(rep); err != nil {
					return err
				}
				return rerr
			}
			for _, h := range released {
				a.printf("%s: released the hold of %s %s: its process (%s) has exited\n", h.Table, h.Kind, h.ID, h.Holder)
			}
			if len(rep.Outcomes) == 0 && rerr == nil {
				a.printf("No recovery sidecars%s\n", forTable(table))
			}
			for _, o := range rep.Outcomes {
				switch {
				case o.Action == recovery.RolledForward:
					a.printf("%s: operation %s rolled forward: version %d published (pointer now %d)\n", o.Table, o.Operation, o.Version, o.Published)
				case o.Action == recovery.AlreadyPublished:
					a.printf("%s: operation %s already published at version %d; sidecar removed\n", o.Table, o.Operation, o.Version)
				case o.Action == recovery.RolledBack && o.Fence > 0:
					a.printf("%s: operation %s rolled back: it committed nothing; abort version %d fences its transactions, so none can commit later; %s deleted\n",
						o.Table, o.Operation, o.Fence, plural(len(o.DeletedFiles), "data file"))
				case o.Action == recovery.RolledBack:
					a.printf("%s: operation %s rolled back: it committed nothing; %s deleted\n", o.Table, o.Operation, plural(len(o.DeletedFiles), "data file"))
				case o.Action == recovery.SkippedYoung:
					a.printf("%s: operation %s skipped: younger than --min-age %s (may still be running; run recover again later)\n", o.Table, o.Operation, minAge)
				case o.Action == recovery.SkippedLive:
					a.printf("%s: operation %s skipped: still running (it holds a live catalog hold; a crashed operation's hold expires within %s, then its sidecar is resolved once older than --min-age)\n", o.Table, o.Operation, catalog.DefaultHoldTTL)
				case o.Action == recovery.SkippedClaimed:
					a.printf("%s: operation %s skipped: another recover is resolving it\n", o.Table, o.Operation)
				case o.Action == recovery.Gone:
					a.printf("operation %s: already resolved by someone else\n", o.Operation)
				case o.Action == recovery.Failed:
					a.printf("%s: operation %s FAILED, sidecar %s kept: %s\n", o.Table, o.Operation, o.Key, o.Err)
				}
			}
			return rerr
		},
	}
	cmd.Flags().DurationVar(&minAge, "min-age", recovery.DefaultMinAgeWithHolds, "skip sidecars younger than this (0: act on all without a live hold; default 10m without a catalog)")
	cmd.Flags().DurationVar(&claimTTL, "claim-ttl", recovery.DefaultClaimTTL, "take over another recover's claim older than this")
	return cmd
}

// releaseExited finds the holds on table ("" = every table) of maintenance operations
// with a pending sidecar whose holder is a process of this host that has exited
// (catalog.HolderExited), and releases them. It returns those holds, and those it
// released (not those whose lease expired meanwhile).
func (a *app) releaseExited(ctx context.Context, db *engine.DB, table string) (exited, released []catalog.Hold, err error) {
	cat := db.Catalog()
	if cat == nil {
		return nil, nil, nil
	}
	holds, err := cat.Holds(ctx, table)
	if err != nil {
		return nil, nil, err
	}
	holds = slices.DeleteFunc(holds, func(h catalog.Hold) bool { return !catalog.HolderExited(h.Holder) })
	if len(holds) == 0 {
		return nil, nil, nil
	}
	scs, err := recovery.PendingSidecars(ctx, db.Store(), table)
	if err != nil {
		return nil, nil, err
	}
	for _, h := range holds {
		if !slices.ContainsFunc(scs, func(k recovery.Keyed) bool {
			return k.Err == nil && k.Sidecar.Table == h.Table && k.Sidecar.OperationID == h.ID
		}) {
			continue
		}
		exited = append(exited, h)
		ok, err := cat.ReleaseExited(ctx, h)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			released = append(released, h)
		}
	}
	return exited, released, nil
}

func forTable(table string) string {
	if table == "" {
		return ""
	}
	return " for " + table
}
