package main

import (
	"time"

	"github.com/spf13/cobra"
)

func (a *app) deleteCommand() *cobra.Command {
	var where string
	cmd := &cobra.Command{
		Use:   "delete TABLE --where EXPR",
		Short: "Delete the rows matching a WHERE expression",
		Long: `Delete the rows matching a SQL WHERE expression in one new version (deletion
vectors; the data files are not rewritten). Deleting nothing commits nothing. Older
versions still see the rows: query --version N.

` + whereHelp,
		Example: `  shale delete flights --where "origin = 'LAS'"`,
		Args:    exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if where == "" {
				return usagef("delete needs --where (use --where true to delete every row)")
			}
			start := time.Now()
			t, err := a.openTable(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			before := t.Version()
			res, err := t.Delete(cmd.Context(), where)
			if err != nil {
				return droppedWhile(err, t.Name(), "delete", "no row was deleted from any table")
			}
			elapsed := time.Since(start)
			if a.jsonOut {
				return a.printJSON(map[string]any{"table": t.Name(), "deleted": res.Rows, "version": res.Version,
					"committed": res.Version != before, "elapsed_ms": elapsed.Milliseconds(), "also_published": orEmpty(res.AlsoPublished)})
			}
			a.notePublished(t.Name(), res.AlsoPublished)
			if res.Rows == 0 {
				a.printf("No rows of %s match; nothing committed (version %d)\n", t.Name(), res.Version)
				return nil
			}
			a.printf("Deleted %s from %s: version %d, %s\n", plural(res.Rows, "row"), t.Name(), res.Version, seconds(elapsed))
			return nil
		},
	}
	cmd.Flags().StringVarP(&where, "where", "w", "", "SQL WHERE expression selecting the rows to delete (required)")
	return cmd
}
