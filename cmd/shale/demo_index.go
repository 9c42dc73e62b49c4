package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/store"
)

// The demo's index queries: a one-day range on date (the column the file is sorted by)
// and a point lookup on delay (which statistics cannot prune: every record batch spans
// nearly every delay).
const (
	demoDayWhere   = "date >= '2001-03-15' AND date < '2001-03-16'"
	demoPointWhere = "delay = 600"
)

// scanCost is what one scan read and took.
type scanCost struct {
	rows    int64
	plan    engine.ScanPlan
	reqs    store.Requests
	elapsed time.Duration
}

// measureScan runs a scan of t with opts to the end and returns what it cost (the
// requests are the store's, so nothing else may use it meanwhile).
func (a *app) measureScan(ctx context.Context, t *engine.Table, opts engine.ScanOptions) (scanCost, error) {
	before := a.store.Counters().Snapshot()
	start := time.Now()
	sc, err := t.Scan(ctx, opts)
	if err != nil {
		return scanCost{}, err
	}
	defer sc.Release()
	var c scanCost
	for sc.Next() {
		c.rows += sc.RecordBatch().NumRows()
	}
	if err := sc.Err(); err != nil {
		return scanCost{}, err
	}
	c.elapsed, c.plan, c.reqs = time.Since(start), sc.Plan(), a.store.Counters().Snapshot().Sub(before)
	return c, nil
}

// demoBuildIndex builds a BTree on column with the progress bar and says what it built.
func (a *app) demoBuildIndex(ctx context.Context, t *engine.Table, column string) error {
	start := time.Now()
	progress, finish := a.indexProgress("indexing "+column, index.KindBTree)
	res, err := t.CreateIndex(ctx, engine.IndexSpec{Columns: []string{column}, Replace: true, Progress: progress})
	finish()
	if err != nil {
		return err
	}
	a.printf("   shale index create %s --column %s: btree %s, %s, %s, version %d  [%s]\n",
		t.Name(), column, res.Index.Name, plural(res.RowsIndexed, "row"), humanBytes(res.BytesWritten), res.Version, seconds(time.Since(start)))
	return nil
}

// demoIndexes is the demo's index step: a BTree on date, which the one-day range does not
// need (the file is sorted by date, so statistics already leave one record batch), and
// a BTree on delay, which a point lookup does. Each query runs with its index first (a
// cold start: the index lookup is read from the store), then without.
func (a *app) demoIndexes(ctx context.Context, t *engine.Table) error {
	total := totalBatches(t)
	compare := func(where, name string) (with, without scanCost, err error) {
		if with, err = a.measureScan(ctx, t, engine.ScanOptions{Filter: where}); err != nil {
			return
		}
		if without, err = a.measureScan(ctx, t, engine.ScanOptions{Filter: where, NoIndex: true}); err != nil {
			return
		}
		if with.rows != without.rows {
			err = fmt.Errorf("demo: WHERE %s: %d rows with indexes, %d without", where, with.rows, without.rows)
			return
		}
		a.printf("   %s; %s %s\n", plural(with.rows, "row"), name, indexVerdict(with.plan, name))
		a.printf("   with %-12s %s\n", name+":", with.costLine(total))
		a.printf("   without:          %s\n", without.costLine(total))
		return
	}

	if err := a.demoBuildIndex(ctx, t, "date"); err != nil {
		return err
	}
	a.printf("\n   WHERE %s (the file is sorted by date)\n", demoDayWhere)
	if _, _, err := compare(demoDayWhere, "date_idx"); err != nil {
		return err
	}

	a.printf("\n   An index pays where statistics cannot prune: every batch spans nearly every delay.\n")
	if err := a.demoBuildIndex(ctx, t, "delay"); err != nil {
		return err
	}
	a.printf("\n   WHERE %s (flights exactly ten hours late)\n\n", demoPointWhere)
	with, without, err := compare(demoPointWhere, "delay_idx")
	if err != nil {
		return err
	}
	if with.elapsed > 0 && with.plan.BatchesRead < without.plan.BatchesRead {
		a.printf("   the same rows %.0f× faster, with %s instead of %s\n",
			float64(without.elapsed)/float64(with.elapsed), plural(with.reqs.Total(), "request"), thousands(without.reqs.Total()))
	}
	a.printf("\n")
	return a.demoRows(ctx, t, demoPointWhere, 5)
}

// indexVerdict says whether the plan used the index name, and how, or why not.
func indexVerdict(p engine.ScanPlan, name string) string {
	for _, u := range p.Indexes {
		if u.Name == name {
			return indexUseDetail(u)
		}
	}
	return name + " not considered"
}

// totalBatches is the number of record batches of t's data files.
func totalBatches(t *engine.Table) int {
	n := 0
	for _, f := range t.Manifest().Fragments {
		for _, df := range f.Files {
			n += len(df.Batches)
		}
	}
	return n
}

// costLine says what a scan read (of total record batches) and took.
func (c scanCost) costLine(total int) string {
	return fmt.Sprintf("%s of %d batches, %s, %s, %s", thousands(int64(c.plan.BatchesRead)), total,
		plural(c.reqs.Total(), "request"), humanBytes(c.reqs.BytesRead), seconds(c.elapsed))
}
