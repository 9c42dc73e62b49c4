package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
)

const defaultDemoData = "testdata/flights-3m.parquet"

// demoQueries are the demo's filters (the flights table: date timestamp[us], delay int64,
// distance int64, origin, destination).
const (
	demoOrigin      = "SFO"
	demoDelayWhere  = "delay > 60 AND date >= '2001-01-01' AND date < '2001-04-01'"
	demoDeleteWhere = "origin = 'ORD'"
)

func (a *app) demoCommand() *cobra.Command {
	var data, table string
	var fresh bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Import 3 million flights and tour queries, indexes, deletes, versions and time travel",
		Long: `Run Shale end to end on real data: 3,000,000 U.S. domestic flights (Bureau of
Transportation Statistics on-time records, as packaged by vega-datasets; see
testdata/README.md).

The demo uses the embedded etcd and the local store under the state directory (or
--store / --etcd), imports the Parquet file into the table "flights" with a progress
bar, then runs and times: flights from one origin, long delays in a date range, the
top 10 routes, two indexes (a btree on date, which a one-day range does not need as the
file is sorted by date, and one on delay, which a point lookup does: the requests, bytes
and time with and without it), a delete with counts before and after, the version list,
and a time-travel query at the version before the delete that still sees the deleted
rows.

Running it again is safe: an existing demo table is overwritten in a new version (its
history is kept, so the version list grows), or, with --fresh, dropped first (see
shale drop: its versions and files are deleted) so the demo starts from an empty table,
a new incarnation whose version numbers go on from the dropped table's.

--data defaults to testdata/flights-3m.parquet, looked up in the working directory and
then in each parent directory (so it works anywhere inside the repository).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTableName(table); err != nil {
				return err
			}
			path, err := findDemoData(data)
			if err != nil {
				return err
			}
			return a.demo(cmd.Context(), path, table, fresh)
		},
	}
	cmd.Flags().StringVar(&data, "data", defaultDemoData, "the flights Parquet file")
	cmd.Flags().StringVar(&table, "table", "flights", "the demo table")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "drop the demo table first and start from an empty table")
	return cmd
}

// findDemoData resolves a relative path against the working directory and then its
// parents.
func findDemoData(p string) (string, error) {
	if filepath.IsAbs(p) {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("demo data: %w", err)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		cand := filepath.Join(dir, p)
		if _, err := os.Stat(cand); err == nil {
			return cand, nil
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return "", fmt.Errorf("demo data %s not found in %s or its parents (pass --data)", p, wd)
}

// step times one part of the demo.
type step struct {
	a     *app
	start time.Time
}

// section prints a numbered heading (and the WHERE expression the step uses, if any) and
// starts its clock.
func (a *app) section(n int, title, where string) *step {
	head := fmt.Sprintf("── %d. %s ", n, title)
	a.printf("\n%s%s\n", head, strings.Repeat("─", max(3, 78-len([]rune(head)))))
	if where != "" {
		a.printf("   WHERE %s\n\n", where)
	}
	return &step{a: a, start: time.Now()}
}

func (s *step) done(format string, args ...any) {
	s.a.printf("   %s  [%s]\n", fmt.Sprintf(format, args...), seconds(time.Since(s.start)))
}

func (a *app) demo(ctx context.Context, path, table string, fresh bool) error {
	total := time.Now()
	a.printf("Shale demo: %s (U.S. BTS on-time flight records, via vega-datasets)\n", filepath.Base(path))
	db, err := a.open(ctx)
	if err != nil {
		return err
	}
	a.printf("store %s, etcd %s (connected in %s)\n", db.Store().URL(), strings.Join(a.coord.Endpoints(), ","), seconds(time.Since(total)))

	// 0. Import.
	st := a.section(0, "Import", "")
	exists := true
	if _, err := db.OpenTable(ctx, table); errors.Is(err, manifest.ErrTableNotFound) {
		exists = false
	} else if err != nil && !fresh {
		return fmt.Errorf("%w (run `shale demo --fresh` to drop the demo table and start over)", err)
	}
	if fresh && exists {
		n, err := db.DropTable(ctx, table)
		if err != nil {
			return err
		}
		a.printf("   --fresh: dropped table %s (%s)\n", table, plural(n, "object"))
		exists = false
	}
	if exists {
		a.printf("   table %s exists: overwriting it in a new version (history kept; --fresh starts over)\n", table)
	}
	// Every demo run imports anew (an import's default key would make a rerun a no-op).
	key := "demo:" + manifest.NewTransactionID()
	res, err := a.importFile(ctx, path, table, importOptions{format: formatParquet, overwrite: exists, idempotencyKey: key})
	if err != nil {
		return err
	}
	st.done("%s into %s, version %d, %s rows/s", plural(res.Rows, "row"), table, res.Version, thousands(int64(res.RowsPerS)))
	t, err := db.OpenTable(ctx, table)
	if err != nil {
		return err
	}
	a.printf("   schema: %s\n", schemaText(t.Schema()))

	// 1. One origin.
	where1 := fmt.Sprintf("origin = '%s'", demoOrigin)
	st = a.section(1, "Flights from "+demoOrigin, where1)
	n1, err := t.Count(ctx, where1)
	if err != nil {
		return err
	}
	if err := a.demoRows(ctx, t, where1, 5); err != nil {
		return err
	}
	st.done("%s of %s flights leave from %s", thousands(n1), thousands(t.Manifest().LiveRows()), demoOrigin)

	// 2. Delays in a date range.
	st = a.section(2, "Delayed over an hour in Q1 2001", demoDelayWhere)
	n2, err := t.Count(ctx, demoDelayWhere)
	if err != nil {
		return err
	}
	if err := a.demoRows(ctx, t, demoDelayWhere, 5); err != nil {
		return err
	}
	st.done("%s matched", plural(n2, "flight"))

	// 3. Top routes.
	st = a.section(3, "Top 10 routes by number of flights", "")
	routes, scanned, err := topRoutes(ctx, t, 10)
	if err != nil {
		return err
	}
	grid := [][]string{{"#", "ROUTE", "FLIGHTS"}}
	for i, r := range routes {
		grid = append(grid, []string{fmt.Sprint(i + 1), r.origin + " → " + r.destination, thousands(r.flights)})
	}
	a.printGridIndent(grid, map[int]bool{0: true, 2: true})
	st.done("aggregated %s (origin, destination) in Go", plural(scanned, "row"))

	// 4. Indexes.
	st = a.section(4, "Indexes: a btree on date, then one on delay", "")
	if err := a.demoIndexes(ctx, t); err != nil {
		return err
	}
	st.done("%s, version %d", indexesNoun(len(t.Indexes())), t.Version())

	// 5. Delete.
	st = a.section(5, "Delete the flights from Chicago O'Hare", demoDeleteWhere)
	beforeVersion := t.Version()
	beforeAll := t.Manifest().LiveRows()
	beforeMatch, err := t.Count(ctx, demoDeleteWhere)
	if err != nil {
		return err
	}
	a.printf("   before: %s, %s matching (version %d)\n", plural(beforeAll, "row"), thousands(beforeMatch), beforeVersion)
	dres, err := t.Delete(ctx, demoDeleteWhere)
	if err != nil {
		return err
	}
	afterMatch, err := t.Count(ctx, demoDeleteWhere)
	if err != nil {
		return err
	}
	a.printf("   after:  %s, %s matching (version %d)\n", plural(t.Manifest().LiveRows(), "row"), thousands(afterMatch), t.Version())
	st.done("deleted %s with deletion vectors in version %d", plural(dres.Rows, "row"), dres.Version)

	// 6. Versions.
	st = a.section(6, "Versions of "+table, "")
	vs, err := t.Versions(ctx)
	if err != nil {
		return err
	}
	a.printVersionsIndent(vs)
	st.done("%s", plural(len(vs), "version"))

	// 7. Time travel.
	st = a.section(7, fmt.Sprintf("Time travel to version %d, before the delete", beforeVersion), demoDeleteWhere)
	old, err := t.Checkout(ctx, beforeVersion)
	if err != nil {
		return err
	}
	nOld, err := old.Count(ctx, demoDeleteWhere)
	if err != nil {
		return err
	}
	a.printf("   version %d: %s where %s (now: %s)\n", beforeVersion, plural(nOld, "row"), demoDeleteWhere, thousands(afterMatch))
	if err := a.demoRows(ctx, old, demoDeleteWhere, 3); err != nil {
		return err
	}
	st.done("the deleted rows are still readable at version %d", beforeVersion)
	if nOld != beforeMatch {
		return fmt.Errorf("time travel: version %d shows %d rows where %s, expected %d", beforeVersion, nOld, demoDeleteWhere, beforeMatch)
	}

	a.printf("\nDone in %s. Try, with the command built (go build -o shale ./cmd/shale; the README's \"Using it\" has more):\n", seconds(time.Since(total)))
	a.printf("  ./shale query %s --where \"origin = 'JFK' AND delay > 120\" --limit 10\n", table)
	a.printf("  ./shale query %s --where \"%s\" --explain\n", table, demoPointWhere)
	a.printf("  ./shale index list %s\n", table)
	a.printf("  ./shale query %s --version %d --where \"%s\" --limit 5\n", table, beforeVersion, demoDeleteWhere)
	a.printf("  ./shale inspect %s\n  ./shale versions %s\n", table, table)
	return nil
}

// demoRows prints the first n rows matching where, indented.
func (a *app) demoRows(ctx context.Context, t *engine.Table, where string, n int64) error {
	sc, err := t.Scan(ctx, engine.ScanOptions{Filter: where, Limit: n})
	if err != nil {
		return err
	}
	defer sc.Release()
	var sb strings.Builder
	w, _ := newRowWriter(outTable, &sb, sc.Schema())
	for sc.Next() {
		if err := w.Write(sc.RecordBatch()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	w.Close()
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		a.printf("   %s\n", line)
	}
	return nil
}

type route struct {
	origin, destination string
	flights             int64
}

// topRoutes counts flights per (origin, destination) over a scan of those two columns
// and returns the n most frequent (ties by name), plus the rows scanned.
func topRoutes(ctx context.Context, t *engine.Table, n int) ([]route, int64, error) {
	sc, err := t.Scan(ctx, engine.ScanOptions{Columns: []string{"origin", "destination"}})
	if err != nil {
		return nil, 0, err
	}
	defer sc.Release()
	// Airports get small ids (one short-string map lookup per value); the pairs are
	// counted in a dense matrix.
	ids := map[string]int{}
	var airports []string
	id := func(s string) int {
		if i, ok := ids[s]; ok {
			return i
		}
		s = strings.Clone(s) // s points into the batch's buffer
		ids[s] = len(airports)
		airports = append(airports, s)
		return len(airports) - 1
	}
	var counts [][]int64 // counts[origin][destination]
	var rows int64
	for sc.Next() {
		rec := sc.RecordBatch()
		o, err := stringColumn(rec.Column(0))
		if err != nil {
			return nil, 0, err
		}
		d, err := stringColumn(rec.Column(1))
		if err != nil {
			return nil, 0, err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			oi, di := id(o(i)), id(d(i))
			for len(counts) <= oi {
				counts = append(counts, nil)
			}
			if len(counts[oi]) <= di {
				counts[oi] = append(counts[oi], make([]int64, di+1-len(counts[oi]))...)
			}
			counts[oi][di]++
		}
		rows += rec.NumRows()
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	var out []route
	for oi, row := range counts {
		for di, c := range row {
			if c > 0 {
				out = append(out, route{airports[oi], airports[di], c})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].flights != out[j].flights {
			return out[i].flights > out[j].flights
		}
		if out[i].origin != out[j].origin {
			return out[i].origin < out[j].origin
		}
		return out[i].destination < out[j].destination
	})
	return out[:min(n, len(out))], rows, nil
}

// stringColumn returns an accessor for a string-like column (nulls read as "").
func stringColumn(arr arrow.Array) (func(int) string, error) {
	switch a := arr.(type) {
	case *array.String:
		return a.Value, nil
	case *array.LargeString:
		return a.Value, nil
	case *array.StringView:
		return a.Value, nil
	}
	return nil, fmt.Errorf("column of type %s is not a string column", arr.DataType())
}

func schemaText(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + " " + f.Type.String()
	}
	return strings.Join(parts, ", ")
}

func (a *app) printGridIndent(rows [][]string, right map[int]bool) {
	var sb strings.Builder
	sub := &app{stdout: &sb}
	sub.printGrid(rows, right)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		a.printf("   %s\n", line)
	}
}

func (a *app) printVersionsIndent(vs []engine.VersionInfo) {
	var sb strings.Builder
	sub := &app{stdout: &sb}
	sub.printVersions(vs)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		a.printf("   %s\n", line)
	}
}
