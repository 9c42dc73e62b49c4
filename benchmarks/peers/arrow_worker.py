"""The physical-limit baseline of the peer harness (protocol: proto.py): pyarrow writing and
reading the same Arrow IPC + ZSTD bytes a Shale table holds, with no table format around them.

Operations:
  hello      versions of pyarrow and Python
  prepare    remember args.dir (no data of its own)
  import     read args.data (Parquet) with pyarrow and write it as Arrow IPC files of
             args.file_rows rows in batches of args.batch_rows, ZSTD (pyarrow's default
             level), under args.dir/args.table/ (timed)
  drop_table delete args.table's files
  scan       read every batch of the Arrow IPC files args.paths (Shale's own data files;
             the driver gets them from Shale's worker) into memory (timed)
"""

import os
import shutil
import sys

import pyarrow as pa
import pyarrow.parquet as pq

import proto

state = {}


def hello():
    return {"system": "pyarrow", "pyarrow": pa.__version__, "python": sys.version.split()[0], "pid": os.getpid()}


def prepare(dir, data=None, rows=0, table=None):
    os.makedirs(dir, exist_ok=True)
    state["dir"] = dir
    return {"wall_s": 0.0, "cpu_s": 0.0, "rss_peak_bytes": proto.peak_rss(), "rows": 0, "fragments": 0}


def _write(data, out, batch_rows, file_rows):
    tbl = pq.read_table(data)
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    files, nbytes = 0, 0
    for start in range(0, tbl.num_rows, file_rows):
        part = tbl.slice(start, file_rows)
        path = os.path.join(out, f"{files:05d}.arrow")
        with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, tbl.schema, options=opts) as w:
            for b in part.to_batches(max_chunksize=batch_rows):
                w.write_batch(b)
        nbytes += os.path.getsize(path)
        files += 1
    return tbl.num_rows, files, nbytes


def import_(data, table, batch_rows=65536, file_rows=1048576):
    out = os.path.join(state["dir"], table)
    os.makedirs(out)
    (rows, files, nbytes), res = proto.measure(lambda: _write(data, out, batch_rows, file_rows))
    res.update(rows=rows, fragments=files, bytes=nbytes)
    return res


def drop_table(table):
    shutil.rmtree(os.path.join(state["dir"], table))
    return {}


def _read(paths):
    rows = 0
    for p in paths:
        with pa.OSFile(p, "rb") as f:
            rows += pa.ipc.open_file(f).read_all().num_rows
    return rows


def scan(paths):
    rows, res = proto.measure(lambda: _read(paths))
    res["rows"] = rows
    return res


if __name__ == "__main__":
    proto.serve({"hello": hello, "prepare": prepare, "import": import_, "drop_table": drop_table, "scan": scan})
