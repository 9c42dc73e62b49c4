package benchmarks

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

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

// Writer processes of the txn suite. The runner re-executes the current binary (the test
// binary, or `shale` for `shale bench`) with writerEnv set to a JSON writerConfig; init
// below turns that process into one writer before main or TestMain run, so no command has
// to dispatch it. A writer joins the run's store and etcd, opens the table, reports ready,
// waits for the start file, appends small batches until its window ends, and writes its
// measurements as JSON.

const writerEnv = "SHALE_BENCH_WRITER"

func init() {
	if cfg := os.Getenv(writerEnv); cfg != "" {
		if err := runWriter(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "benchmark writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

type writerConfig struct {
	Proc    int
	Store   string
	Etcd    []string
	Prefix  string // catalog prefix
	Table   string
	Window  time.Duration
	Dir     string // ready, start and result files
	Timeout time.Duration
}

func (c writerConfig) readyPath() string {
	return filepath.Join(c.Dir, fmt.Sprintf("ready-%d", c.Proc))
}
func (c writerConfig) resultPath() string {
	return filepath.Join(c.Dir, fmt.Sprintf("result-%d.json", c.Proc))
}
func writerStartPath(dir string) string { return filepath.Join(dir, "start") }

// writerResult is what one writer measured.
type writerResult struct {
	Start, End int64           // wall clock (ns since the epoch) of the start and of the last commit's end
	Latencies  []time.Duration // per commit
	Attempts   []int           // put-if-absent attempts per commit
	Rebased    []int           // versions rebased over per commit
	Requests   store.Requests
	Etcd       map[string]int64
}

func runWriter(cfgJSON string) error {
	var cfg writerConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	st, err := store.Open(ctx, cfg.Store, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: cfg.Etcd})
	if err != nil {
		return err
	}
	defer cli.Close()
	etcd, kv := newCountingClient(ctx, cli.Etcd())
	db, err := engine.Open(ctx, st, engine.Options{Etcd: etcd, CatalogPrefix: cfg.Prefix})
	if err != nil {
		return err
	}
	tbl, err := db.OpenTable(ctx, cfg.Table)
	if err != nil {
		return err
	}
	small, err := SyntheticFlights(HistoryRows, uint64(100+cfg.Proc), HistoryRows)
	if err != nil {
		return err
	}
	defer small.Release()
	rec := small.Records[0]
	if err := os.WriteFile(cfg.readyPath(), nil, 0o644); err != nil {
		return err
	}
	if err := pollFile(ctx, writerStartPath(cfg.Dir)); err != nil {
		return err
	}
	reqs0, kv0 := st.Counters().Snapshot(), kv.Snapshot()
	t0 := time.Now()
	res := writerResult{Start: t0.UnixNano()}
	for time.Since(t0) < cfg.Window {
		c0 := time.Now()
		r, err := tbl.AppendRecord(ctx, rec)
		if err != nil {
			return fmt.Errorf("writer %d: commit %d: %w", cfg.Proc, len(res.Latencies)+1, err)
		}
		res.Latencies = append(res.Latencies, time.Since(c0))
		res.Attempts = append(res.Attempts, r.Attempts)
		res.Rebased = append(res.Rebased, len(r.Rebased))
	}
	res.End = t0.UnixNano() + int64(time.Since(t0))
	res.Requests, res.Etcd = st.Counters().Snapshot().Sub(reqs0), subCounts(kv.Snapshot(), kv0)
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(cfg.resultPath(), b, 0o644)
}

// pollFile waits until path exists (polling a condition until ctx's deadline).
func pollFile(ctx context.Context, path string) error {
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
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

// runWriters starts one writer process per config, releases them together when all are
// ready, and returns their results. Process start-up and opening the table are not timed.
func runWriters(ctx context.Context, dir string, cfgs []writerConfig) ([]writerResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("benchmarks: find the binary to start writers: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	deadline, _ := ctx.Deadline()
	type proc struct {
		cmd *exec.Cmd
		out strings.Builder
	}
	procs := make([]*proc, len(cfgs))
	defer func() {
		for _, p := range procs {
			if p != nil && p.cmd.ProcessState == nil {
				p.cmd.Process.Kill() // our own child, by pid
				p.cmd.Wait()
			}
		}
	}()
	for i := range cfgs {
		cfgs[i].Dir, cfgs[i].Timeout = dir, time.Until(deadline)
		b, err := json.Marshal(cfgs[i])
		if err != nil {
			return nil, err
		}
		// -test.run=^$ keeps a test binary from running tests should init not exit first.
		p := &proc{cmd: exec.CommandContext(ctx, exe, "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), writerEnv+"="+string(b))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			return nil, fmt.Errorf("benchmarks: start writer: %w", err)
		}
		procs[i] = p
	}
	for _, c := range cfgs {
		if err := pollFile(ctx, c.readyPath()); err != nil {
			var outs []string
			for _, p := range procs {
				outs = append(outs, p.out.String())
			}
			return nil, fmt.Errorf("benchmarks: writer %d never became ready: %w\n%s", c.Proc, err, strings.Join(outs, "\n"))
		}
	}
	if err := os.WriteFile(writerStartPath(dir), nil, 0o644); err != nil {
		return nil, err
	}
	var errs []error
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("benchmarks: writer %d: %w\n%s", cfgs[i].Proc, err, p.out.String()))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := make([]writerResult, len(cfgs))
	for i, c := range cfgs {
		b, err := os.ReadFile(c.resultPath())
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("benchmarks: writer %d result: %w", c.Proc, err)
		}
	}
	return out, nil
}

// percentile returns the p-th percentile (0..100, nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
