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
  analyze       the query's analyze_plan (untimed): Lance's own I/O counters, summed over
                its operators (iops, requests, bytes_read), and the plan text
"""

import os
import re
import shutil
import sys

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


if __name__ == "__main__":
    proto.serve({"hello": hello, "prepare": prepare, "create_index": create_index,
                 "query": query, "analyze": analyze,
                 "import": import_, "drop_table": drop_table})
