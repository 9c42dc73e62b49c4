package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Compare each table's HEAD with its published version",
		Long: `For every table in the store: HEAD (the highest committed version), the published
version readers are directed to (kept in etcd), and the drift between them. Drift means
a commit in flight or a publish that did not finish; HEAD below published is corruption
and makes the command fail after printing the rest.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			sts, serr := db.Status(cmd.Context())
			if a.jsonOut {
				type row struct {
					Table     string `json:"table"`
					Head      uint64 `json:"head"`
					Published uint64 `json:"published"`
					Drift     uint64 `json:"drift"`
				}
				out := []row{}
				for _, s := range sts {
					out = append(out, row{s.Table, s.Head, s.Published, s.Drift})
				}
				if err := a.printJSON(map[string]any{"store": db.Store().URL(), "etcd": a.coord.Endpoints(), "tables": out}); err != nil {
					return err
				}
				return serr
			}
			a.printf("store: %s\netcd:  %v\n\n", db.Store().URL(), a.coord.Endpoints())
			if len(sts) == 0 {
				a.printf("no tables\n")
				return serr
			}
			rows := [][]string{{"TABLE", "HEAD", "PUBLISHED", "DRIFT", "STATE"}}
			for _, s := range sts {
				state := "in sync"
				switch {
				case s.Published > s.Head:
					state = "CORRUPT: HEAD below published"
				case s.Published == 0:
					state = "never published"
				case s.Drift > 0:
					state = fmt.Sprintf("%d unpublished version(s)", s.Drift)
				}
				rows = append(rows, []string{s.Table, fmt.Sprint(s.Head), fmt.Sprint(s.Published), fmt.Sprint(s.Drift), state})
			}
			a.printGrid(rows, map[int]bool{1: true, 2: true, 3: true})
			return serr
		},
	}
}
