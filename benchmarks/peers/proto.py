"""The worker protocol of the peer harness, both sides.

A worker is a process that holds one system's copy of the data and times operations on it
in-process. The driver writes one JSON object per line to its stdin, {"op": NAME, "args":
{...}}, and reads one per line from its stdout: {"ok": true, "result": {...}} or {"ok":
false, "error": TEXT}. {"op": "quit"} ends it. Workers log to stderr.

Every timed result carries wall_s, cpu_s (the worker process's user + system CPU time, all
threads) and rss_peak_bytes (the process's peak resident set during the operation, on Linux
VmHWM after a reset through /proc/self/clear_refs). Shale's worker is the Go program in
shalepeer/; Python workers (lance_worker.py) use serve() and measure() below.
"""

import gc
import json
import os
import resource
import subprocess
import sys
import time


class WorkerError(RuntimeError):
    """An operation failed in a worker (its message is the worker's error)."""


class Worker:
    """The driver's handle on one worker process."""

    def __init__(self, name, argv, env=None):
        self.name = name
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
            text=True, bufsize=1, env=env)

    def call(self, op, **args):
        """Runs op with args and returns its result (a dict); raises WorkerError."""
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"{self.name}: worker exited (code {self.proc.wait()}) during {op}")
        rep = json.loads(line)
        if not rep.get("ok"):
            raise WorkerError(f"{self.name}: {op} {json.dumps(args)}: {rep.get('error')}")
        return rep.get("result") or {}

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.stdout.readline()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- worker side -------------------------------------------------------------------------


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(step):
    """Runs step() after a GC with the peak RSS reset; returns (its value, timings)."""
    gc.collect()
    reset_peak_rss()
    c0, t0 = time.process_time(), time.perf_counter()
    value = step()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return value, {"wall_s": wall, "cpu_s": cpu, "rss_peak_bytes": peak_rss()}


def serve(handlers):
    """Answers requests on stdin with handlers[op](**args) until quit or end of input."""
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            rep = {"ok": False, "error": f"bad request {line!r}: {e}"}
        else:
            op = req.get("op")
            if op == "quit":
                out.write(json.dumps({"ok": True}) + "\n")
                out.flush()
                return
            h = handlers.get(op)
            if h is None:
                rep = {"ok": False, "error": f"unknown op {op!r} (want {', '.join(sorted(handlers))}, quit)"}
            else:
                try:
                    rep = {"ok": True, "result": h(**(req.get("args") or {}))}
                except Exception as e:  # the driver reports it; the worker goes on
                    rep = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(rep) + "\n")
        out.flush()


def pid():
    return os.getpid()
