//go:build unix

// Command shalepeer is Shale's worker in the peer harness (benchmarks/peers/run.sh): a
// process that holds one Shale table and times operations on it in-process, driven by the
// harness's Python driver exactly as the other systems' workers are, so the driver can
// pair Shale's timings with a peer's repetition by repetition.
//
// Protocol: one JSON object per line on stdin, {"op": NAME, "args": {...}}; one JSON
// object per line on stdout, {"ok": true, "result": {...}} or {"ok": false, "error":
// TEXT}. Progress and diagnostics go to stderr. Operations (see worker.go):
//
//	hello         the system, its build and the Go runtime
//	prepare       start an embedded etcd and a file:// store under args.dir and import
//	              args.data (Parquet; "" = synthetic flights rows) as one table (timed)
//	create_index  build (replace) an index: args.column(s), args.kind, args.name (timed)
//	drop_index    drop args.name
//	import        create args.table from the Parquet file args.data, streamed (timed)
//	drop_table    drop args.table
//	data_files    the local paths of the prepared table's data files (for a baseline
//	              that reads the same bytes)
//	appends       create args.table and commit args.commits appends of args.rows_per_commit
//	              rows (the first rows of args.data), timing those after args.skip
//	history       create args.table with args.commits such appends (one fragment each)
//	open          DB.OpenTable(args.table) through the worker's DB, or a new one (args.cold)
//	writers       args.procs writer processes (this binary again, SHALEPEER_WRITER set)
//	              each committing args.commits_per_proc appends to a new args.table,
//	              released together; checks exact counts (commits/s, latencies)
//	query         scan args.filter (all columns unless args.columns) with args.mode
//	              planner | force | noindex | fullscan; args.cold opens a fresh DB first
//	              (empty index cache), untimed (timed; rows, store requests, the plan)
//	quit          stop etcd and exit
//
// Every timed result carries wall_s and cpu_s (this process's user + system time),
// rss_peak_bytes (the process's peak resident set during the operation: VmHWM after a
// reset through /proc/self/clear_refs; on other systems the lifetime peak) and the store
// requests the operation made, by kind (store.Counters).
//
// SHALEPEER_CPUPROFILE=FILE writes a CPU profile of the whole process (go tool pprof);
// SHALEPEER_MEMPROFILE=FILE writes its allocation profile at exit (after quit);
// SHALEPEER_SCAN_PARALLELISM=N sets engine.Options.ScanParallelism (default the engine's).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	if cfg := os.Getenv(writerEnv); cfg != "" {
		if path := os.Getenv("SHALEPEER_CPUPROFILE"); path != "" {
			// Each writer process profiles itself to <path>.writer-<pid>.
			if f, err := os.Create(fmt.Sprintf("%s.writer-%d", path, os.Getpid())); err == nil && pprof.StartCPUProfile(f) == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
		if err := runWriterChild(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "shalepeer writer:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if path := os.Getenv("SHALEPEER_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "shalepeer: cpu profile:", err)
			os.Exit(1)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if path := os.Getenv("SHALEPEER_MEMPROFILE"); path != "" {
		defer func() {
			f, err := os.Create(path)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "shalepeer: memory profile:", err)
			}
		}()
	}
	w := &worker{log: os.Stderr}
	err := serve(ctx, w, os.Stdin, os.Stdout)
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shalepeer:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

type request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

type reply struct {
	OK     bool   `json:"ok"`
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// serve answers requests from in until quit or end of input. An operation's error is a
// reply, not the end of serve; only I/O errors on in or out end it.
func serve(ctx context.Context, w *worker, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var req request
		var rep reply
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			rep.Error = fmt.Sprintf("bad request %q: %v", sc.Text(), err)
		} else if req.Op == "quit" {
			rep.OK = true
			return enc.Encode(rep)
		} else if res, err := w.do(ctx, req.Op, req.Args); err != nil {
			rep.Error = err.Error()
		} else {
			rep.OK, rep.Result = true, res
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	return sc.Err()
}
