"""Interleaved pairs, ratios and Markdown tables for the peer harness.

A suite defines variants (one timed operation of one system's worker) and comparisons
between two variants. interleave() runs every variant once per repetition, after warm-up
runs, rotating the order each repetition (A B C, B C A, ...), so in repetition i every
variant ran within seconds of the others under the same machine load; a comparison pairs
repetition i of A with repetition i of B and reports min / median / max of the ratios.
"""

import statistics
import sys


class Variant:
    """One timed operation: run(rep) returns the worker's result (with wall_s)."""

    def __init__(self, name, system, run):
        self.name, self.system, self.run = name, system, run


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def interleave(variants, reps, warmup=1, check=None):
    """Runs warmup untimed rounds, then reps rounds; returns {name: [result per rep]}.

    check(name, result), when given, is called on every result (warm-ups included) and
    raises to stop the suite (for instance when row counts differ between systems)."""
    out = {v.name: [] for v in variants}
    for w in range(warmup):
        for v in variants:
            r = v.run(-1 - w)
            if check:
                check(v.name, r)
    for rep in range(reps):
        k = rep % len(variants)
        for v in variants[k:] + variants[:k]:
            r = v.run(rep)
            if check:
                check(v.name, r)
            out[v.name].append(r)
        log(f"  rep {rep + 1}/{reps}: " + ", ".join(f"{v.name} {out[v.name][-1]['wall_s'] * 1e3:.1f} ms" for v in variants))
    return out


def speedups(a, b, key="wall_s"):
    """Per-repetition b[key] / a[key]: how many times faster A was than B (> 1: A faster)."""
    return [y[key] / x[key] for x, y in zip(a, b) if x[key] > 0 and y[key] > 0]


def summary(xs):
    if not xs:
        return None
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def median(xs):
    return statistics.median(xs) if xs else None


class Comparison:
    """A against B, paired by repetition. ratio="speedup": B's time / A's time (A's
    speed-up, higher is better; a target is a minimum); ratio="time": A's time / B's time
    (as issue 13 quotes Shale / peer, lower is better; a target is a maximum)."""

    def __init__(self, name, a, b, target=None, note="", ratio="speedup"):
        if ratio not in ("speedup", "time"):
            raise ValueError(f"ratio {ratio!r}")
        self.name, self.a, self.b, self.target, self.note, self.ratio = name, a, b, target, note, ratio

    def evaluate(self, results):
        x, y = (self.a, self.b) if self.ratio == "speedup" else (self.b, self.a)
        s = summary(speedups(results[x], results[y]))
        cpu = summary(speedups(results[x], results[y], key="cpu_s"))
        met = None
        if self.target is not None and s is not None:
            met = s["median"] >= self.target if self.ratio == "speedup" else s["median"] <= self.target
        return {"name": self.name, "a": self.a, "b": self.b, "target": self.target, "met": met, "ratio": self.ratio,
                "speedup": s, "cpu": cpu, "note": self.note,
                "a_median_s": median([r["wall_s"] for r in results[self.a]]),
                "b_median_s": median([r["wall_s"] for r in results[self.b]])}


def fmt_ms(s):
    if s is None:
        return "–"
    ms = s * 1e3
    if ms >= 100:
        return f"{ms:,.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"


def fmt_x(x):
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:,.0f}×"
    if x >= 10:
        return f"{x:.1f}×"
    return f"{x:.2f}×"


def comparison_rows(evals):
    rows = []
    for e in evals:
        s = e["speedup"]
        met = "" if e["met"] is None else ("yes" if e["met"] else "**no**")
        sign = "≤" if e.get("ratio") == "time" else "≥"
        target = "" if e["target"] is None else f"{sign} {fmt_x(e['target'])}"
        rng = "–" if s is None else f"{fmt_x(s['min'])} / **{fmt_x(s['median'])}** / {fmt_x(s['max'])}"
        cpu = "–" if not e.get("cpu") else fmt_x(e["cpu"]["median"])
        rows.append([e["name"], fmt_ms(e["a_median_s"]), fmt_ms(e["b_median_s"]), rng, cpu, target, met])
    return rows


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


def mb(n):
    if not n:
        return "–"
    if n < 1e5:
        return f"{n / 1e6:.3f}"
    return f"{n / 1e6:,.0f}" if n >= 1e8 else f"{n / 1e6:.1f}"


def update_results(path, suite, markdown):
    """Replaces the block between this suite's markers in path (appending it when absent)."""
    begin, end = f"<!-- peers:{suite} begin (written by benchmarks/peers/run.sh) -->", f"<!-- peers:{suite} end -->"
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = "# Benchmark results\n"
    block = f"{begin}\n{markdown.rstrip()}\n{end}"
    i, j = text.find(begin), text.find(end)
    if i >= 0 and j > i:
        text = text[:i] + block + text[j + len(end):]
    else:
        text = text.rstrip() + f"\n\n## Peer harness: {suite}\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)
