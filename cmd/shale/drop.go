package main

import (
	"github.com/spf13/cobra"
)

func (a *app) dropCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "drop TABLE",
		Short: "Delete a table: its catalog pointer, every version and every file",
		Long: `Deletes the table's published pointer first (so no reader is directed to it), then its
manifests, then every other object under the table's prefix. The name can be created
again afterwards. It refuses while a compaction, a long write or a pinned reader holds
the table, but it cannot see a short write in flight: stop every writer of the table
first. A write racing the drop can otherwise report success and leave a version (or a
pointer) naming deleted files; 'shale status' and 'shale verify' report such a table,
and dropping it again clears it.`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			a.printf("Dropped %s (%d objects deleted)\n", args[0], n)
			return nil
		},
	}
}
