package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) updateCommand() *cobra.Command {
	var (
		where string
		sets  []string
	)
	cmd := &cobra.Command{
		Use:   "update TABLE --set COL=EXPR [--set …] --where EXPR",
		Short: "Set columns of the rows matching a WHERE expression",
		Long: `Rewrites the matching rows with new values in one new version: the updated rows go to
new fragments and the old copies are marked in deletion vectors. Each --set is
COLUMN=EXPRESSION, a SQL value expression over the row as it was before the update
(literals, columns, + - * / DIV %, CASE, COALESCE). Updating nothing commits nothing.

` + whereHelp,
		Example: `  shale update flights --set "delay=0" --where "delay < 0"
  shale update flights --set "distance=distance*2" --set "origin='SFO'" --where "origin = 'OAK'"`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if where == "" {
				return usagef("update needs --where (use --where true to update every row)")
			}
			if len(sets) == 0 {
				return usagef("update needs at least one --set COLUMN=EXPRESSION")
			}
			set := map[string]string{}
			for _, s := range sets {
				col, expr, ok := strings.Cut(s, "=")
				col = strings.TrimSpace(col)
				if !ok || col == "" || strings.TrimSpace(expr) == "" {
					return usagef("--set %q: want COLUMN=EXPRESSION", s)
				}
				if _, dup := set[col]; dup {
					return usagef("--set names column %q twice", col)
				}
				set[col] = expr
			}
			start := time.Now()
			t, err := a.openTable(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := t.Update(cmd.Context(), set, where)
			if err != nil {
				return droppedWhile(err, t.Name(), "update", "no row was updated in any table")
			}
			elapsed := time.Since(start)
			if a.jsonOut {
				return a.printJSON(map[string]any{"table": t.Name(), "updated": res.Rows, "version": res.Version, "elapsed_ms": elapsed.Milliseconds(),
					"also_published": orEmpty(res.AlsoPublished)})
			}
			a.notePublished(t.Name(), res.AlsoPublished)
			if res.Rows == 0 {
				a.printf("No rows of %s match; nothing committed (version %d)\n", t.Name(), res.Version)
				return nil
			}
			a.printf("Updated %s of %s: version %d, %s\n", plural(res.Rows, "row"), t.Name(), res.Version, seconds(elapsed))
			return nil
		},
	}
	cmd.Flags().StringVarP(&where, "where", "w", "", "SQL WHERE expression selecting the rows (required)")
	cmd.Flags().StringArrayVarP(&sets, "set", "s", nil, "COLUMN=EXPRESSION (repeatable)")
	return cmd
}
