package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/manifest"
)

const indexLong = `Scalar indexes make filtered queries read less. Two kinds:

  btree    one column: sorted (value, row address) pages of 4,096 entries and a small
           lookup of each page's min and max. A condition on the column (=, <, <=, >,
           >=, BETWEEN, IN, IS [NOT] NULL, and AND/OR of them) reads the lookup and only
           the pages that can match, then only the record batches holding those rows.
           It pays where statistics cannot prune and the matching rows sit in few of
           the record batches (65,536 rows each) a scan reads whole: a rare value of a
           column the data is not sorted by.
  zonemap  one or more columns: min, max and null count per zone of 8,192 rows; a scan
           skips the record batches none of whose zones can match.

An index covers the fragments it was built from. Every query, count, delete and update
uses the indexes for the fragments they cover and scans the others, so results never
depend on indexes: an index is at worst incomplete. Rows appended since a build are
scanned until 'shale index update' covers them; compaction's new fragments too (zone maps
are rebuilt by compaction itself). 'shale query --explain' shows which index a query
used, or why not.

A build reads the indexed columns of a pinned version without blocking writers and
commits one new version; appends and deletes committed meanwhile are fine, but a
compaction that rewrote a fragment it read (or a same-name index committed meanwhile)
makes it stale: run it again.`

func (a *app) indexCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Create, list, update and drop a table's scalar indexes (btree, zonemap)",
		Long:  indexLong,
		Example: `  shale index create flights --column date
  shale index list flights
  shale query flights --where "date >= '2001-03-15' AND date < '2001-03-16'" --explain
  shale index drop flights date_idx`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown index command %q (want create, list, update or drop)", args[0])
			}
			return usagef("index needs a command: create, list, update or drop")
		},
	}
	cmd.AddCommand(a.indexCreateCommand(), a.indexListCommand(), a.indexUpdateCommand(), a.indexDropCommand())
	return cmd
}

func (a *app) indexCreateCommand() *cobra.Command {
	var (
		columns    []string
		kind, name string
		replace    bool
	)
	cmd := &cobra.Command{
		Use:   "create TABLE --column C [--kind btree|zonemap] [--name N]",
		Short: "Build an index over every fragment of a table, with a progress bar",
		Long: `Build an index over every live fragment of the table's newest version and commit it
in one new version. A btree indexes one column; a zonemap one or more (--column a
--column b, or --column a,b), in one pass. Indexable types: integers, floats, strings,
binaries, booleans, dates and timestamps.

The name defaults to <column>_idx for a btree and <columns>_zonemap for a zone map. A
name the table already has is refused unless --replace, which swaps the old index for
the new one in the same commit. Progress goes to stderr: a bar on a terminal, else a
line every 2 seconds. Interrupted (Ctrl-C), nothing is committed; the objects written so
far are deleted by 'shale gc'.`,
		Example: `  shale index create flights --column date
  shale index create flights --column origin --name by_origin
  shale index create flights --kind zonemap --column delay,distance`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := indexSpecFromFlags(kind, name, columns)
			if err != nil {
				return err
			}
			spec.Replace = replace
			return a.createIndex(cmd.Context(), args[0], spec)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&columns, "column", "c", nil, "column to index (a zonemap takes several: repeat the flag or separate with commas)")
	f.StringVarP(&kind, "kind", "k", index.KindBTree, "index kind: btree or zonemap")
	f.StringVarP(&name, "name", "n", "", "index name (default <column>_idx, or <columns>_zonemap)")
	f.BoolVar(&replace, "replace", false, "replace an index of the same name in the same commit")
	_ = cmd.MarkFlagRequired("column")
	return cmd
}

// indexSpecFromFlags checks the flags of index create before any I/O: an unknown kind, a
// btree of several columns, an empty column or a bad name are usage errors. (Whether the
// columns exist and can be indexed is the table's to say.)
func indexSpecFromFlags(kind, name string, columns []string) (engine.IndexSpec, error) {
	spec := engine.IndexSpec{Kind: strings.ToLower(strings.TrimSpace(kind)), Name: name}
	switch spec.Kind {
	case index.KindBTree, index.KindZoneMap:
	default:
		return spec, usagef("unknown --kind %q (want btree or zonemap)", kind)
	}
	for _, c := range columns {
		c = strings.TrimSpace(c)
		if c == "" {
			return spec, usagef("--column: empty column name")
		}
		spec.Columns = append(spec.Columns, c)
	}
	if spec.Kind == index.KindBTree && len(spec.Columns) != 1 {
		return spec, usagef("a btree indexes one column, got %d (%s); a zonemap covers several", len(spec.Columns), strings.Join(spec.Columns, ", "))
	}
	if name != "" {
		if err := manifest.ValidateTableName(name); err != nil {
			why := strings.TrimPrefix(err.Error(), manifest.ErrInvalidTableName.Error()+" ")
			return spec, usagef("--name: invalid index name %s", why)
		}
	}
	return spec, nil
}

// indexJSON is the --json object of index create and index update.
type indexJSON struct {
	Table        string           `json:"table"`
	Index        engine.IndexInfo `json:"index"`
	Version      uint64           `json:"version"`
	Committed    bool             `json:"committed"`
	Replaced     bool             `json:"replaced,omitempty"`
	Merged       bool             `json:"merged,omitempty"`
	RowsIndexed  int64            `json:"rows_indexed"`
	BytesWritten int64            `json:"bytes_written"`
	ElapsedMS    int64            `json:"elapsed_ms"`
	RowsPerS     float64          `json:"rows_per_second"`
}

func (a *app) createIndex(ctx context.Context, table string, spec engine.IndexSpec) error {
	start := time.Now()
	t, err := a.openTable(ctx, table)
	if err != nil {
		return err
	}
	replaced := spec.Replace && hasIndex(t, spec.Name)
	var finish func()
	spec.Progress, finish = a.indexProgress(fmt.Sprintf("indexing %s (%s)", strings.Join(spec.Columns, ", "), spec.Kind), spec.Kind)
	res, err := t.CreateIndex(ctx, spec)
	finish()
	if err != nil {
		return a.indexBuildError(ctx, err, t, "index create", spec.Name)
	}
	return a.reportIndex(t, res, start, true, replaced)
}

// hasIndex reports whether the handle's version has an index called name.
func hasIndex(t *engine.Table, name string) bool {
	for _, ix := range t.Indexes() {
		if ix.Name == name {
			return true
		}
	}
	return false
}

// indexProgress returns the progress callback of an index build and the function that
// removes its bar when the build is over. The bar appears with the first batch read
// (the engine then says how many rows the build reads).
func (a *app) indexProgress(label, kind string) (func(done, total int64), func()) {
	then := "sorting and storing"
	if kind == index.KindZoneMap {
		then = "storing"
	}
	var p *progress
	said := false
	update := func(done, total int64) {
		if p == nil {
			if total <= 0 {
				return
			}
			p = newProgress(a.stderr, label, total, 0)
		}
		p.update(done, 0)
		if done >= total && !said {
			// Reading is done; a btree then sorts and stores its pages, a zone map stores
			// its one object.
			said = true
			if p.bar != nil {
				p.bar.Describe(label + ": " + then)
			} else {
				fmt.Fprintf(a.stderr, "%s: %s read, %s; %s\n", label, plural(done, "row"), seconds(time.Since(p.start)), then)
			}
		}
	}
	finish := func() {
		if p != nil {
			p.finish()
		}
	}
	return update, finish
}

// indexBuildError words a failed index build: what it means for the table and what to do.
func (a *app) indexBuildError(ctx context.Context, err error, t *engine.Table, cmd, name string) error {
	interrupted := ctx.Err() != nil
	unknown := engine.OutcomeOf(err) == engine.Unknown
	switch {
	case errors.Is(err, engine.ErrTableDropped):
		return droppedWhile(err, t.Name(), cmd, "no index was committed")
	case interrupted && unknown:
		return &interruptedError{fmt.Sprintf("while the index %s was committing: it may or may not be committed ('shale index list %s' shows it if it is; 'shale recover' settles the build): %v", name, t.Name(), err), ctx.Err()}
	case interrupted:
		return &interruptedError{fmt.Sprintf("no index was committed; the objects the build wrote are deleted by 'shale gc' (%v)", err), ctx.Err()}
	case unknown:
		return fmt.Errorf("%w (the index may or may not be committed: 'shale index list %s' shows it if it is; 'shale recover' settles the build)", err, t.Name())
	case errors.Is(err, engine.ErrIndexExists):
		return fmt.Errorf("%w; --replace builds the new one and swaps it in the same commit", err)
	case errors.Is(err, engine.ErrStalePreparation):
		return fmt.Errorf("%w (nothing was committed; run the command again)", err)
	}
	return err
}

func (a *app) reportIndex(t *engine.Table, res engine.IndexResult, start time.Time, committed, replaced bool) error {
	elapsed := time.Since(start)
	ix := res.Index
	if a.jsonOut {
		return a.printJSON(indexJSON{Table: t.Name(), Index: ix, Version: res.Version, Committed: committed, Replaced: replaced, Merged: res.Merged,
			RowsIndexed: res.RowsIndexed, BytesWritten: res.BytesWritten, ElapsedMS: elapsed.Milliseconds(), RowsPerS: perSecond(res.RowsIndexed, elapsed)})
	}
	verb := "Built"
	switch {
	case replaced:
		verb = "Replaced"
	case res.Merged:
		verb = "Rebuilt"
	case !committed:
		a.printf("Index %s of %s already covers every fragment (%s): nothing committed (version %d)\n", ix.Name, t.Name(), plural(ix.Fragments, "fragment"), res.Version)
		return nil
	}
	a.printf("%s index %s (%s on %s) of %s: version %d, %s indexed, %s of %s covered, %s, %s\n",
		verb, ix.Name, ix.Kind, strings.Join(ix.Columns, ", "), t.Name(), res.Version, plural(res.RowsIndexed, "row"),
		thousands(int64(ix.FragmentsCovered)), plural(ix.Fragments, "fragment"), humanBytes(res.BytesWritten), seconds(elapsed))
	return nil
}

func (a *app) indexUpdateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "update TABLE NAME",
		Short: "Index the fragments an index does not cover yet (appended or compacted since)",
		Long: `Index the live fragments of the table's newest version that the index does not cover
(rows appended since it was built, fragments compaction wrote) as a new segment beside
its others, committed in one new version. When that would leave more than ` + fmt.Sprint(engine.MaxIndexSegments) + `
segments, the whole index is rebuilt as one. An index that covers every fragment
commits nothing. 'shale index list' shows the coverage.`,
		Example: `  shale index update flights date_idx`,
		Args:    exactArgs("TABLE", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			start := time.Now()
			t, err := a.openTable(ctx, args[0])
			if err != nil {
				return err
			}
			before := t.Version()
			kind := ""
			for _, ix := range t.Indexes() {
				if ix.Name == args[1] {
					kind = ix.Kind
				}
			}
			progress, finish := a.indexProgress("indexing "+args[1], kind)
			res, err := t.UpdateIndexProgress(ctx, args[1], progress)
			finish()
			if err != nil {
				if errors.Is(err, engine.ErrIndexNotFound) {
					return indexNotFound(err, t)
				}
				return a.indexBuildError(ctx, err, t, "index update", args[1])
			}
			return a.reportIndex(t, res, start, res.Version != before, false)
		},
	}
}

// indexNotFound adds the table's index names to an engine.ErrIndexNotFound.
func indexNotFound(err error, t *engine.Table) error {
	var names []string
	for _, ix := range t.Indexes() {
		names = append(names, ix.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("%w (%s has no indexes)", err, t.Name())
	}
	word := "indexes"
	if len(names) == 1 {
		word = "index"
	}
	return fmt.Errorf("%w (%s has %s %s)", err, t.Name(), word, strings.Join(names, ", "))
}

func (a *app) indexDropCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "drop TABLE NAME",
		Short: "Drop an index in a new version (queries scan again)",
		Long: `Remove the index from the table in one new version: queries scan instead (their results
are the same). Older versions still list it, and its objects stay until 'shale gc'
finds no retained version naming them.`,
		Example: `  shale index drop flights date_idx`,
		Args:    exactArgs("TABLE", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			t, err := a.openTable(ctx, args[0])
			if err != nil {
				return err
			}
			res, err := t.DropIndex(ctx, args[1])
			switch {
			case errors.Is(err, engine.ErrIndexNotFound):
				return indexNotFound(err, t)
			case err != nil:
				return droppedWhile(err, t.Name(), "index drop", "nothing was committed")
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"table": t.Name(), "index": args[1], "version": res.Version, "also_published": orEmpty(res.AlsoPublished)})
			}
			a.notePublished(t.Name(), res.AlsoPublished)
			a.printf("Dropped index %s of %s: version %d (queries scan instead; 'shale gc' deletes its objects once no retained version names them)\n", args[1], t.Name(), res.Version)
			return nil
		},
	}
}

func (a *app) indexListCommand() *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "list TABLE [--version N]",
		Short: "List a table's indexes with their coverage",
		Long: `List the indexes of the table's published version (or --version N): kind, columns,
the fragments and rows each covers of the version's live fragments (the others are
scanned), the newest version a segment was built from, segments and size.`,
		Example: `  shale index list flights
  shale index list flights --json`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v *uint64
			if flagChanged(cmd.Flags(), "version") {
				v = &version
			}
			t, err := a.tableAt(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			ixs := t.Indexes()
			if a.jsonOut {
				return a.printJSON(map[string]any{"table": t.Name(), "version": t.Version(), "indexes": ixs})
			}
			if len(ixs) == 0 {
				a.printf("%s has no indexes at version %d ('shale index create %s --column C' builds one)\n", t.Name(), t.Version(), t.Name())
				return nil
			}
			a.printf("Indexes of %s, version %d\n", t.Name(), t.Version())
			a.printIndexes(ixs)
			for _, ix := range ixs {
				if left := ix.Fragments - ix.FragmentsCovered; left > 0 {
					them := "them"
					if left == 1 {
						them = "it"
					}
					a.printf("note: %s does not cover %s (%s, scanned): 'shale index update %s %s' indexes %s\n",
						ix.Name, plural(left, "fragment"), plural(ix.Rows-ix.RowsCovered, "row"), t.Name(), ix.Name, them)
				}
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "list the indexes of this version instead of the published one")
	return cmd
}

// indexesNoun is "1 index", "2 indexes".
func indexesNoun(n int) string {
	if n == 1 {
		return "1 index"
	}
	return thousands(int64(n)) + " indexes"
}

// printIndexes prints one line per index (index list, inspect).
func (a *app) printIndexes(ixs []engine.IndexInfo) {
	rows := [][]string{{"NAME", "KIND", "COLUMNS", "FRAGMENTS", "ROWS COVERED", "BUILT FROM", "SEGMENTS", "SIZE"}}
	for _, ix := range ixs {
		rows = append(rows, []string{ix.Name, ix.Kind, strings.Join(ix.Columns, ", "),
			fmt.Sprintf("%s of %s", thousands(int64(ix.FragmentsCovered)), thousands(int64(ix.Fragments))),
			fmt.Sprintf("%s of %s", thousands(ix.RowsCovered), thousands(ix.Rows)),
			fmt.Sprintf("version %d", ix.BuiltFrom), fmt.Sprint(ix.Segments), humanBytes(ix.Bytes)})
	}
	a.printGrid(rows, map[int]bool{6: true, 7: true})
}
