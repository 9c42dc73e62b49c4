"""The first of issue 13's comparisons (the rest are to be added as more cases): Shale
against Lance and against pyarrow writing and reading the same Arrow IPC + ZSTD bytes.

  import   3,000,000 rows from Parquet into a new table: Shale (`shale import`'s path:
           pqarrow streaming into Table.Append), Lance (pq.read_table + write_dataset),
           pyarrow (pq.read_table + Arrow IPC files of Shale's shape: 1,048,576 rows per file,
           65,536 per batch, ZSTD); each copy is deleted, untimed, after its repetition
  scan     warm full scan, all columns: Shale Table.Scan, Lance to_table(), pyarrow reading
           every batch of Shale's own data files (the same bytes)
  filter   origin = 'SEA' without any index: Shale (statistics pruning, which cannot prune
           it), Lance (use_scalar_index=False)
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
        out.append([name, f"{rs[0]['rows']:,}", H.fmt_ms(H.median(w)), H.fmt_ms(min(w)), H.fmt_ms(max(w)),
                    H.fmt_ms(H.median([r["cpu_s"] for r in rs])), H.mb(max(r["rss_peak_bytes"] for r in rs)), H.mb(extra) if extra else "–"])
    return out


VHEADER = ["variant", "rows", "median ms", "min ms", "max ms", "CPU median ms", "peak RSS MB", "stored MB"]


def run(ctx):
    shale, lance, arrow = ctx.workers["shale"], ctx.workers["lance"], ctx.workers["pyarrow"]
    args = ctx.args
    md, out = [], {}

    def importer(w, name):
        def run(rep):
            table = f"imp{rep + 10}"  # warm-ups are negative
            r = w.call("import", data=args.data, table=table)
            w.call("drop_table", table=table)
            return r
        return H.Variant(name, name.split(":")[0], run)

    H.log(f"scan: import from Parquet, {args.import_reps} rounds of 3")
    imp = H.interleave([importer(shale, "shale: import"), importer(lance, "lance: import"), importer(arrow, "pyarrow: IPC + ZSTD write")],
                       args.import_reps, warmup=0, check=_same_rows("import"))
    icmp = [H.Comparison("import: Shale vs Lance", "shale: import", "lance: import", 1.0, ratio="time").evaluate(imp),
            H.Comparison("import: Shale vs pyarrow writing the same IPC + ZSTD", "shale: import", "pyarrow: IPC + ZSTD write", 1.3, ratio="time").evaluate(imp)]
    out["import"] = {"results": imp, "comparisons": icmp}
    md += ["#### Import 3M rows from Parquet", "", H.table(VHEADER, rows_of(imp, list(imp))), "", H.table(HEADER, H.comparison_rows(icmp)), ""]

    files = shale.call("data_files")
    H.log(f"scan: warm full scan, {args.reps} rounds of 3")
    sc = H.interleave([H.Variant("shale: full scan", "shale", lambda rep: shale.call("query", filter="", mode="planner")),
                       H.Variant("lance: full scan", "lance", lambda rep: lance.call("query", filter="", mode="noindex")),
                       H.Variant("pyarrow: read the same IPC bytes", "pyarrow", lambda rep: arrow.call("scan", paths=files["paths"]))],
                      args.reps, check=_same_rows("scan"))
    scmp = [H.Comparison("warm full scan: Shale vs pyarrow reading the same bytes", "shale: full scan", "pyarrow: read the same IPC bytes", 1.0, ratio="time").evaluate(sc),
            H.Comparison("warm full scan: Shale vs Lance", "shale: full scan", "lance: full scan", ratio="time").evaluate(sc)]
    out["scan"] = {"results": sc, "comparisons": scmp}
    md += ["#### Warm full scan, all columns", "", H.table(VHEADER, rows_of(sc, list(sc))), "", H.table(HEADER, H.comparison_rows(scmp)), ""]

    H.log(f"scan: origin = 'SEA' without an index, {args.reps} rounds of 2")
    fl = H.interleave([H.Variant("shale: origin = 'SEA', no index", "shale", lambda rep: shale.call("query", filter="origin = 'SEA'", mode="noindex")),
                       H.Variant("lance: origin = 'SEA', no index", "lance", lambda rep: lance.call("query", filter="origin = 'SEA'", mode="noindex"))],
                      args.reps, check=_same_rows("filter"))
    fcmp = [H.Comparison("origin = 'SEA' (no index): Shale vs Lance", "shale: origin = 'SEA', no index", "lance: origin = 'SEA', no index", 1.0, ratio="time").evaluate(fl)]
    out["filter"] = {"results": fl, "comparisons": fcmp}
    md += ["#### `origin = 'SEA'` without an index", "", H.table(VHEADER, rows_of(fl, list(fl))), "", H.table(HEADER, H.comparison_rows(fcmp)), ""]
    md += ["Not yet in the harness (issue 13): DuckDB and Delta peers, random-key lookups without an index, 100-row appends, "
           "open at 1,000 versions, 4 writer processes."]
    return "\n".join(md), out


def _same_rows(label):
    seen = {}

    def check(name, r):
        want = seen.setdefault("rows", r["rows"])
        if r["rows"] != want:
            raise RuntimeError(f"{label}: {name} returned {r['rows']} rows, another variant {want}")
    return check
