"""Issue 13's data-path comparisons: Shale against Lance, Delta Lake, DuckDB and pyarrow
writing and reading the same Arrow IPC + ZSTD bytes.

  import   3,000,000 rows from Parquet into a new table: Shale (`shale import`'s path:
           internal/pqinput (pqarrow) streaming into Table.Append), Lance (pq.read_table + write_dataset),
           Delta (pq.read_table + write_deltalake), DuckDB (CREATE TABLE AS SELECT * FROM
           read_parquet + CHECKPOINT), pyarrow (pq.read_table + Arrow IPC files of Shale's
           shape: 1,048,576 rows per file, 65,536 per batch, ZSTD); each copy is deleted,
           untimed, after its repetition
  scan     warm full scan, all columns: Shale Table.Scan, Lance to_table(), pyarrow reading
           every batch of Shale's own data files (the same bytes), DuckDB SELECT * into Arrow;
           and Shale scanning a copy of the table whose data files use LZ4 (no target)
  filter   origin = 'SEA' without any index: Shale (statistics pruning, which cannot prune
           it), Lance (use_scalar_index=False); warm, and first (Shale: a new DB; Lance: a
           new dataset, opened untimed before the query)
  lookup   random-key lookup without an index: delay = X AND distance = Y for the values of
           one of --lookup-keys rows drawn with a fixed seed (no column of it is sorted, so
           statistics prune nothing); Shale, Lance, DuckDB
Ratios are Shale's time / the peer's (lower is better), as issue 13 quotes them.
"""

import harness as H

HEADER = ["comparison (A vs B)", "A median ms", "B median ms", "A ÷ B time, min / **median** / max (lower: A faster)", "same with CPU times (median)", "target (on wall)", "met"]


def rows_of(res, order):
    out = []
    for name in order:
        rs = res[name]
        w = [r["wall_s"] for r in rs]
        extra = rs[0].get("bytes")
        rows = sorted(r["rows"] for r in rs)[len(rs) // 2]
        out.append([name, f"{rows:,}", H.fmt_ms(H.median(w)), H.fmt_ms(min(w)), H.fmt_ms(max(w)),
                    H.fmt_ms(H.median([r["cpu_s"] for r in rs])), H.mb(max(r["rss_peak_bytes"] for r in rs)), H.mb(extra) if extra else "–"])
    return out


VHEADER = ["variant", "rows", "median ms", "min ms", "max ms", "CPU median ms", "peak RSS MB", "stored MB"]


def run(ctx):
    shale, lance, arrow = ctx.workers["shale"], ctx.workers["lance"], ctx.workers["pyarrow"]
    duck, delta = ctx.workers["duckdb"], ctx.workers["delta"]
    args = ctx.args
    md, out = [], {}

    def importer(w, name):
        def run(rep):
            table = f"imp{rep + 10}"  # warm-ups are negative
            r = w.call("import", data=args.data, table=table)
            w.call("drop_table", table=table)
            return r
        return H.Variant(name, name.split(":")[0], run)

    H.log(f"scan: import from Parquet, {args.import_reps} rounds of 5")
    imp = H.interleave([importer(shale, "shale: import"), importer(lance, "lance: import"), importer(delta, "delta: import"),
                        importer(duck, "duckdb: import"), importer(arrow, "pyarrow: IPC + ZSTD write")],
                       args.import_reps, warmup=0, check=_same_rows("import"))
    icmp = [H.Comparison("import: Shale vs Lance", "shale: import", "lance: import", 1.0, ratio="time").evaluate(imp),
            H.Comparison("import: Shale vs Delta", "shale: import", "delta: import", ratio="time").evaluate(imp),
            H.Comparison("import: Shale vs DuckDB", "shale: import", "duckdb: import", ratio="time").evaluate(imp),
            H.Comparison("import: Shale vs pyarrow writing the same IPC + ZSTD", "shale: import", "pyarrow: IPC + ZSTD write", 1.3, ratio="time").evaluate(imp)]
    out["import"] = {"results": imp, "comparisons": icmp}
    md += ["#### Import 3M rows from Parquet", "", H.table(VHEADER, rows_of(imp, list(imp))), "", H.table(HEADER, H.comparison_rows(icmp)), ""]

    files = shale.call("data_files")
    # The same rows in a second Shale table whose data files use the LZ4 codec (table
    # configuration shale.write.compression = lz4): the codec a user picks when scan speed
    # matters more than stored bytes. Imported once, untimed.
    lz4 = shale.call("import", data=args.data, table="flights_lz4", config={"shale.write.compression": "lz4"})
    H.log(f"scan: warm full scan, {args.reps} rounds of 5")
    sc = H.interleave([H.Variant("shale: full scan", "shale", lambda rep: shale.call("query", filter="", mode="planner")),
                       H.Variant("lance: full scan", "lance", lambda rep: lance.call("query", filter="", mode="noindex")),
                       H.Variant("pyarrow: read the same IPC bytes", "pyarrow", lambda rep: arrow.call("scan", paths=files["paths"])),
                       H.Variant("duckdb: full scan into Arrow", "duckdb", lambda rep: duck.call("query", filter="")),
                       H.Variant("shale: full scan, LZ4 table", "shale", lambda rep: shale.call("query", filter="", mode="planner", table="flights_lz4"))],
                      args.reps, check=_same_rows("scan"))
    scmp = [H.Comparison("warm full scan: Shale vs pyarrow reading the same bytes", "shale: full scan", "pyarrow: read the same IPC bytes", 1.0, ratio="time").evaluate(sc),
            H.Comparison("warm full scan: Shale vs DuckDB into Arrow", "shale: full scan", "duckdb: full scan into Arrow", 1.0, ratio="time").evaluate(sc),
            H.Comparison("warm full scan: Shale vs Lance", "shale: full scan", "lance: full scan", ratio="time").evaluate(sc),
            H.Comparison("warm full scan: Shale, LZ4 table vs DuckDB into Arrow", "shale: full scan, LZ4 table", "duckdb: full scan into Arrow", ratio="time").evaluate(sc)]
    out["scan"] = {"results": sc, "comparisons": scmp, "lz4_table_bytes": lz4.get("bytes", 0)}
    md += ["#### Warm full scan, all columns", "",
           f"Shale's table stores {H.mb(imp['shale: import'][0].get('bytes', 0))} MB of data files (ZSTD level 1, the default); "
           f"the LZ4 table (`shale.write.compression = lz4`) {H.mb(lz4.get('bytes', 0))} MB.", "",
           H.table(VHEADER, rows_of(sc, list(sc))), "", H.table(HEADER, H.comparison_rows(scmp)), ""]

    H.log(f"scan: origin = 'SEA' without an index, {args.reps} rounds of 4")
    sea = "origin = 'SEA'"
    fl = H.interleave([H.Variant("shale: origin = 'SEA', no index", "shale", lambda rep: shale.call("query", filter=sea, mode="noindex")),
                       H.Variant("lance: origin = 'SEA', no index", "lance", lambda rep: lance.call("query", filter=sea, mode="noindex")),
                       H.Variant("shale: origin = 'SEA', first (new DB)", "shale", lambda rep: shale.call("query", filter=sea, mode="noindex", cold=True)),
                       H.Variant("lance: origin = 'SEA', first (new dataset)", "lance", lambda rep: lance.call("query", filter=sea, mode="noindex", cold=True))],
                      args.reps, check=_same_rows("filter"))
    fcmp = [H.Comparison("origin = 'SEA' (no index), warm: Shale vs Lance", "shale: origin = 'SEA', no index", "lance: origin = 'SEA', no index", 1.0, ratio="time").evaluate(fl),
            H.Comparison("origin = 'SEA' (no index), first: Shale vs Lance", "shale: origin = 'SEA', first (new DB)", "lance: origin = 'SEA', first (new dataset)", 1.0, ratio="time").evaluate(fl)]
    out["filter"] = {"results": fl, "comparisons": fcmp}
    md += ["#### `origin = 'SEA'` without an index", "", H.table(VHEADER, rows_of(fl, list(fl))), "", H.table(HEADER, H.comparison_rows(fcmp)), ""]

    keys = lookup_keys(args.data, args.rows, args.lookup_keys)
    H.log(f"scan: random-key lookups without an index, {args.lookup_reps} rounds of 3")

    def lk(w, name, **kw):
        return H.Variant(name, name.split(":")[0], lambda rep: w.call("query", filter=keys[rep % len(keys)], mode="noindex", **kw))
    lu = H.interleave([lk(shale, "shale: lookup, no index"), lk(lance, "lance: lookup, no index"), lk(duck, "duckdb: lookup")],
                      args.lookup_reps, check=_same_rows_per_rep("lookup"))
    lcmp = [H.Comparison("random-key lookup (no index): Shale vs Lance", "shale: lookup, no index", "lance: lookup, no index", ratio="time").evaluate(lu),
            H.Comparison("random-key lookup (no index): Shale vs DuckDB", "shale: lookup, no index", "duckdb: lookup", ratio="time").evaluate(lu)]
    out["lookup"] = {"results": lu, "comparisons": lcmp, "keys": keys}
    md += ["#### Random-key lookup without an index", "",
           f"`{keys[0]}` and {len(keys) - 1} more keys like it (repetition *i* of every system looks up key *i*); rows: median over the keys.", "",
           H.table(VHEADER, rows_of(lu, list(lu))), "", H.table(HEADER, H.comparison_rows(lcmp)), ""]
    return "\n".join(md), out


def lookup_keys(data, rows, k, seed=13):
    """k filters delay = X AND distance = Y, each the values of one row drawn with seed."""
    import random
    import pyarrow.parquet as pq
    t = pq.read_table(data, columns=["delay", "distance"])
    n = min(rows, t.num_rows) if rows else t.num_rows
    rng = random.Random(seed)
    out = []
    for _ in range(k):
        i = rng.randrange(n)
        out.append(f"delay = {t['delay'][i].as_py()} AND distance = {t['distance'][i].as_py()}")
    return out


def _same_rows_per_rep(label):
    """Every variant of repetition i (the same key) returns the same rows."""
    seen = {}
    calls = {}

    def check(name, r):
        i = calls.get(name, 0)
        calls[name] = i + 1
        want = seen.setdefault(i, r["rows"])
        if r["rows"] != want:
            raise RuntimeError(f"{label}: {name} returned {r['rows']} rows for its call {i + 1}, another variant {want}")
    return check


def _same_rows(label):
    seen = {}

    def check(name, r):
        want = seen.setdefault("rows", r["rows"])
        if r["rows"] != want:
            raise RuntimeError(f"{label}: {name} returned {r['rows']} rows, another variant {want}")
    return check
