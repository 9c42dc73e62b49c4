package main

import (
	"github.com/spf13/cobra"
)

func (a *app) dropCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "drop TABLE",
		Short: "Drop a table: fence its writers, unpublish it, delete its versions and files",
		Long: `Drops a table in three steps. First it commits a drop marker, an empty version on top
of the table's last one: a write still in flight meets it at its commit point and fails
with "the table was dropped" (nothing it wrote is in any table), and a write whose
version number the deletes free is refused when it publishes, so no write racing the
drop can land in the table or report success. Then it removes the table's published
pointer, so no reader is directed to it. Then it deletes every version below the marker
and every other object under the table's prefix. The marker stays (one small object), so
the table's version numbers are never used again; so do the WAL shard manifests, so that
a WAL writer of the dropped table still running cannot flush into a manifest version a
writer of a new table of the name will claim (it is fenced instead).

The name can be created again afterwards (shale create, shale import): the new table
is a new incarnation of the name, numbered on from the marker, and no version of the
dropped table ever becomes one of its versions.

It refuses while a compaction, a long write or a pinned reader holds the table (a
running operation's hold is in the catalog). A drop that dies midway is finished by
dropping the table again (or by 'shale gc'); objects written by writers racing the drop
are deleted by 'shale gc'. 'shale status' reports a pointer a drop left behind.`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTableName(args[0]); err != nil {
				return err
			}
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			n, err := db.DropTable(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"table": args[0], "objects_deleted": n})
			}
			a.printf("Dropped %s (%s deleted)\n", args[0], plural(n, "object"))
			return nil
		},
	}
}
