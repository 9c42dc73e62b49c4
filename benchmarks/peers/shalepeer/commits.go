//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/benchmarks"
	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

// The commit-path operations of the worker (issue 13): a series of small appends to a
// fresh table, a long history built untimed, opening a table, and writer processes.

type smallArgs struct {
	Data           string `json:"data"`            // Parquet file; its first RowsPerCommit rows are appended ("" = synthetic)
	Table          string `json:"table"`           // the table to create
	RowsPerCommit  int64  `json:"rows_per_commit"` // default 100
	Commits        int    `json:"commits"`         // default 100 (appends), 1,000 (history)
	Skip           int    `json:"skip"`            // appends: commits before the timed ones (default 10)
	Procs          int    `json:"procs"`           // writers: processes (default 4)
	CommitsPerProc int    `json:"commits_per_proc"`
}

// smallRecord is the record every small append commits: the first n rows of data.
func (w *worker) smallRecord(ctx context.Context, data string, n int64) (arrow.RecordBatch, error) {
	if n <= 0 {
		n = 100
	}
	var ds *benchmarks.Dataset
	var err error
	if data != "" {
		ds, err = benchmarks.LoadParquet(ctx, data, n, int(n))
	} else {
		ds, err = benchmarks.SyntheticFlights(n, 7, int(n))
	}
	if err != nil {
		return nil, err
	}
	defer ds.Release()
	if len(ds.Records) != 1 || ds.Records[0].NumRows() != n {
		return nil, fmt.Errorf("small record: want one batch of %d rows, got %d batches", n, len(ds.Records))
	}
	rec := ds.Records[0]
	rec.Retain()
	return rec, nil
}

type appendsResult struct {
	timed
	Rows      int64     `json:"rows"` // rows of the table afterwards
	Version   uint64    `json:"version"`
	Commits   int       `json:"commits"` // timed commits
	LatencyS  []float64 `json:"latency_s"`
	MedianS   float64   `json:"median_s"`
	Attempts  int       `json:"attempts"`
	Published bool      `json:"published"`
}

// appends creates args.table and commits args.commits appends of the same small record,
// timing commits skip+1 .. commits: wall_s and cpu_s cover them, from the start of the
// first timed commit to the end of the last; requests and peak RSS too.
func (w *worker) appends(ctx context.Context, a smallArgs) (*appendsResult, error) {
	if a.Table == "" {
		return nil, errors.New("appends: args.table is required")
	}
	if a.Commits <= 0 {
		a.Commits = 100
	}
	if a.Skip < 0 || a.Skip >= a.Commits {
		return nil, fmt.Errorf("appends: skip %d out of range for %d commits", a.Skip, a.Commits)
	}
	rec, err := w.smallRecord(ctx, a.Data, a.RowsPerCommit)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	tbl, err := w.db.CreateTable(ctx, a.Table, rec.Schema())
	if err != nil {
		return nil, err
	}
	for i := 0; i < a.Skip; i++ {
		if _, err := tbl.AppendRecord(ctx, rec); err != nil {
			return nil, err
		}
	}
	res := &appendsResult{Commits: a.Commits - a.Skip}
	err = w.measure(&res.timed, func() error {
		for i := a.Skip; i < a.Commits; i++ {
			t0 := time.Now()
			r, err := tbl.AppendRecord(ctx, rec)
			if err != nil {
				return fmt.Errorf("appends: commit %d: %w", i+1, err)
			}
			res.LatencyS = append(res.LatencyS, time.Since(t0).Seconds())
			res.Attempts += r.Attempts
			res.Published = r.Published
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := slices.Clone(res.LatencyS)
	slices.Sort(s)
	res.MedianS = s[len(s)/2]
	m := tbl.Manifest()
	res.Rows, res.Version = m.LiveRows(), m.Version
	return res, nil
}

type historyResult struct {
	timed
	Rows      int64  `json:"rows"`
	Version   uint64 `json:"version"`
	Fragments int    `json:"fragments"`
	Bytes     int    `json:"manifest_bytes"`
}

// history creates args.table with args.commits appends of the small record (one fragment
// each), so it opens at version commits+1 with commits fragments (timed, for information).
func (w *worker) history(ctx context.Context, a smallArgs) (*historyResult, error) {
	if a.Commits <= 0 {
		a.Commits = 1000
	}
	rec, err := w.smallRecord(ctx, a.Data, a.RowsPerCommit)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	res := &historyResult{}
	var tbl *engine.Table
	err = w.measure(&res.timed, func() error {
		var err error
		if tbl, err = w.db.CreateTable(ctx, a.Table, rec.Schema()); err != nil {
			return err
		}
		for i := 0; i < a.Commits; i++ {
			if _, err := tbl.AppendRecord(ctx, rec); err != nil {
				return fmt.Errorf("history: commit %d: %w", i+1, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m := tbl.Manifest()
	res.Rows, res.Version, res.Fragments = m.LiveRows(), m.Version, len(m.Fragments)
	if b, err := m.Encode(); err == nil {
		res.Bytes = len(b)
	}
	return res, nil
}

type openArgs struct {
	Table string `json:"table"`
	// Cold opens a new engine.DB (untimed) before the timed OpenTable: nothing of the
	// table is cached in it. Warm opens through the worker's long-lived DB.
	Cold bool `json:"cold"`
}

type openResult struct {
	timed
	Rows      int64  `json:"rows"`
	Version   uint64 `json:"version"`
	Fragments int    `json:"fragments"`
}

// open times DB.OpenTable of args.table (one etcd read, and one manifest GET unless the
// DB has the published version's manifest cached).
func (w *worker) open(ctx context.Context, a openArgs) (*openResult, error) {
	db := w.db
	if a.Cold {
		var err error
		if db, err = engine.Open(ctx, w.st, w.opts); err != nil {
			return nil, err
		}
	}
	res := &openResult{}
	var tbl *engine.Table
	err := w.measure(&res.timed, func() error {
		var err error
		tbl, err = db.OpenTable(ctx, a.Table)
		return err
	})
	if err != nil {
		return nil, err
	}
	m := tbl.Manifest()
	res.Rows, res.Version, res.Fragments = m.LiveRows(), m.Version, len(m.Fragments)
	return res, nil
}

// Writer processes: the worker re-executes itself with writerEnv set to a JSON
// writerConfig; main runs runWriterChild instead of the protocol.

const writerEnv = "SHALEPEER_WRITER"

type writerConfig struct {
	Proc    int      `json:"proc"`
	Store   string   `json:"store"`
	Etcd    []string `json:"etcd"`
	Table   string   `json:"table"`
	Commits int      `json:"commits"`
	Data    string   `json:"data"`
	Rows    int64    `json:"rows"`
	Dir     string   `json:"dir"` // ready-<proc>, start, result-<proc>.json
}

type writerChildResult struct {
	Start     int64     `json:"start_ns"` // wall clock, ns since the epoch
	End       int64     `json:"end_ns"`
	LatencyS  []float64 `json:"latency_s"`
	Attempts  int       `json:"attempts"`
	RSSPeak   int64     `json:"rss_peak_bytes"`
	CPUS      float64   `json:"cpu_s"`
	Versions  []uint64  `json:"versions"`
	Requests  int64     `json:"requests_total"`
	WallS     float64   `json:"wall_s"`
	Published bool      `json:"published"`
}

func runWriterChild(cfgJSON string) error {
	var c writerConfig
	if err := json.Unmarshal([]byte(cfgJSON), &c); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, c.Store, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: c.Etcd})
	if err != nil {
		return err
	}
	defer cli.Close()
	db, err := engine.Open(ctx, st, engine.Options{Etcd: cli.Etcd()})
	if err != nil {
		return err
	}
	tbl, err := db.OpenTable(ctx, c.Table)
	if err != nil {
		return err
	}
	w := &worker{st: st}
	rec, err := w.smallRecord(ctx, c.Data, c.Rows)
	if err != nil {
		return err
	}
	defer rec.Release()
	if err := os.WriteFile(filepath.Join(c.Dir, fmt.Sprintf("ready-%d", c.Proc)), nil, 0o644); err != nil {
		return err
	}
	if err := waitFile(ctx, filepath.Join(c.Dir, "start")); err != nil {
		return err
	}
	resetPeakRSS()
	res := writerChildResult{}
	c0, t0 := processCPU(), time.Now()
	reqs0 := st.Counters().Snapshot()
	res.Start = t0.UnixNano()
	for i := 0; i < c.Commits; i++ {
		s := time.Now()
		r, err := tbl.AppendRecord(ctx, rec)
		if err != nil {
			return fmt.Errorf("writer %d: commit %d: %w", c.Proc, i+1, err)
		}
		res.LatencyS = append(res.LatencyS, time.Since(s).Seconds())
		res.Attempts += r.Attempts
		res.Versions = append(res.Versions, r.Version)
		res.Published = r.Published
	}
	res.End = time.Now().UnixNano()
	res.WallS = time.Since(t0).Seconds()
	res.CPUS = (processCPU() - c0).Seconds()
	res.RSSPeak = peakRSS()
	res.Requests = st.Counters().Snapshot().Sub(reqs0).Total()
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, fmt.Sprintf("result-%d.json", c.Proc)), b, 0o644)
}

// waitFile waits for path to exist, polling with a growing interval up to 2 ms (a
// condition with ctx's deadline, not a sleep).
func waitFile(ctx context.Context, path string) error {
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 2*time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}

type writersResult struct {
	WallS        float64             `json:"wall_s"` // first start to last end
	CPUS         float64             `json:"cpu_s"`  // summed over the writers
	RSSPeakBytes int64               `json:"rss_peak_bytes"`
	Commits      int                 `json:"commits"`
	CommitsPerS  float64             `json:"commits_per_s"`
	Attempts     int                 `json:"attempts"`
	Rows         int64               `json:"rows"`
	Version      uint64              `json:"version"`
	Expected     uint64              `json:"expected_version"`
	PerWriter    []int               `json:"per_writer"`
	P50S         float64             `json:"p50_s"`
	P99S         float64             `json:"p99_s"`
	MaxS         float64             `json:"max_s"`
	Children     []writerChildResult `json:"-"`
}

// writers creates args.table, starts args.procs writer processes that each commit
// args.commits_per_proc appends of the small record, releases them together once all
// have opened the table, and checks the result: every commit a distinct version, the
// table at version create + procs × commits, holding exactly those rows. rss_peak_bytes is
// the largest writer's; wall_s runs from the first writer's start to the last one's end.
func (w *worker) writers(ctx context.Context, a smallArgs) (*writersResult, error) {
	if a.Procs <= 0 {
		a.Procs = 4
	}
	if a.CommitsPerProc <= 0 {
		a.CommitsPerProc = 50
	}
	if a.RowsPerCommit <= 0 {
		a.RowsPerCommit = 100
	}
	rec, err := w.smallRecord(ctx, a.Data, a.RowsPerCommit)
	if err != nil {
		return nil, err
	}
	tbl, err := w.db.CreateTable(ctx, a.Table, rec.Schema())
	rec.Release()
	if err != nil {
		return nil, err
	}
	created := tbl.Version()
	dir, err := os.MkdirTemp(w.dir, "writers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, a.Procs)
	outs := make([]*strings.Builder, a.Procs)
	defer func() {
		for _, c := range cmds {
			if c != nil && c.ProcessState == nil && c.Process != nil {
				c.Process.Kill() // our own child, by pid
				c.Wait()
			}
		}
	}()
	for i := range cmds {
		b, _ := json.Marshal(writerConfig{Proc: i, Store: w.st.URL(), Etcd: w.emb.Endpoints(), Table: a.Table,
			Commits: a.CommitsPerProc, Data: a.Data, Rows: a.RowsPerCommit, Dir: dir})
		c := exec.CommandContext(cctx, exe)
		c.Env = append(os.Environ(), writerEnv+"="+string(b))
		outs[i] = &strings.Builder{}
		c.Stdout, c.Stderr = outs[i], outs[i]
		if err := c.Start(); err != nil {
			return nil, err
		}
		cmds[i] = c
	}
	for i := range cmds {
		if err := waitFile(cctx, filepath.Join(dir, fmt.Sprintf("ready-%d", i))); err != nil {
			return nil, fmt.Errorf("writer %d never became ready: %w\n%s", i, err, outs[i].String())
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "start"), nil, 0o644); err != nil {
		return nil, err
	}
	var errs []error
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("writer %d: %w\n%s", i, err, outs[i].String()))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	res := &writersResult{}
	var first, last int64
	var lat []float64
	seen := map[uint64]int{}
	for i := range cmds {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("result-%d.json", i)))
		if err != nil {
			return nil, err
		}
		var r writerChildResult
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, err
		}
		if first == 0 || r.Start < first {
			first = r.Start
		}
		last = max(last, r.End)
		res.CPUS += r.CPUS
		res.RSSPeakBytes = max(res.RSSPeakBytes, r.RSSPeak)
		res.Commits += len(r.LatencyS)
		res.Attempts += r.Attempts
		res.PerWriter = append(res.PerWriter, len(r.LatencyS))
		lat = append(lat, r.LatencyS...)
		for _, v := range r.Versions {
			if p, dup := seen[v]; dup {
				return nil, fmt.Errorf("writers: version %d reported committed by writers %d and %d", v, p, i)
			}
			seen[v] = i
		}
	}
	res.WallS = float64(last-first) / 1e9
	if res.WallS > 0 {
		res.CommitsPerS = float64(res.Commits) / res.WallS
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		res.P50S, res.P99S, res.MaxS = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	}
	check, err := w.db.OpenTable(ctx, a.Table)
	if err != nil {
		return nil, err
	}
	m := check.Manifest()
	res.Rows, res.Version = m.LiveRows(), m.Version
	res.Expected = created + uint64(a.Procs*a.CommitsPerProc)
	if res.Version != res.Expected || res.Rows != int64(a.Procs*a.CommitsPerProc)*a.RowsPerCommit || res.Commits != a.Procs*a.CommitsPerProc {
		return nil, fmt.Errorf("writers: lost or extra commits: %d commits acknowledged, published version %d (want %d), %d rows (want %d)",
			res.Commits, res.Version, res.Expected, res.Rows, int64(a.Procs*a.CommitsPerProc)*a.RowsPerCommit)
	}
	return res, nil
}
