"""Issue 10's index benchmarks: Shale's BTree and ZoneMap against Lance's, side by side.

On one copy of the data per system (prepared by the driver):
  build    BTree on date, BTree on origin (each system replaces its index every repetition)
  queries  a one-day date range, origin = 'SEA', and both together, in six variants:
           Shale's planner, Shale with ScanOptions.ForceIndexes, Shale without indexes
           (statistics pruning only), Shale's full scan (no index, no statistics), Lance
           with its BTree, Lance without it
  lookups  date = <one row's timestamp>, warm (index cached) and cold (a fresh DB or
           dataset, opened untimed): time, and Shale's store requests per lookup
  zonemap  ZoneMap on delay (both systems), then delay > 60 in the six variants; the zones
           Shale's zone map skips
Every variant of a query must return the same row count, or the suite stops.
"""

import datetime as dt

import harness as H

SHALE_MODES = [("planner", "shale: index (planner)"), ("force", "shale: index (forced)"),
               ("noindex", "shale: no index (statistics)"), ("fullscan", "shale: full scan")]
LANCE_MODES = [("index", "lance: index"), ("noindex", "lance: no index")]


def ts(v):
    return f"TIMESTAMP '{v.strftime('%Y-%m-%d %H:%M:%S.%f').rstrip('0').rstrip('.')}'"


def pick_keys(data, rows, k):
    """The day of the middle row and the timestamps of k rows spread over the data."""
    import pyarrow.parquet as pq
    col = pq.read_table(data, columns=["date"])["date"]
    n = min(rows, len(col)) if rows else len(col)
    mid = col[n // 2].as_py()
    keys = [col[(2 * i + 1) * n // (2 * k)].as_py() for i in range(k)]
    return mid.replace(hour=0, minute=0, second=0, microsecond=0), keys


def query_variants(shale, lance, filt, cold=False, shale_modes=SHALE_MODES, lance_modes=LANCE_MODES, keys=None):
    """Variants of one query; with keys, repetition i queries keys[i % len(keys)] (filt is
    then a function of the key)."""
    def f(rep):
        return filt(keys[rep % len(keys)]) if keys else filt

    vs = []
    for mode, name in shale_modes:
        vs.append(H.Variant(name, "shale", lambda rep, mode=mode: shale.call("query", filter=f(rep), mode=mode, cold=cold)))
    for mode, name in lance_modes:
        vs.append(H.Variant(name, "lance", lambda rep, mode=mode: lance.call("query", filter=f(rep), mode=mode, cold=cold)))
    return vs


def same_rows(label):
    seen = {}

    def check(name, r):
        want = seen.setdefault("rows", r["rows"])
        if r["rows"] != want:
            raise RuntimeError(f"{label}: {name} returned {r['rows']} rows, another variant {want}")
    return check


def plan_note(r):
    """A short account of a Shale plan: batches read and what each index did."""
    p = r.get("plan")
    if not p:
        return ""
    parts = [f"{p['batches_read']}/{p['batches']} batches"]
    for u in p.get("indexes") or []:
        if u["used"]:
            if u["kind"] == "btree":
                parts.append(f"{u['name']}: {u.get('pages_read', 0)} pages read, {u.get('pages_skipped', 0)} skipped")
            else:
                parts.append(f"{u['name']}: {u.get('zones_read', 0)} zones read, {u.get('zones_skipped', 0)} skipped")
        else:
            parts.append(f"{u['name']} not used ({u.get('reason', '')})")
    return "; ".join(parts)


def variant_rows(results, order):
    rows = []
    for name in order:
        rs = results[name]
        w = [r["wall_s"] for r in rs]
        req = H.median([r["requests_total"] for r in rs]) if "requests_total" in rs[0] else None
        rows.append([name, f"{rs[0]['rows']:,}", H.fmt_ms(H.median(w)), H.fmt_ms(min(w)), H.fmt_ms(max(w)),
                     H.fmt_ms(H.median([r["cpu_s"] for r in rs])), H.mb(max(r["rss_peak_bytes"] for r in rs)),
                     "–" if req is None else f"{req:g}", plan_note(rs[0])])
    return rows


VARIANT_HEADER = ["variant", "rows", "median ms", "min ms", "max ms", "CPU median ms", "peak RSS MB", "store requests", "plan (Shale, first rep)"]
COMPARISON_HEADER = ["comparison (A vs B)", "A median ms", "B median ms", "A's speed-up min / **median** / max", "same with CPU times (median)", "target (on wall)", "met"]


def query_comparisons(label, target_scan=None, target_lance=None):
    return [
        H.Comparison(f"{label}: Shale index (forced) vs Shale full scan", "shale: index (forced)", "shale: full scan", target_scan),
        H.Comparison(f"{label}: Shale planner vs Shale full scan", "shale: index (planner)", "shale: full scan", target_scan),
        H.Comparison(f"{label}: Shale planner vs Shale without index (statistics)", "shale: index (planner)", "shale: no index (statistics)"),
        H.Comparison(f"{label}: Shale planner vs Lance index", "shale: index (planner)", "lance: index", target_lance),
        H.Comparison(f"{label}: Shale index (forced) vs Lance index", "shale: index (forced)", "lance: index", target_lance),
        H.Comparison(f"{label}: Lance index vs Lance without index", "lance: index", "lance: no index"),
        H.Comparison(f"{label}: Shale without index (statistics) vs Lance without index", "shale: no index (statistics)", "lance: no index"),
    ]


def run(ctx):
    shale, lance, args = ctx.workers["shale"], ctx.workers["lance"], ctx.args
    reps, build_reps, lookup_reps = args.reps, args.build_reps, args.lookup_reps
    day, keys = pick_keys(args.data, args.rows, args.lookup_keys)
    day_filter = f"date >= {ts(day)} AND date < {ts(day + dt.timedelta(days=1))}"
    queries = [("one-day date range", day_filter, 50.0, 1.0),
               ("origin = 'SEA'", "origin = 'SEA'", 50.0, 1.0),
               ("date range AND origin = 'SEA'", f"{day_filter} AND origin = 'SEA'", None, None)]
    out = {"day": str(day.date()), "filters": {q[0]: q[1] for q in queries}, "sections": []}
    md = []

    # Builds.
    builds = {}
    for col in ("date", "origin"):
        H.log(f"index: BTree build on {col}, {build_reps} pairs")
        vs = [H.Variant(f"shale: BTree build on {col}", "shale", lambda rep, col=col: shale.call("create_index", column=col, kind="btree", name=f"{col}_idx")),
              H.Variant(f"lance: BTree build on {col}", "lance", lambda rep, col=col: lance.call("create_index", column=col, kind="btree", name=f"{col}_idx"))]
        builds.update(H.interleave(vs, build_reps, warmup=0))
    build_cmp = [H.Comparison(f"BTree build on {c}: Shale vs Lance", f"shale: BTree build on {c}", f"lance: BTree build on {c}").evaluate(builds) for c in ("date", "origin")]
    out["builds"] = {"results": builds, "comparisons": build_cmp}
    rows = []
    for name, rs in builds.items():
        w = H.median([r["wall_s"] for r in rs])
        n = rs[0]["rows_indexed"]
        size = rs[0].get("index_bytes") or rs[0].get("index_bytes_added")
        rows.append([name, f"{n:,}", H.fmt_ms(w), f"{n / w / 1e6:.2f}" if w else "–", H.mb(size) if size else "–",
                     H.mb(max(r["rss_peak_bytes"] for r in rs))])
    md += ["#### Index builds", "", H.table(["variant", "rows", "median ms", "M rows/s (median)", "index MB", "peak RSS MB"], rows), "",
           H.table(COMPARISON_HEADER, H.comparison_rows(build_cmp)), ""]

    # Queries with BTrees.
    for label, filt, target_scan, target_lance in queries:
        H.log(f"index: {label}: {reps} rounds of 6 variants")
        res = H.interleave(query_variants(shale, lance, filt), reps, check=same_rows(label))
        cmps = [c.evaluate(res) for c in query_comparisons(label, target_scan, target_lance)]
        out["sections"].append({"query": label, "filter": filt, "results": res, "comparisons": cmps})
        md += [f"#### {label}", "", f"`{filt}`", "",
               H.table(VARIANT_HEADER, variant_rows(res, [n for _, n in SHALE_MODES + LANCE_MODES])), "",
               H.table(COMPARISON_HEADER, H.comparison_rows(cmps)), ""]

    # Point lookups.
    key_filter = lambda k: f"date = {ts(k)}"
    look = {}
    for cold in (False, True):
        tag = "cold" if cold else "warm"
        H.log(f"index: point lookups ({tag}), {lookup_reps} rounds")
        sm = [("planner", f"shale: lookup {tag} (planner)"), ("force", f"shale: lookup {tag} (forced)")]
        lm = [("index", f"lance: lookup {tag} (index)")]
        res = H.interleave(query_variants(shale, lance, key_filter, cold=cold, shale_modes=sm, lance_modes=lm, keys=keys), lookup_reps)
        # Row counts differ by key: compare them within each repetition.
        for i in range(lookup_reps):
            counts = {n: rs[i]["rows"] for n, rs in res.items()}
            if len(set(counts.values())) != 1:
                raise RuntimeError(f"lookup {tag} rep {i}: row counts differ: {counts}")
        look.update(res)
    lance_io = {}
    for cold in (False, True):
        a = lance.call("analyze", filter=key_filter(keys[0]), mode="index", cold=cold)
        lance_io["cold" if cold else "warm"] = {k: a[k] for k in ("iops", "requests", "bytes_read")}
    look_cmp = [H.Comparison(f"lookup {t}: Shale {m} vs Lance index", f"shale: lookup {t} ({m})", f"lance: lookup {t} (index)").evaluate(look)
                for t in ("warm", "cold") for m in ("planner", "forced")]
    out["lookups"] = {"keys": [str(k) for k in keys], "results": look, "comparisons": look_cmp, "lance_analyze": lance_io}
    rows = []
    for name, rs in look.items():
        w = [r["wall_s"] for r in rs]
        if name.startswith("shale"):
            req = [r["requests_total"] for r in rs]
            kinds = " ".join(f"{k}={v}" for k, v in sorted(rs[0]["requests"].items()))
            open_req = rs[0].get("open_requests")
            reqs = f"{H.median(req):g} (min {min(req)}, max {max(req)}; first: {kinds})"
            if open_req:
                reqs += f"; open before it (untimed): {' '.join(f'{k}={v}' for k, v in sorted(open_req.items()))}"
        else:
            t = "cold" if "cold" in name else "warm"
            io = lance_io[t]
            reqs = f"analyze_plan: iops={io['iops']} requests={io['requests']} (key 1)"
        rows.append([name, f"{H.median([r['rows'] for r in rs]):g}", H.fmt_ms(H.median(w)), H.fmt_ms(min(w)), H.fmt_ms(max(w)), reqs,
                     plan_note(rs[0])])
    md += ["#### Point lookups", "",
           f"`date = TIMESTAMP '…'` for {len(keys)} timestamps of rows spread over the data, one per repetition, "
           f"{lookup_reps} repetitions; cold = a new DB (Shale) or `lance.dataset()` (Lance) opened untimed before the lookup.", "",
           H.table(["variant", "rows (median)", "median ms", "min ms", "max ms", "object requests per lookup (median)", "plan (Shale, first rep)"], rows), "",
           H.table(COMPARISON_HEADER, H.comparison_rows(look_cmp)), ""]

    # Zone maps.
    H.log(f"index: ZoneMap build on delay, {build_reps} pairs")
    zb = H.interleave([H.Variant("shale: ZoneMap build on delay", "shale", lambda rep: shale.call("create_index", column="delay", kind="zonemap", name="delay_zm")),
                       H.Variant("lance: ZoneMap build on delay", "lance", lambda rep: lance.call("create_index", column="delay", kind="zonemap", name="delay_zm"))],
                      build_reps, warmup=0)
    zfilt = "delay > 60"
    H.log(f"index: {zfilt}: {reps} rounds of 6 variants")
    zres = H.interleave(query_variants(shale, lance, zfilt), reps, check=same_rows(zfilt))
    zcmp = [H.Comparison("ZoneMap build on delay: Shale vs Lance", "shale: ZoneMap build on delay", "lance: ZoneMap build on delay").evaluate(zb)]
    zcmp += [c.evaluate(zres) for c in query_comparisons(zfilt)]
    zuse = [u for u in zres["shale: index (forced)"][0]["plan"]["indexes"] if u["kind"] == "zonemap"]
    out["zonemap"] = {"builds": zb, "results": zres, "comparisons": zcmp, "zones": zuse}
    zones = "; ".join(f"{u['name']}: {u.get('zones_skipped', 0):,} of {u.get('zones_skipped', 0) + u.get('zones_read', 0):,} zones skipped, "
                      f"{u['candidates']:,} candidate rows" for u in zuse)
    md += ["#### ZoneMap: `delay > 60`", "", f"Zones skipped (Shale, forced): {zones}.", "",
           H.table(["variant", "median ms", "index MB"], [[n, H.fmt_ms(H.median([r["wall_s"] for r in rs])),
                                                           H.mb(rs[0].get("index_bytes") or rs[0].get("index_bytes_added"))] for n, rs in zb.items()]), "",
           H.table(VARIANT_HEADER, variant_rows(zres, [n for _, n in SHALE_MODES + LANCE_MODES])), "",
           H.table(COMPARISON_HEADER, H.comparison_rows(zcmp)), ""]
    return "\n".join(md), out
