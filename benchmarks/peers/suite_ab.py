"""Before/after: this build of Shale against a baseline build of Shale (issue 13's data
path work), in one run, as interleaved pairs like every other suite. The baseline is a
shalepeer binary built from another commit and passed with --shale-base BIN (for example
`git worktree add /tmp/base main && (cd /tmp/base && go build -o /tmp/shalepeer-base
./benchmarks/peers/shalepeer)`); each build prepares its own copy of the data, so a scan
reads the files its own build wrote.

  import   3,000,000 rows from Parquet into a new table (as the scan suite's import)
  scan     warm full scan, all columns
  filter   origin = 'SEA' without an index (statistics pruning only)
  day      a one-day date range without an index (statistics leave 2 batches)
  needle   origin = 'SEA' AND delay > 600, without an index (few batches have a match)
Ratios are this build's time / the baseline's (lower is better), wall and CPU.
"""

import harness as H
import suite_scan

DAY = "date >= TIMESTAMP '2001-04-02 00:00:00' AND date < TIMESTAMP '2001-04-03 00:00:00'"
CASES = [
    ("warm full scan", "", "planner"),
    ("origin = 'SEA', no index", "origin = 'SEA'", "noindex"),
    ("one-day range, no index", DAY, "noindex"),
    ("origin = 'SEA' AND delay > 600, no index", "origin = 'SEA' AND delay > 600", "noindex"),
]


def run(ctx):
    if "shale-base" not in ctx.workers:
        raise RuntimeError("suite ab needs --shale-base BIN (a shalepeer built from the baseline commit)")
    new, base = ctx.workers["shale"], ctx.workers["shale-base"]
    args = ctx.args
    md = []
    out = {}
    hb = ctx.hello.get("shale-base", {})
    md += [f"This build: commit {ctx.hello['shale'].get('commit', '?')[:12]}{' (modified)' if ctx.hello['shale'].get('modified') else ''}; "
           f"baseline: commit {hb.get('commit', '?')[:12]}{' (modified)' if hb.get('modified') else ''}. "
           f"Stored size of the prepared copy: this build {H.mb(ctx.prepared['shale'].get('bytes'))} MB, "
           f"baseline {H.mb(ctx.prepared['shale-base'].get('bytes'))} MB.", ""]

    def importer(w, name):
        def go(rep):
            table = f"ab{rep + 10}"
            r = w.call("import", data=args.data, table=table)
            w.call("drop_table", table=table)
            return r
        return H.Variant(name, name, go)

    H.log(f"ab: import, {args.import_reps} rounds of 2")
    imp = H.interleave([importer(new, "this build: import"), importer(base, "baseline: import")], args.import_reps, warmup=1,
                       check=suite_scan._same_rows("import"))
    cmp_ = [H.Comparison("import: this build vs baseline", "this build: import", "baseline: import", ratio="time").evaluate(imp)]
    out["import"] = {"results": imp, "comparisons": cmp_}
    md += ["#### Import 3M rows from Parquet", "", H.table(suite_scan.VHEADER, suite_scan.rows_of(imp, list(imp))), "",
           H.table(suite_scan.HEADER, H.comparison_rows(cmp_)), ""]

    for label, flt, mode in CASES:
        H.log(f"ab: {label}, {args.reps} rounds of 2")
        a, b = f"this build: {label}", f"baseline: {label}"
        res = H.interleave([H.Variant(a, "shale", lambda rep, f=flt, m=mode: new.call("query", filter=f, mode=m)),
                            H.Variant(b, "shale-base", lambda rep, f=flt, m=mode: base.call("query", filter=f, mode=m))],
                           args.reps, check=suite_scan._same_rows(label))
        c = [H.Comparison(f"{label}: this build vs baseline", a, b, ratio="time").evaluate(res)]
        out[label] = {"results": res, "comparisons": c}
        md += [f"#### {label}", "", f"`{flt or '(all rows)'}`", "", H.table(suite_scan.VHEADER, suite_scan.rows_of(res, list(res))), "",
               H.table(suite_scan.HEADER, H.comparison_rows(c)), ""]
    return "\n".join(md), out
