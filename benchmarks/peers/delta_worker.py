"""Delta Lake's worker in the peer harness (protocol: proto.py): the deltalake package
(delta-rs), tables under args.dir.

Operations:
  hello       versions of deltalake and pyarrow
  prepare     remember args.dir (the suites create their own tables)
  import      read args.data (Parquet) with pyarrow and write_deltalake it as the new
              table args.table (timed: reading and writing)
  drop_table  delete args.table
  appends     create args.table (empty) and commit args.commits appends of the first
              args.rows_per_commit rows of args.data with write_deltalake(mode="append"),
              timing those after args.skip
"""

import os
import shutil
import sys
import time

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq

import proto

state = {}


def hello():
    return {"system": "delta", "deltalake": deltalake.__version__, "pyarrow": pa.__version__,
            "python": sys.version.split()[0], "pid": os.getpid()}


def prepare(dir, data=None, rows=0, table=None):
    os.makedirs(dir, exist_ok=True)
    state["dir"] = dir
    return {"wall_s": 0.0, "cpu_s": 0.0, "rss_peak_bytes": proto.peak_rss(), "rows": 0, "fragments": 0}


def _uri(table):
    return os.path.join(state["dir"], table + ".delta")


def du(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def import_(data, table):
    uri = _uri(table)
    _, res = proto.measure(lambda: deltalake.write_deltalake(uri, pq.read_table(data), mode="error"))
    dt = deltalake.DeltaTable(uri)
    res.update(rows=dt.to_pyarrow_dataset().count_rows(),
               fragments=len(dt.file_uris()), bytes=du(uri))
    return res


def drop_table(table):
    shutil.rmtree(_uri(table))
    return {}


def small(data, n):
    f = pq.ParquetFile(data)
    return pa.Table.from_batches([next(f.iter_batches(batch_size=n))]).combine_chunks()


def appends(data, table, rows_per_commit=100, commits=100, skip=10):
    rec = small(data, rows_per_commit)
    uri = _uri(table)
    deltalake.write_deltalake(uri, rec.slice(0, 0), mode="error")
    dt = deltalake.DeltaTable(uri)
    for _ in range(skip):
        deltalake.write_deltalake(dt, rec, mode="append")
    lat = []

    def run():
        for _ in range(commits - skip):
            t0 = time.perf_counter()
            deltalake.write_deltalake(dt, rec, mode="append")
            lat.append(time.perf_counter() - t0)
    _, res = proto.measure(run)
    dt.update_incremental()
    res.update(rows=dt.to_pyarrow_dataset().count_rows(), version=dt.version(), commits=len(lat), latency_s=lat,
               median_s=sorted(lat)[len(lat) // 2])
    return res


if __name__ == "__main__":
    proto.serve({"hello": hello, "prepare": prepare, "import": import_, "drop_table": drop_table, "appends": appends})
