"""Lance's worker in the peer harness (protocol: proto.py).

Operations:
  hello         versions of pylance and pyarrow
  prepare       read args.data (Parquet) with pyarrow (load_s, untimed) and write it as a
                Lance dataset under args.dir with write_dataset's defaults (timed)
  create_index  create_scalar_index(args.column, args.kind upper-cased, name, replace=True)
                (timed); kinds BTREE, ZONEMAP, ... as Lance names them
  query         to_table(filter=args.filter, columns=args.columns) with
                use_scalar_index = (args.mode == "index"); args.cold opens the dataset anew
                (a fresh session: empty index and metadata caches), untimed (timed)
  import        read args.data with pyarrow and write it as the dataset args.table (timed)
  drop_table    delete the dataset args.table
  appends       create args.table (empty) and commit args.commits appends of the first
                args.rows_per_commit rows of args.data, timing those after args.skip
  history       create args.table and commit args.commits such appends (untimed detail)
  open          lance.dataset(args.table) (timed); args.session reuses one Session (its
                metadata cache) across opens, else each open starts a fresh one
  writers       args.procs processes (this script with --writer) each committing
                args.commits_per_proc appends to a new args.table, released together;
                checks exact counts
  analyze       the query's analyze_plan (untimed): Lance's own I/O counters, summed over
                its operators (iops, requests, bytes_read), and the plan text
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq
import lance

import proto

state = {}


def log(msg):
    print(f"lance_worker: {msg}", file=sys.stderr, flush=True)


def hello():
    return {"system": "lance", "pylance": lance.__version__, "pyarrow": pa.__version__,
            "python": sys.version.split()[0], "pid": os.getpid()}


def prepare(dir, data, rows=0, table="flights"):
    os.makedirs(dir, exist_ok=True)
    uri = os.path.join(dir, table + ".lance")
    tbl, t = proto.measure(lambda: pq.read_table(data))
    if rows:
        tbl = tbl.slice(0, rows)
    log(f"loaded {tbl.num_rows} rows in {t['wall_s']:.1f} s")
    ds, res = proto.measure(lambda: lance.write_dataset(tbl, uri, mode="overwrite"))
    del tbl
    state["uri"], state["ds"] = uri, ds
    res.update(load_s=t["wall_s"], rows=ds.count_rows(), fragments=len(ds.get_fragments()),
               version=ds.version, bytes_on_disk=du(uri))
    return res


def du(path):
    n = 0
    for root, _, files in os.walk(path):
        for f in files:
            n += os.path.getsize(os.path.join(root, f))
    return n


def create_index(kind="btree", name=None, column=None, columns=None):
    cols = ([column] if column else []) + list(columns or [])
    if len(cols) != 1:
        raise ValueError(f"Lance builds one column per scalar index, got {cols}")
    ds = state["ds"]
    before = du(state["uri"])
    _, res = proto.measure(lambda: ds.create_scalar_index(cols[0], kind.upper(), name=name, replace=True))
    state["ds"] = lance.dataset(state["uri"])
    res.update(rows_indexed=state["ds"].count_rows(), version=state["ds"].version,
               index_bytes_added=du(state["uri"]) - before)
    res["rows_per_s"] = res["rows_indexed"] / res["wall_s"] if res["wall_s"] > 0 else 0
    return res


def _scanner_args(filter, columns, mode):
    if mode not in ("index", "noindex"):
        raise ValueError(f"mode {mode!r} (want index or noindex)")
    kw = {"filter": filter or None, "use_scalar_index": mode == "index"}
    if columns is not None:
        kw["columns"] = columns
    return kw


def query(filter="", columns=None, mode="index", cold=False):
    kw = _scanner_args(filter, columns, mode)
    ds = lance.dataset(state["uri"]) if cold else state["ds"]
    tbl, res = proto.measure(lambda: ds.to_table(**kw))
    res["rows"] = tbl.num_rows
    return res


_METRIC = re.compile(r"\b(iops|requests|bytes_read)=([0-9.]+)\s*([KMG]?)")
_SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def analyze(filter="", columns=None, mode="index", cold=False):
    kw = _scanner_args(filter, columns, mode)
    ds = lance.dataset(state["uri"]) if cold else state["ds"]
    text = ds.scanner(**kw).analyze_plan()
    sums = {"iops": 0, "requests": 0, "bytes_read": 0}
    for m in _METRIC.finditer(text):
        sums[m.group(1)] += int(float(m.group(2)) * _SCALE[m.group(3)])
    sums["plan"] = text
    return sums


def import_(data, table):
    uri = os.path.join(os.path.dirname(state["uri"]), table + ".lance")
    ds, res = proto.measure(lambda: lance.write_dataset(pq.read_table(data), uri, mode="create"))
    res.update(rows=ds.count_rows(), fragments=len(ds.get_fragments()), bytes=du(uri))
    return res


def drop_table(table):
    uri = os.path.join(os.path.dirname(state["uri"]), table + ".lance")
    if uri == state["uri"]:
        raise ValueError("drop_table: that is the prepared dataset")
    shutil.rmtree(uri)
    return {}


def small(data, n):
    """The first n rows of data (Parquet), the record every small append commits."""
    f = pq.ParquetFile(data)
    return pa.Table.from_batches([next(f.iter_batches(batch_size=n))]).combine_chunks()


def _uri(table):
    return os.path.join(os.path.dirname(state["uri"]), table + ".lance")


def appends(data, table, rows_per_commit=100, commits=100, skip=10):
    rec = small(data, rows_per_commit)
    ds = lance.write_dataset(rec.slice(0, 0), _uri(table), mode="create")
    for _ in range(skip):
        ds = lance.write_dataset(rec, ds, mode="append")
    lat = []

    def run():
        nonlocal ds
        for _ in range(commits - skip):
            t0 = time.perf_counter()
            ds = lance.write_dataset(rec, ds, mode="append")
            lat.append(time.perf_counter() - t0)
    _, res = proto.measure(run)
    res.update(rows=ds.count_rows(), version=ds.version, commits=len(lat), latency_s=lat,
               median_s=sorted(lat)[len(lat) // 2])
    return res


def history(data, table, rows_per_commit=100, commits=1000):
    rec = small(data, rows_per_commit)

    def run():
        ds = lance.write_dataset(rec.slice(0, 0), _uri(table), mode="create")
        for _ in range(commits):
            ds = lance.write_dataset(rec, ds, mode="append")
        return ds
    ds, res = proto.measure(run)
    res.update(rows=ds.count_rows(), version=ds.version, fragments=len(ds.get_fragments()))
    return res


def open_(table, session=False):
    uri = _uri(table)
    kw = {}
    if session:
        if "session" not in state:
            state["session"] = lance.Session()
        kw["session"] = state["session"]
    ds, res = proto.measure(lambda: lance.dataset(uri, **kw))
    res.update(version=ds.version, fragments=len(ds.get_fragments()), rows=ds.count_rows())
    return res


def writers(data, table, procs=4, commits_per_proc=50, rows_per_commit=100):
    uri = _uri(table)
    rec = small(data, rows_per_commit)
    lance.write_dataset(rec.slice(0, 0), uri, mode="create")
    created = lance.dataset(uri).version
    d = tempfile.mkdtemp(prefix="lance-writers-", dir=os.path.dirname(state["uri"]))
    try:
        children = []
        for i in range(procs):
            cfg = {"proc": i, "uri": uri, "data": data, "rows": rows_per_commit, "commits": commits_per_proc, "dir": d}
            children.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--writer", json.dumps(cfg)]))
        for i in range(procs):
            _wait_file(os.path.join(d, f"ready-{i}"))
        open(os.path.join(d, "start"), "w").close()
        codes = [c.wait() for c in children]
        if any(codes):
            raise RuntimeError(f"writers: exit codes {codes}")
        rs = []
        for i in range(procs):
            with open(os.path.join(d, f"result-{i}.json")) as f:
                rs.append(json.load(f))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    first, last = min(r["start"] for r in rs), max(r["end"] for r in rs)
    lat = sorted(x for r in rs for x in r["latency_s"])
    commits = sum(len(r["latency_s"]) for r in rs)
    ds = lance.dataset(uri)
    res = {"wall_s": last - first, "cpu_s": sum(r["cpu_s"] for r in rs), "rss_peak_bytes": max(r["rss_peak_bytes"] for r in rs),
           "commits": commits, "commits_per_s": commits / (last - first), "per_writer": [len(r["latency_s"]) for r in rs],
           "rows": ds.count_rows(), "version": ds.version, "expected_version": created + procs * commits_per_proc,
           "p50_s": lat[len(lat) // 2], "p99_s": lat[min(len(lat) - 1, len(lat) * 99 // 100)], "max_s": lat[-1]}
    if res["version"] != res["expected_version"] or res["rows"] != procs * commits_per_proc * rows_per_commit or commits != procs * commits_per_proc:
        raise RuntimeError(f"writers: lost or extra commits: {res}")
    return res


def _wait_file(path, timeout=300):
    deadline, wait = time.monotonic() + timeout, 5e-5
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waiting for {path}")
        time.sleep(wait)  # polling a condition with a deadline
        wait = min(2 * wait, 0.002)


def writer_child(cfg):
    rec = small(cfg["data"], cfg["rows"])
    ds = lance.dataset(cfg["uri"])
    open(os.path.join(cfg["dir"], f"ready-{cfg['proc']}"), "w").close()
    _wait_file(os.path.join(cfg["dir"], "start"))
    proto.reset_peak_rss()
    c0, start = time.process_time(), time.time()
    lat = []
    for _ in range(cfg["commits"]):
        t0 = time.perf_counter()
        ds = lance.write_dataset(rec, ds, mode="append")
        lat.append(time.perf_counter() - t0)
    out = {"start": start, "end": time.time(), "latency_s": lat, "cpu_s": time.process_time() - c0, "rss_peak_bytes": proto.peak_rss()}
    with open(os.path.join(cfg["dir"], f"result-{cfg['proc']}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--writer":
        writer_child(json.loads(sys.argv[2]))
        sys.exit(0)
    proto.serve({"hello": hello, "prepare": prepare, "create_index": create_index,
                 "query": query, "analyze": analyze,
                 "import": import_, "drop_table": drop_table,
                 "appends": appends, "history": history, "open": open_, "writers": writers})
