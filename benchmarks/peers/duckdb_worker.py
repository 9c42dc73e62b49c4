"""DuckDB's worker in the peer harness (protocol: proto.py): DuckDB's own storage, one
database file per table, results fetched as Arrow tables.

Operations:
  hello       versions of duckdb and pyarrow
  prepare     CREATE TABLE flights AS SELECT * FROM read_parquet(args.data) in a new
              database file under args.dir, then CHECKPOINT (timed)
  import      the same into the new database file args.table.duckdb (timed: reading the
              Parquet, DuckDB's encoding, the CHECKPOINT that makes it durable)
  drop_table  delete args.table's database file
  query       SELECT * (or args.columns) FROM flights [WHERE args.filter], fetched into
              one Arrow table (timed); args.cold connects anew first (untimed)
The filter is the SQL the other systems get (DuckDB reads TIMESTAMP '…' literals alike).
"""

import os
import sys

import duckdb
import pyarrow as pa

import proto

state = {}


def hello():
    return {"system": "duckdb", "duckdb": duckdb.__version__, "pyarrow": pa.__version__,
            "python": sys.version.split()[0], "pid": os.getpid(), "threads": _threads()}


def _threads():
    try:
        return duckdb.connect().execute("SELECT current_setting('threads')").fetchall()[0][0]
    except duckdb.Error:
        return None


def _load(path, data, rows):
    con = duckdb.connect(path)
    limit = f" LIMIT {int(rows)}" if rows else ""
    con.execute(f"CREATE TABLE flights AS SELECT * FROM read_parquet(?){limit}", [data])
    con.execute("CHECKPOINT")
    return con


def prepare(dir, data, rows=0, table="flights"):
    os.makedirs(dir, exist_ok=True)
    state["dir"] = dir
    path = os.path.join(dir, table + ".duckdb")
    con, res = proto.measure(lambda: _load(path, data, rows))
    state["path"], state["con"] = path, con
    res.update(rows=con.execute("SELECT count(*) FROM flights").fetchall()[0][0], fragments=0,
               bytes_on_disk=os.path.getsize(path))
    return res


def import_(data, table):
    path = os.path.join(state["dir"], table + ".duckdb")
    con, res = proto.measure(lambda: _load(path, data, 0))
    res.update(rows=con.execute("SELECT count(*) FROM flights").fetchall()[0][0], bytes=os.path.getsize(path))
    con.close()
    return res


def drop_table(table):
    path = os.path.join(state["dir"], table + ".duckdb")
    if path == state["path"]:
        raise ValueError("drop_table: that is the prepared table")
    for p in (path, path + ".wal"):
        if os.path.exists(p):
            os.remove(p)
    return {}


def query(filter="", columns=None, mode="noindex", cold=False):
    if cold:
        state["con"].close()
        state["con"] = duckdb.connect(state["path"])
    con = state["con"]
    cols = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    sql = f"SELECT {cols} FROM flights" + (f" WHERE {filter}" if filter else "")
    tbl, res = proto.measure(lambda: con.sql(sql).to_arrow_table())
    res["rows"] = tbl.num_rows
    return res


if __name__ == "__main__":
    proto.serve({"hello": hello, "prepare": prepare, "import": import_, "drop_table": drop_table, "query": query})
