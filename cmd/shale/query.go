package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

func (a *app) queryCommand() *cobra.Command {
	var (
		where, columns, format  string
		limit                   int64
		version                 uint64
		count, explain, noIndex bool
	)
	cmd := &cobra.Command{
		Use:   "query TABLE",
		Short: "Print the rows of a table that match a WHERE expression",
		Long: `Print rows of a table at its published version (or --version N). A version
prepared by a multi-table transaction that aborted counts as empty: it reads as the
version below it, and a note on stderr says so.

--count prints the number of matching rows instead of the rows.

` + explainHelp + `

Formats: table (aligned text, the default), csv (with a header), json (JSON Lines, one
object per row; the default with --json), arrow (an Arrow IPC stream, for pipes).

` + whereHelp,
		Example: `  shale query flights --where "origin = 'SFO' AND delay > 60" --limit 10
  shale query flights --columns origin,destination --format csv > routes.csv
  shale query flights --version 2 --where "origin = 'LAX'" --format arrow | other-tool
  shale query flights --count --where "origin = 'SFO' || origin = 'OAK'"
  shale query flights --where "date >= '2001-03-15' AND date < '2001-03-16'" --explain`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v *uint64
			if flagChanged(cmd.Flags(), "version") {
				v = &version
			}
			cols, err := parseColumns(columns)
			if err != nil {
				return err
			}
			if explain {
				if flagChanged(cmd.Flags(), "format") {
					return usagef("--explain prints the plan, not rows; it takes no --format (--json prints the plan as JSON)")
				}
				if limit < 0 {
					return usagef("--limit must be ≥ 0")
				}
				return a.explain(cmd.Context(), args[0], v, engine.ScanOptions{Columns: cols, Filter: where, Limit: limit, NoIndex: noIndex}, count)
			}
			if count {
				for _, f := range []string{"columns", "limit", "format"} {
					if flagChanged(cmd.Flags(), f) {
						return usagef("--count prints one number; it takes no --%s", f)
					}
				}
				return a.count(cmd.Context(), args[0], v, where, noIndex)
			}
			if !flagChanged(cmd.Flags(), "format") {
				format = outTable
				if a.jsonOut {
					format = outJSON
				}
			}
			switch format {
			case outTable, outCSV, outJSON, outArrow:
			default:
				return usagef("unknown --format %q (want table, csv, json or arrow)", format)
			}
			if limit < 0 {
				return usagef("--limit must be ≥ 0")
			}
			if format == outArrow && isTerminal(a.stdout) {
				return usagef("--format arrow writes binary Arrow IPC; redirect stdout to a file or a pipe")
			}
			return a.query(cmd.Context(), args[0], v, engine.ScanOptions{Columns: cols, Filter: where, Limit: limit, NoIndex: noIndex}, format)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&where, "where", "w", "", "SQL WHERE expression, MySQL dialect (see below)")
	f.StringVarP(&columns, "columns", "c", "", "columns to print, comma-separated (default: all)")
	f.Int64VarP(&limit, "limit", "n", 0, "print at most N rows (0 = all)")
	f.Uint64Var(&version, "version", 0, "read this version (time travel) instead of the published one")
	f.StringVarP(&format, "format", "f", outTable, "output format: table, csv, json or arrow")
	f.BoolVar(&count, "count", false, "print the number of matching rows (with --where) instead of the rows")
	f.BoolVar(&explain, "explain", false, "run the query and print its plan and cost (indexes used, batches skipped, requests, bytes) instead of its rows")
	f.BoolVar(&noIndex, "no-index", false, "scan without the table's indexes (the same rows; to compare)")
	return cmd
}

// tableAt opens a table at its published version, or at version v when v is not nil.
// A given version is opened directly, so an older version stays readable even when a later
// manifest is damaged.
func (a *app) tableAt(ctx context.Context, name string, v *uint64) (*engine.Table, error) {
	if v == nil {
		return a.openTable(ctx, name)
	}
	if err := checkTableName(name); err != nil {
		return nil, err
	}
	if *v == 0 {
		return nil, usagef("--version 0 does not exist: versions start at 1 (the table's creation)")
	}
	db, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	t, err := db.OpenTableAt(ctx, name, *v)
	if errors.Is(err, manifest.ErrVersionNotFound) {
		return nil, versionNotFound(ctx, db, name, *v, err)
	}
	return t, err
}

// versionNotFound words the failure to load version v of a table (err, matching
// manifest.ErrVersionNotFound) for the operator: a missing table is
// manifest.ErrTableNotFound; a version above HEAD names HEAD, and an expired one says so,
// both without the internal manifest key. A manifest missing below HEAD (damage) keeps
// err, which names the key. The result matches err's classes.
func versionNotFound(ctx context.Context, db *engine.DB, name string, v uint64, err error) error {
	head, herr := manifest.Head(ctx, db.Store(), name)
	var oe *manifest.ObjectError
	switch {
	case errors.Is(herr, manifest.ErrTableNotFound):
		return herr
	case errors.Is(err, manifest.ErrVersionExpired) && errors.As(err, &oe) && oe.Version != v:
		// v is a prepared version of an aborted multi-table transaction; the version it
		// reads as expired.
		return fmt.Errorf("table %q version %d belongs to an aborted multi-table transaction and reads as version %d: %w", name, v, oe.Version, oe.Err)
	case errors.Is(err, manifest.ErrVersionExpired) && errors.As(err, &oe):
		return fmt.Errorf("table %q version %d: %w", name, v, oe.Err)
	case herr == nil && v > head:
		return fmt.Errorf("table %q has no version %d (HEAD is %d): %w", name, v, head, manifest.ErrVersionNotFound)
	}
	return err
}

func (a *app) query(ctx context.Context, name string, v *uint64, opts engine.ScanOptions, format string) error {
	start := time.Now()
	t, err := a.tableAt(ctx, name, v)
	if err != nil {
		return err
	}
	// Pin the version read, so that a gc in another process keeps its files for as long
	// as the query streams (a lease-backed catalog hold; nothing is written to the store).
	pin, err := t.Pin(ctx)
	if err != nil {
		if errors.Is(err, manifest.ErrVersionNotFound) {
			return versionNotFound(ctx, a.db, name, t.Version(), err)
		}
		return err
	}
	defer pin.Release(ctx)
	a.noteVersion(ctx, t, v != nil)
	sc, err := t.Scan(ctx, opts)
	if err != nil {
		return err
	}
	defer sc.Release()
	w, err := newRowWriter(format, a.stdout, sc.Schema())
	if err != nil {
		return err
	}
	var rows int64
	for sc.Next() {
		rec := sc.RecordBatch()
		rows += rec.NumRows()
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if format == outTable {
		a.printf("(%s, version %d, %s)\n", plural(rows, "row"), t.Version(), seconds(time.Since(start)))
	}
	return nil
}

// noteVersion tells on stderr (so that csv, json and arrow output stay clean) what a
// version read with --version (given) is when readers would not see it: a prepared
// version of an aborted multi-table transaction, or a version above the published one.
func (a *app) noteVersion(ctx context.Context, t *engine.Table, given bool) {
	if c := t.ContentVersion(); c != t.Version() {
		fmt.Fprintf(a.stderr, "note: version %d belongs to an aborted multi-table transaction; it counts as empty and reads as version %d\n", t.Version(), c)
	}
	if !given || a.db == nil || a.db.Catalog() == nil {
		return
	}
	p, _, err := a.db.Catalog().Get(ctx, t.Name())
	switch {
	case errors.Is(err, catalog.ErrNoPointer):
		fmt.Fprintf(a.stderr, "note: %s has no published version: version %d is committed, but readers are not directed to it (see 'shale status' and 'shale repair')\n", t.Name(), t.Version())
	case err == nil && t.Version() > p.Version:
		fmt.Fprintf(a.stderr, "note: version %d is above the published version %d of %s: it is committed, but readers are not directed to it yet (a write still publishing, or one whose publish did not finish: see 'shale status' and 'shale repair')\n",
			t.Version(), p.Version, t.Name())
	}
}

// count prints the number of live rows of a table matching where ("" = all rows, from
// the manifest alone).
func (a *app) count(ctx context.Context, name string, v *uint64, where string, noIndex bool) error {
	start := time.Now()
	t, err := a.tableAt(ctx, name, v)
	if err != nil {
		return err
	}
	pin, err := t.Pin(ctx)
	if err != nil {
		if errors.Is(err, manifest.ErrVersionNotFound) {
			return versionNotFound(ctx, a.db, name, t.Version(), err)
		}
		return err
	}
	defer pin.Release(ctx)
	a.noteVersion(ctx, t, v != nil)
	var n int64
	if noIndex {
		n, err = countNoIndex(ctx, t, where)
	} else {
		n, err = t.Count(ctx, where)
	}
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(map[string]any{"table": t.Name(), "version": t.Version(), "where": where, "count": n,
			"elapsed_ms": time.Since(start).Milliseconds()})
	}
	a.printf("%s %s (version %d, %s)\n", thousands(n), rowNoun(n), t.Version(), seconds(time.Since(start)))
	return nil
}

// countNoIndex is Table.Count without the table's indexes (query --count --no-index):
// a scan of no columns, counting its rows.
func countNoIndex(ctx context.Context, t *engine.Table, where string) (int64, error) {
	if where == "" {
		return t.Count(ctx, "")
	}
	sc, err := t.Scan(ctx, engine.ScanOptions{Columns: []string{}, Filter: where, NoIndex: true})
	if err != nil {
		return 0, err
	}
	defer sc.Release()
	var n int64
	for sc.Next() {
		n += sc.RecordBatch().NumRows()
	}
	return n, sc.Err()
}

// rowNoun is "row" for 1, else "rows".
func rowNoun(n int64) string {
	if n == 1 {
		return "row"
	}
	return "rows"
}
