"""The peer harness's driver: starts one worker per system, prepares each system's copy of
the same data, runs the suites as interleaved pairs and writes their tables.

Run it through run.sh, which makes the virtual environment and builds Shale's worker:

    benchmarks/peers/run.sh [--suites index] [--reps 9] [--no-write] ...

Suites (SUITES below; issue 13's comparisons are added as more entries):
    index   issue 10: BTree and ZoneMap builds and queries, Shale vs Lance
    scan    issue 13's data path: import from Parquet, warm full scan, origin = 'SEA'
            without an index (warm and first), random-key lookups without an index;
            Shale vs Lance, Delta, DuckDB and pyarrow on the same IPC + ZSTD bytes
    commit  issue 13's commit path: 100-row appends (commits 11-100), open at 1,000
            versions, writer processes (4 x 50 appends, and 1 to 8 for scaling); Shale
            vs Lance (and Delta for appends)
    ab      this build of Shale against a baseline build (--shale-base BIN): import, scans
            and filters, before/after in one run
"""

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import harness as H
import proto
import suite_ab
import suite_index
import suite_commit
import suite_scan

SUITES = {"index": suite_index.run, "scan": suite_scan.run, "commit": suite_commit.run, "ab": suite_ab.run}


class Context:
    def __init__(self, args, workers, hello, prepared):
        self.args, self.workers, self.hello, self.prepared = args, workers, hello, prepared


def machine(repo):
    info = {"nproc": os.cpu_count(), "uname": " ".join(platform.uname()), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        info["commit"] = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        # The results file itself is what a run changes: it does not make the code dirty.
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/RESULTS.md"],
                               capture_output=True, text=True).stdout.strip()
        info["dirty"] = bool(dirty)
    except OSError:
        pass
    return info


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.abspath(os.path.join(here, "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shale-bin", required=True, help="the shalepeer worker binary (run.sh builds it)")
    ap.add_argument("--shale-base", default="", help="a shalepeer binary of a baseline build (suite ab)")
    ap.add_argument("--work", required=True, help="directory for each system's copy of the data")
    ap.add_argument("--data", default=os.path.join(repo, "testdata", "flights-3m.parquet"))
    ap.add_argument("--rows", type=int, default=0, help="cap on rows (0 = all)")
    ap.add_argument("--suites", default="", help=f"comma-separated: {', '.join(SUITES)} "
                    "(default: index, scan and commit; ab too when --shale-base is given)")
    ap.add_argument("--reps", type=int, default=9, help="timed repetitions of each query variant")
    ap.add_argument("--build-reps", type=int, default=5, help="timed repetitions of each index build")
    ap.add_argument("--import-reps", type=int, default=5, help="timed repetitions of each import (scan suite)")
    ap.add_argument("--lookup-reps", type=int, default=21, help="timed point lookups per variant")
    ap.add_argument("--lookup-keys", type=int, default=21, help="distinct lookup keys")
    ap.add_argument("--commit-reps", type=int, default=5, help="repetitions of each 100-append series (commit suite)")
    ap.add_argument("--open-reps", type=int, default=21, help="timed opens per variant (commit suite)")
    ap.add_argument("--versions", type=int, default=1000, help="appends in the history that is opened (commit suite)")
    ap.add_argument("--writer-procs", default="1,2,4,8", help="writer process counts (commit suite; 4 carries the target)")
    ap.add_argument("--writer-commits", type=int, default=50, help="appends per writer process (commit suite)")
    ap.add_argument("--writer-reps", type=int, default=3, help="repetitions of each writer count (commit suite)")
    ap.add_argument("--results", default=os.path.join(repo, "benchmarks", "RESULTS.md"), help="Markdown file to update")
    ap.add_argument("--no-write", action="store_true", help="print the tables without updating --results")
    args = ap.parse_args()
    # The default runs every suite that needs nothing more than a clean clone: ab needs a
    # baseline binary, and a default run that failed on it after the others would print nothing.
    default = [s for s in SUITES if s != "ab" or args.shale_base]
    suites = [s.strip() for s in args.suites.split(",") if s.strip()] or default
    for s in suites:
        if s not in SUITES:
            ap.error(f"unknown suite {s!r} (want {', '.join(SUITES)})")
    if "ab" in suites and not args.shale_base:
        ap.error("suite ab needs --shale-base BIN (a shalepeer built from the baseline commit)")
    for n in (args.reps, args.build_reps, args.import_reps, args.lookup_reps, args.lookup_keys, args.commit_reps, args.open_reps,
              args.versions, args.writer_commits, args.writer_reps):
        if n < 1:
            ap.error("repetition and key counts must be at least 1")
    os.makedirs(args.work, exist_ok=True)

    started = dt.datetime.now(dt.timezone.utc)
    load0 = os.getloadavg()
    workers = {
        "shale": proto.Worker("shale", [args.shale_bin]),
        "lance": proto.Worker("lance", [sys.executable, os.path.join(here, "lance_worker.py")]),
        "pyarrow": proto.Worker("pyarrow", [sys.executable, os.path.join(here, "arrow_worker.py")]),
    }
    if "scan" in suites or "commit" in suites:
        workers["delta"] = proto.Worker("delta", [sys.executable, os.path.join(here, "delta_worker.py")])
    if "scan" in suites:
        workers["duckdb"] = proto.Worker("duckdb", [sys.executable, os.path.join(here, "duckdb_worker.py")])
    if args.shale_base:
        workers["shale-base"] = proto.Worker("shale-base", [args.shale_base])
    try:
        hello = {n: w.call("hello") for n, w in workers.items()}
        prepared = {}
        for n, w in workers.items():
            H.log(f"prepare {n}: {args.data}")
            d = os.path.join(args.work, n)
            if os.path.isdir(d):
                shutil.rmtree(d)  # a previous run's copy under the same --work
            prepared[n] = w.call("prepare", dir=os.path.join(args.work, n), data=args.data, rows=args.rows)
            H.log(f"  {prepared[n]['rows']:,} rows in {prepared[n]['fragments']} fragments, written in {prepared[n]['wall_s']:.1f} s")
        if prepared["shale"]["rows"] != prepared["lance"]["rows"]:
            raise RuntimeError(f"row counts differ after prepare: {prepared}")
        ctx = Context(args, workers, hello, prepared)
        outputs = {}
        for s in suites:
            t0 = time.monotonic()
            md, data = SUITES[s](ctx)
            outputs[s] = (md, data, time.monotonic() - t0)
    finally:
        for w in workers.values():
            w.close()
    load1 = os.getloadavg()
    m = machine(repo)
    ended = dt.datetime.now(dt.timezone.utc)

    for s, (md, data, took) in outputs.items():
        header = render_header(s, args, m, hello, prepared, started, ended, took, load0, load1)
        full = header + "\n\n" + md
        print(full)
        path = os.path.join(args.work, f"peers-{s}-{started.strftime('%Y%m%dT%H%M%SZ')}.json")
        with open(path, "w") as f:
            json.dump({"suite": s, "args": vars(args), "machine": m, "hello": hello, "prepared": prepared,
                       "started": started.isoformat(), "ended": ended.isoformat(), "load": [load0, load1], "data": data}, f, indent=1, default=str)
        H.log(f"raw results: {path}")
        if not args.no_write:
            H.update_results(args.results, s, full)
            H.log(f"updated {args.results}")


def render_header(suite, args, m, hello, prepared, started, ended, took, load0, load1):
    sh, la = hello["shale"], hello["lance"]
    others = "".join(f", {k} {hello[n][k]}" for n, k in (("delta", "deltalake"), ("duckdb", "duckdb")) if n in hello)
    commit = m.get("commit", "?") + (" (uncommitted changes)" if m.get("dirty") else "")
    lines = [
        f"Measured {started.strftime('%Y-%m-%d %H:%M')}–{ended.strftime('%H:%M')} UTC (suite took {took:.0f} s) at commit {commit}: "
        f"{m.get('cpu', '?')}, {m.get('nproc')} CPUs, {m.get('mem_gib', '?')} GiB; Shale {sh.get('go')} (GOMAXPROCS {sh.get('gomaxprocs')}), "
        f"pylance {la.get('pylance')}, pyarrow {la.get('pyarrow')}{others}, Python {la.get('python')}.",
        f"Load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load0)} at the start, {' '.join(f'{x:.2f}' for x in load1)} at the end.",
        f"Data: {os.path.basename(args.data)}, {prepared['shale']['rows']:,} rows; Shale: {prepared['shale']['fragments']} fragments, "
        f"{prepared['shale']['batches']} batches (file://, embedded etcd), imported in {prepared['shale']['wall_s']:.1f} s; "
        f"Lance: {prepared['lance']['fragments']} fragments ({mb_str(prepared['lance'].get('bytes_on_disk'))}), written in {prepared['lance']['wall_s']:.1f} s "
        f"(both untimed by the comparisons). Repetitions: {args.reps} per query variant, {args.build_reps} per build, "
        f"{args.lookup_reps} per lookup variant, {args.import_reps} per import" +
        (f"; {args.commit_reps} per append series, {args.open_reps} per open, {args.writer_reps} per writer count" if suite == "commit" else "") +
        "; one warm-up round before each query's repetitions.",
    ]
    return "\n".join(lines)


def mb_str(n):
    return "?" if not n else f"{n / 1e6:.1f} MB"


if __name__ == "__main__":
    main()
