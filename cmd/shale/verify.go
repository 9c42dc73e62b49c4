package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/verify"
)

func (a *app) verifyCommand() *cobra.Command {
	var opts verify.Options
	cmd := &cobra.Command{
		Use:   "verify [TABLE]",
		Short: "Read every object a table's published version references and check it",
		Long: `Checks one table (or every table in the store): the published pointer in etcd against
the manifest it names (version, key, checksum); HEAD not below the published version; the
manifest chain 1..HEAD (every manifest present and decoding, each transaction record
present); and every data file and deletion vector of the published version, read in full
(every CRC32C, the row counts against the manifest, the deletion vector's cardinality and
row range), plus the index entries. --all-versions reads the files of every version.
WAL shards: every shard manifest version decodes and none is missing, each shard's merged
watermark is at most its sealed generation with the generations above it contiguous,
those generations' files are read in full, and every log entry above the replay
position decodes.

Each fault is printed naming the object key and the version. The exit status is 1 if
there is any fault, 0 if none. Notes (drift, aborted multi-table group versions, index
coverage of removed fragments) are not faults.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s takes at most one TABLE (got %d arguments)", cmd.Name(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 1 {
				if err := checkTableName(args[0]); err != nil {
					return err
				}
			}
			db, err := a.open(ctx)
			if err != nil {
				return err
			}
			var rep *verify.Report
			if len(args) == 1 {
				rep, err = verify.Table(ctx, db.Store(), db.Catalog(), args[0], opts)
			} else {
				rep, err = verify.All(ctx, db.Store(), db.Catalog(), opts)
			}
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := a.printJSON(verifyJSON(rep)); err != nil {
					return err
				}
				return rep.Err()
			}
			a.printVerify(rep)
			return rep.Err()
		},
	}
	cmd.Flags().BoolVar(&opts.AllVersions, "all-versions", false, "read the data files and deletion vectors of every version, not only the published one")
	cmd.Flags().BoolVar(&opts.AllowGaps, "allow-gaps", false, "report versions missing from the manifest chain as notes, not faults (after expiry)")
	return cmd
}

// verifyJSON is the report with each fault's error as text.
func verifyJSON(rep *verify.Report) map[string]any {
	type fault struct {
		verify.Fault
		Error string `json:"error,omitempty"`
	}
	faults := []fault{}
	for _, f := range rep.Faults {
		j := fault{Fault: f}
		if f.Err != nil {
			j.Error = f.Err.Error()
		}
		faults = append(faults, j)
	}
	tables := rep.Tables
	if tables == nil {
		tables = []verify.TableSummary{}
	}
	return map[string]any{"ok": rep.OK(), "tables": tables, "faults": faults, "notes": rep.Notes}
}

func (a *app) printVerify(rep *verify.Report) {
	if len(rep.Tables) == 0 {
		a.printf("no tables\n")
	}
	for _, t := range rep.Tables {
		pub := "none"
		if t.Published > 0 {
			pub = fmt.Sprint(t.Published)
		}
		deep := make([]string, len(t.Deep))
		for i, v := range t.Deep {
			deep[i] = fmt.Sprint(v)
		}
		read := "no version read"
		if len(deep) > 0 {
			read = fmt.Sprintf("read %s %s: %s, %s, %s", pluralWord(len(deep), "version"), strings.Join(deep, ","),
				plural(t.DataFiles, "data file"), plural(t.Deletions, "deletion vector"), humanBytes(t.Bytes))
		}
		a.printf("%s: HEAD %d, published %s, %s; %s\n", t.Table, t.Head, pub, plural(t.Versions, "manifest"), read)
		if t.WALShards > 0 {
			a.printf("%s: WAL: %s, %s read, %s decoded (%s)\n", t.Table, plural(t.WALShards, "shard"),
				plural(t.WALGenerations, "unmerged generation"), logEntries(t.WALEntries), plural(t.WALEntryRows, "row"))
		}
	}
	for _, n := range rep.Notes {
		a.printf("note: %s\n", n)
	}
	for _, f := range rep.Faults {
		a.printf("FAULT: %s\n", f)
	}
	if rep.OK() {
		a.printf("verified %s: no faults\n", plural(len(rep.Tables), "table"))
	} else {
		a.printf("verified %s: %s\n", plural(len(rep.Tables), "table"), plural(len(rep.Faults), "fault"))
	}
}
