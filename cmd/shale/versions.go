package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
)

// versionJSON is one version in JSON output.
type versionJSON struct {
	Version     uint64    `json:"version"`
	Operation   string    `json:"operation"`
	Transaction string    `json:"transaction"`
	ReadVersion uint64    `json:"read_version"`
	Time        time.Time `json:"time"`
	Rows        int64     `json:"rows"`
	Fragments   int       `json:"fragments"`
	Published   bool      `json:"published"`
	// Group is the multi-table transaction of the version ("" = none); Aborted says it
	// aborted, so the version counts as empty. ReadsAs is the version whose content
	// reading this one gives: itself, or for an aborted one the nearest version below it
	// that counts (0: that version expired).
	Group   string `json:"group,omitempty"`
	Aborted bool   `json:"aborted"`
	ReadsAs uint64 `json:"reads_as"`
}

// versionsJSON is the --json output of shale versions.
type versionsJSON struct {
	Table    string        `json:"table"`
	Versions []versionJSON `json:"versions"`
}

func (a *app) versionsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "versions TABLE",
		Short: "List a table's versions",
		Long: `List every version of a table still in the store, oldest first: the operation
that made it, when, the live rows and fragments it holds, and whether it is published
(at or below the version readers are directed to). A version prepared by a multi-table
transaction that aborted is shown as aborted: it counts as empty, reads as the version
below it, and its rows and fragments are that version's.`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := a.openTable(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			vs, err := t.Versions(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				out := make([]versionJSON, len(vs))
				for i, v := range vs {
					out[i] = versionJSON{v.Version, string(v.Operation), v.Transaction, v.ReadVersion, v.Time, v.Rows, v.Fragments, v.Published,
						v.Group, v.Aborted, v.ContentVersion}
				}
				return a.printJSON(versionsJSON{Table: t.Name(), Versions: out})
			}
			a.printVersions(vs)
			return nil
		},
	}
}

func (a *app) printVersions(vs []engine.VersionInfo) {
	rows := [][]string{{"VERSION", "OPERATION", "TIME (UTC)", "ROWS", "FRAGMENTS", "PUBLISHED", "TRANSACTION"}}
	for _, v := range vs {
		pub := "yes"
		switch {
		case v.Aborted && v.ContentVersion != 0:
			pub = fmt.Sprintf("aborted (reads as v%d)", v.ContentVersion)
		case v.Aborted:
			pub = "aborted"
		case !v.Published:
			pub = "no"
		}
		rows = append(rows, []string{fmt.Sprint(v.Version), string(v.Operation), v.Time.Format("2006-01-02 15:04:05"),
			thousands(v.Rows), thousands(int64(v.Fragments)), pub, v.Transaction})
	}
	a.printGrid(rows, map[int]bool{0: true, 3: true, 4: true})
}

// printGrid prints rows (the first is the header) as aligned columns; right holds the
// indexes of right-aligned columns.
func (a *app) printGrid(rows [][]string, right map[int]bool) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, s := range r {
			widths[i] = max(widths[i], len([]rune(s)))
		}
	}
	for ri, r := range rows {
		line := ""
		for i, s := range r {
			if i > 0 {
				line += "  "
			}
			pad := widths[i] - len([]rune(s))
			switch {
			case right[i] && ri > 0:
				line += spaces(pad) + s
			case i < len(r)-1:
				line += s + spaces(pad)
			default:
				line += s
			}
		}
		a.printf("%s\n", line)
	}
}

func spaces(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("%*s", n, "")
}
