"""Issue 13's commit-path comparisons: small appends, opening a long history, and writer
processes, Shale against Lance (and Delta Lake for appends).

  appends  a new table per repetition, then 100 appends of the same 100 rows (the first
           rows of the data); commits 11-100 are timed (Shale: Table.AppendRecord, which
           fsyncs every object and publishes to etcd; Lance: write_dataset(mode="append")
           on the dataset the last one returned; Delta: write_deltalake(mode="append"))
  open     a table of 1,000 such appends (1,000 fragments), built once per system
           (untimed), then opened: Shale DB.OpenTable through the worker's DB (warm: its
           manifest cache) and through a new DB (cold); Lance lance.dataset() with a fresh
           session (the default) and with one Session reused across opens
  writers  4 writer processes x 50 appends of 100 rows each to a new table, released
           together: commits/s from the first writer's start to the last one's end, and
           every commit accounted for (table version = create + 200, rows = 20,000);
           then the same at --writer-procs (1, 2, 4, 8 by default) for the scaling table
Ratios: appends and opens are Shale's time / the peer's (lower is better); writers are
Shale's commits/s / the peer's (higher is better), as issue 13 quotes them.
"""

import harness as H

THEADER = ["comparison (A vs B)", "A median ms", "B median ms", "A ÷ B time, min / **median** / max (lower: A faster)", "same with CPU times (median)", "target (on wall)", "met"]
SHEADER = ["comparison (A vs B)", "A median ms", "B median ms", "A's commits/s ÷ B's, min / **median** / max", "same with CPU times (median)", "target (on wall)", "met"]


def run(ctx):
    shale, lance, delta = ctx.workers["shale"], ctx.workers["lance"], ctx.workers["delta"]
    args = ctx.args
    md, out = [], {}

    def appender(w, name):
        def run(rep):
            table = f"app{rep + 10}"
            r = w.call("appends", data=args.data, table=table, rows_per_commit=100, commits=100, skip=10)
            w.call("drop_table", table=table)
            return r
        return H.Variant(name, name.split(":")[0], run)

    H.log(f"commit: 100-row appends, {args.commit_reps} rounds of 3")
    ap = H.interleave([appender(shale, "shale: 100-row appends"), appender(lance, "lance: 100-row appends"), appender(delta, "delta: 100-row appends")],
                      args.commit_reps, warmup=1, check=_rows(10000))
    acmp = [H.Comparison("commits 11-100: Shale vs Lance", "shale: 100-row appends", "lance: 100-row appends", 1.0, ratio="time").evaluate(ap),
            H.Comparison("commits 11-100: Shale vs Delta", "shale: 100-row appends", "delta: 100-row appends", ratio="time").evaluate(ap)]
    out["appends"] = {"results": ap, "comparisons": acmp}
    md += ["#### 100-row appends, commits 11-100", "", H.table(AHEADER, append_rows(ap)), "", H.table(THEADER, H.comparison_rows(acmp)), ""]

    H.log("commit: building 1,000-version tables (untimed by the comparison)")
    hs = shale.call("history", data=args.data, table="hist", rows_per_commit=100, commits=args.versions)
    hl = lance.call("history", data=args.data, table="hist", rows_per_commit=100, commits=args.versions)
    H.log(f"  shale {hs['wall_s']:.1f} s (version {hs['version']}, {hs['fragments']} fragments, manifest {hs['manifest_bytes']:,} B); "
          f"lance {hl['wall_s']:.1f} s (version {hl['version']}, {hl['fragments']} fragments)")
    if hs["fragments"] != hl["fragments"] or hs["rows"] != hl["rows"]:
        raise RuntimeError(f"history: the tables differ: shale {hs}, lance {hl}")
    H.log(f"commit: open at {args.versions:,} versions, {args.open_reps} rounds of 4")
    op = H.interleave([H.Variant("shale: open (warm DB)", "shale", lambda rep: shale.call("open", table="hist")),
                       H.Variant("shale: open (new DB)", "shale", lambda rep: shale.call("open", table="hist", cold=True)),
                       H.Variant("lance: open (fresh session)", "lance", lambda rep: lance.call("open", table="hist")),
                       H.Variant("lance: open (shared session)", "lance", lambda rep: lance.call("open", table="hist", session=True))],
                      args.open_reps, check=_rows(hs["rows"]))
    ocmp = [H.Comparison(f"open at {args.versions:,} versions: Shale (warm DB) vs Lance (shared session)", "shale: open (warm DB)", "lance: open (shared session)", 1.0, ratio="time").evaluate(op),
            H.Comparison(f"open at {args.versions:,} versions: Shale (new DB) vs Lance (fresh session)", "shale: open (new DB)", "lance: open (fresh session)", 1.0, ratio="time").evaluate(op)]
    out["open"] = {"results": op, "comparisons": ocmp, "history": {"shale": hs, "lance": hl}}
    md += [f"#### Open at {args.versions:,} versions", "",
           f"Tables of {hs['fragments']:,} appends of 100 rows: Shale version {hs['version']:,} (manifest {hs['manifest_bytes']:,} bytes, built in {hs['wall_s']:.1f} s), "
           f"Lance version {hl['version']:,} (built in {hl['wall_s']:.1f} s).", "",
           H.table(OHEADER, open_rows(op)), "", H.table(THEADER, H.comparison_rows(ocmp)), ""]

    procs = [int(p) for p in args.writer_procs.split(",") if p.strip()]
    H.log(f"commit: writer processes x {args.writer_commits} appends at {procs}, {args.writer_reps} rounds")
    variants = []
    for n in procs:
        for w, sys_ in ((shale, "shale"), (lance, "lance")):
            def run(rep, w=w, n=n, sys_=sys_):
                table = f"w{n}x{rep + 10}"
                r = w.call("writers", data=args.data, table=table, procs=n, commits_per_proc=args.writer_commits, rows_per_commit=100)
                w.call("drop_table", table=table)
                return r
            variants.append(H.Variant(f"{sys_}: {n} writers", sys_, run))
    wr = H.interleave(variants, args.writer_reps, warmup=0)
    wcmp = [H.Comparison(f"{n} writer processes x {args.writer_commits}: Shale vs Lance", f"shale: {n} writers", f"lance: {n} writers",
                         1.0 if n == 4 else None).evaluate(wr) for n in procs]
    out["writers"] = {"results": wr, "comparisons": wcmp}
    md += [f"#### Writer processes x {args.writer_commits} appends of 100 rows", "",
           H.table(WHEADER, writer_rows(wr, procs)), "", H.table(SHEADER, H.comparison_rows(wcmp)), ""]
    return "\n".join(md), out


AHEADER = ["variant", "rows after", "commits 11-100 median ms", "min ms", "max ms", "per commit median ms", "CPU median ms", "peak RSS MB", "store requests per commit"]


def append_rows(res):
    out = []
    for name, rs in res.items():
        w = [r["wall_s"] for r in rs]
        per = H.median([r["median_s"] for r in rs])
        reqs = "–"
        if rs[0].get("requests"):
            tot = {}
            for r in rs:
                for k, v in r["requests"].items():
                    tot[k] = tot.get(k, 0) + v
            n = sum(r["commits"] for r in rs)
            reqs = " ".join(f"{k}={v / n:.2f}" for k, v in sorted(tot.items()))
        out.append([name, f"{rs[0]['rows']:,}", H.fmt_ms(H.median(w)), H.fmt_ms(min(w)), H.fmt_ms(max(w)), H.fmt_ms(per),
                    H.fmt_ms(H.median([r["cpu_s"] for r in rs])), H.mb(max(r["rss_peak_bytes"] for r in rs)), reqs])
    return out


OHEADER = ["variant", "version", "fragments", "median ms", "min ms", "max ms", "CPU median ms", "peak RSS MB", "store requests"]


def open_rows(res):
    out = []
    for name, rs in res.items():
        w = [r["wall_s"] for r in rs]
        reqs = "–"
        if rs[0].get("requests") is not None:
            reqs = " ".join(f"{k}={v}" for k, v in sorted(rs[-1]["requests"].items())) or "none"
        out.append([name, f"{rs[0]['version']:,}", f"{rs[0]['fragments']:,}", H.fmt_ms(H.median(w)), H.fmt_ms(min(w)), H.fmt_ms(max(w)),
                    H.fmt_ms(H.median([r["cpu_s"] for r in rs])), H.mb(max(r["rss_peak_bytes"] for r in rs)), reqs])
    return out


WHEADER = ["variant", "commits", "commits/s median", "per repetition", "attempts per commit", "p50 ms", "p99 ms", "max ms", "commits per writer (median rep)", "largest writer's peak RSS MB"]


def writer_rows(res, procs):
    out = []
    for n in procs:
        for s in ("shale", "lance"):
            rs = res[f"{s}: {n} writers"]
            cps = [r["commits_per_s"] for r in rs]
            mid = sorted(rs, key=lambda r: r["commits_per_s"])[len(rs) // 2]
            att = sum(r.get("attempts", 0) for r in rs) / sum(r["commits"] for r in rs) if "attempts" in rs[0] else None
            out.append([f"{s}: {n} writers", f"{rs[0]['commits']} (version {rs[0]['version']} = {rs[0]['expected_version']})",
                        f"{H.median(cps):.1f}", " ".join(f"{x:.0f}" for x in cps), "–" if att is None else f"{att:.2f}",
                        H.fmt_ms(mid["p50_s"]), H.fmt_ms(mid["p99_s"]), H.fmt_ms(mid["max_s"]), " ".join(str(x) for x in mid["per_writer"]),
                        H.mb(max(r["rss_peak_bytes"] for r in rs))])
    return out


def _rows(want):
    def check(name, r):
        if r["rows"] != want:
            raise RuntimeError(f"{name}: {r['rows']} rows, want {want}")
    return check
