package benchmarks

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine"
)

// HistoryRows is the size of each small append that builds a history and of each measured
// commit.
const HistoryRows = 10

// HistoryResult holds the open and commit measurements of a table with Versions versions.
type HistoryResult struct {
	Versions      int   // versions when the opens were measured (HEAD = Versions)
	ManifestBytes int64 // size of HEAD's manifest object
	BuildTime     time.Duration
	// Open is DB.OpenTable through the etcd catalog (the published version);
	// OpenNoCatalog is OpenTable on a DB without etcd (HEAD by LIST + GET), for reference.
	Open, OpenNoCatalog *Sample
	// Commit is one Table.AppendRecord of HistoryRows rows on a handle at HEAD (data file,
	// transaction record, manifest, publish). The first commit is at version Versions+1.
	Commit *Sample
	// CommitRequestsVary is set when the commits of this size did not all make the same
	// store requests (Commit.Requests is the first one's).
	CommitRequestsVary bool
}

// historyTable makes table name with n versions: CreateTable plus n-1 appends of rec.
func historyTable(ctx context.Context, db *engine.DB, name string, n int, rec arrow.RecordBatch, log io.Writer) (*engine.Table, error) {
	tbl, err := db.CreateTable(ctx, name, rec.Schema())
	if err != nil {
		return nil, err
	}
	for v := 2; v <= n; v++ {
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			return nil, fmt.Errorf("benchmarks: build history of %s at version %d: %w", name, v, err)
		}
		if v%250 == 0 {
			fmt.Fprintf(log, "  %s: %d/%d versions\n", name, v, n)
		}
	}
	if tbl.Version() != uint64(n) {
		return nil, fmt.Errorf("benchmarks: %s is at version %d after building %d", name, tbl.Version(), n)
	}
	return tbl, nil
}

// runHistory builds one table per history size, then measures opens (alternating sizes
// repetition by repetition) and then commits (likewise).
func runHistory(ctx context.Context, e *env, cfg Config, log io.Writer) ([]HistoryResult, error) {
	small, err := SyntheticFlights(HistoryRows, 2, HistoryRows)
	if err != nil {
		return nil, err
	}
	defer small.Release()
	rec := small.Records[0]

	noCat, err := e.openDB(ctx, func(o *engine.Options) { o.Etcd = nil })
	if err != nil {
		return nil, err
	}
	results := make([]HistoryResult, len(cfg.Versions))
	tables := make([]*engine.Table, len(cfg.Versions))
	for i, n := range cfg.Versions {
		name := fmt.Sprintf("history-%d", n)
		t0 := time.Now()
		tbl, err := historyTable(ctx, e.db, name, n, rec, log)
		if err != nil {
			return nil, err
		}
		tables[i] = tbl
		results[i].Versions = n
		results[i].BuildTime = time.Since(t0)
		info, err := e.store.Head(ctx, tbl.Manifest().Key())
		if err != nil {
			return nil, err
		}
		results[i].ManifestBytes = info.Size
		fmt.Fprintf(log, "  %s built in %v; manifest %d bytes\n", name, results[i].BuildTime.Round(time.Millisecond), info.Size)
	}

	if cfg.has(SuiteOpen) {
		var vs []variant
		for i, n := range cfg.Versions {
			name := tables[i].Name()
			results[i].Open = &Sample{Name: fmt.Sprintf("OpenTable, etcd catalog, %d versions", n), Rows: 1}
			results[i].OpenNoCatalog = &Sample{Name: fmt.Sprintf("OpenTable, no catalog, %d versions", n), Rows: 1}
			vs = append(vs,
				variant{fmt.Sprintf("catalog/versions=%d", n), results[i].Open, openRun(e, e.db, name, uint64(n), results[i].Open)},
				variant{fmt.Sprintf("no-catalog/versions=%d", n), results[i].OpenNoCatalog, openRun(e, noCat, name, uint64(n), results[i].OpenNoCatalog)})
		}
		if err := alternate(ctx, cfg.OpenReps, vs); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "  %d opens per variant done\n", cfg.OpenReps)
	}
	if cfg.has(SuiteCommit) {
		var vs []variant
		for i, n := range cfg.Versions {
			r := &results[i]
			r.Commit = &Sample{Name: fmt.Sprintf("AppendRecord (%d rows), %d versions", HistoryRows, n), Rows: HistoryRows}
			vs = append(vs, variant{fmt.Sprintf("versions=%d", n), r.Commit, commitRun(e, tables[i], rec, r)})
		}
		if err := alternate(ctx, cfg.Reps, logged(vs, log)); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// openRun times db.OpenTable(name) and checks it lands on version want.
func openRun(e *env, db *engine.DB, name string, want uint64, s *Sample) func(context.Context, int) (Took, error) {
	return func(ctx context.Context, rep int) (Took, error) {
		before, kvBefore := e.storeRequests(), e.etcdRequests()
		var t *engine.Table
		d, err := timeStep(func() (err error) {
			t, err = db.OpenTable(ctx, name)
			return err
		})
		if err != nil {
			return Took{}, fmt.Errorf("benchmarks: open %s: %w", name, err)
		}
		if t.Version() != want {
			return Took{}, fmt.Errorf("benchmarks: open %s gave version %d, want %d", name, t.Version(), want)
		}
		if len(s.Times) == 0 {
			s.Requests, s.Etcd = e.storeRequests().Sub(before), subCounts(e.etcdRequests(), kvBefore)
			s.Bytes = s.Requests.BytesRead
		}
		return d, nil
	}
}

// commitRun times one AppendRecord(rec) on tbl and records its requests in r.Commit (the
// first repetition's; later ones set r.CommitRequestsVary when they differ).
func commitRun(e *env, tbl *engine.Table, rec arrow.RecordBatch, r *HistoryResult) func(context.Context, int) (Took, error) {
	return func(ctx context.Context, rep int) (Took, error) {
		before, kvBefore := e.storeRequests(), e.etcdRequests()
		var res engine.CommitResult
		d, err := timeStep(func() (err error) {
			res, err = tbl.AppendRecord(ctx, rec)
			return err
		})
		if err != nil {
			return Took{}, fmt.Errorf("benchmarks: commit on %s: %w", tbl.Name(), err)
		}
		if !res.Published || res.Attempts != 1 || len(res.Rebased) != 0 {
			return Took{}, fmt.Errorf("benchmarks: commit on %s: published %v after %d attempts, rebased over %v (want 1 attempt, no rebase: nothing else writes this table)",
				tbl.Name(), res.Published, res.Attempts, res.Rebased)
		}
		reqs := e.storeRequests().Sub(before)
		if len(r.Commit.Times) == 0 {
			r.Commit.Requests, r.Commit.Etcd = reqs, subCounts(e.etcdRequests(), kvBefore)
			r.Commit.Bytes = reqs.BytesWritten
		} else if !maps.Equal(reqs.ByOp, r.Commit.Requests.ByOp) {
			r.CommitRequestsVary = true
		}
		return d, nil
	}
}
