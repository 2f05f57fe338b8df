#!/usr/bin/python3
"""The table of bench/compare_builds.sh: reads the raw outputs it left in one
directory (BENCH.SIDE.PAIR.txt, .json, .rc; BENCH.SIDE.missing) and prints,
per headline figure, the before and after medians, after/before, and the
min-max of each side.

    compare_builds.py OUT_DIR

Figures come from Google Benchmark's JSON where the bench is one (real time
of each benchmark and the counters named below) and from the summary lines
each bench prints otherwise. `better` says which way is good: a ratio above 1
is worse for a `lower` figure, better for a `higher` one.
"""
import json
import re
import statistics
import sys
from pathlib import Path

# Google Benchmark counters worth a line, per bench (the real time of every
# benchmark is always taken).
COUNTERS = {
    "env": ["env_ms"],
    "exec": ["round_trip_us", "spawn_ms", "verify_ms", "time_ms"],
    "stream": [],
    "pool": ["per_minute", "over_one_lane", "change_pct"],
}

NUM = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

# Summary lines: (bench, figure name, regex with one group per figure, unit, better).
# A regex with several groups lists several (name, unit, better) triples.
SUMMARY = {
    "env": [
        (r"env step wall\s+" + NUM + r" ms", [("summary: env step wall", "ms", "lower")]),
        (r"baseline: raw cache hit \+ executor\s+" + NUM + r" ms", [("summary: raw cache hit + executor", "ms", "lower")]),
        (r"env overhead \(wall - service waits\)\s+" + NUM + r" ms", [("summary: env overhead", "ms", "lower")]),
        (r"env bookkeeping inside the step \(env_ms\)\s+" + NUM + r" ms", [("summary: env_ms in step", "ms", "lower")]),
    ],
    "server": [
        (r"without flood:\s+(\d+) honest steps, p50 " + NUM + r" ms, p99 " + NUM + r" ms",
         [("quiet honest steps", "steps", "higher"), ("quiet p50", "ms", "lower"), ("quiet p99", "ms", "lower")]),
        (r"with flood:\s+(\d+) honest steps, p50 " + NUM + r" ms, p99 " + NUM + r" ms; (\d+) hostile messages \(" + NUM + r"/s\)",
         [("flood honest steps", "steps", "higher"), ("flood p50", "ms", "lower"), ("flood p99", "ms", "lower"),
          (None, None, None), ("hostile messages", "msg/s", "higher")]),
    ],
    "stream": [
        (r"baseline: raw ZeroMQ PUSH/PULL, no acks\s+" + NUM + r" traj/s", [("raw ZeroMQ baseline", "traj/s", "higher")]),
        (r"stream -> C\+\+ receiver, acked, Trajectory values\s+" + NUM + r" traj/s", [("C++ stream, Trajectory values", "traj/s", "higher")]),
        (r"stream -> C\+\+ receiver, acked, pre-encoded\s+" + NUM + r" traj/s", [("C++ stream, pre-encoded", "traj/s", "higher")]),
        (r"at full load .*send-to-ack p50 " + NUM + r" ms, p99 " + NUM + r" ms; write-to-ack p99 " + NUM + r" ms",
         [("full load send-to-ack p50", "ms", "lower"), ("full load send-to-ack p99", "ms", "lower"),
          ("full load write-to-ack p99", "ms", "lower")]),
        (r"CPU per trajectory.*?: " + NUM + r" us \(pre-encoded " + NUM + r" us\), baseline " + NUM + r" us",
         [("CPU per traj, stream", "us", "lower"), ("CPU per traj, pre-encoded", "us", "lower"),
          ("CPU per traj, raw baseline", "us", "lower")]),
        (r"stream -> Python TrajectoryStream, acked\s+" + NUM + r" traj/s", [("Python receiver", "traj/s", "higher")]),
        (r"stream: write-to-ack .*?p50\s+" + NUM + r" ms\s+p99\s+" + NUM + r" ms",
         [("paced write-to-ack p50", "ms", "lower"), ("paced write-to-ack p99", "ms", "lower")]),
        (r"stream: send-to-ack\s+p50\s+" + NUM + r" ms\s+p99\s+" + NUM + r" ms",
         [("paced send-to-ack p50", "ms", "lower"), ("paced send-to-ack p99", "ms", "lower")]),
    ],
    "rollout": [
        (r"rollout workers \+ baseline policy\s+" + NUM + r" steps/s", [("rollout workers", "steps/s", "higher")]),
        (r"baseline: the same actions, EnvPool\s+" + NUM + r" steps/s", [("direct EnvPool", "steps/s", "higher")]),
        (r"workers / direct\s+" + NUM, [("workers / direct", "ratio", "higher")]),
    ],
}

HIGHER_COUNTERS = {"per_minute", "over_one_lane"}


def from_gbench(bench, path):
    """figure name -> (value, unit, better) from a Google Benchmark JSON file."""
    out = {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return out
    for b in doc.get("benchmarks", []):
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        # "/min_time:1.000", "/iterations:3": fixed by the bench, not part of what it measures.
        name = re.sub(r"/(min_time|iterations|repeats):[^/]+", "", b["name"])
        out[f"{name} real_time"] = (float(b["real_time"]), b.get("time_unit", "ns"), "lower")
        for c in COUNTERS.get(bench, []):
            if c in b:
                out[f"{name} {c}"] = (float(b[c]), "", "higher" if c in HIGHER_COUNTERS else "lower")
    return out


def from_summary(bench, path):
    out = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for regex, names in SUMMARY.get(bench, []):
        m = re.search(regex, text)
        if not m:
            continue
        for (name, unit, better), value in zip(names, m.groups()):
            if name:
                out[name] = (float(value), unit, better)
    return out


def fmt(x):
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 0.1:
        return f"{x:.3f}"
    return f"{x:.3g}"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    meta = {}
    if (out / "meta.txt").exists():
        for line in (out / "meta.txt").read_text().splitlines():
            k, _, v = line.partition(" ")
            meta[k] = v
    benches = meta.get("benches", "").split() or sorted({p.name.split(".")[0] for p in out.glob("*.*.*")})

    # bench -> figure -> side -> [values]; figure order as first seen.
    rows = []
    problems = []
    for bench in benches:
        figures = {}
        for side in ("before", "after"):
            if (out / f"{bench}.{side}.missing").exists():
                problems.append(f"{bench}: missing from the {side} build ({(out / f'{bench}.{side}.missing').read_text().strip()})")
                continue
            for rc_path in sorted(out.glob(f"{bench}.{side}.*.rc")):
                pair = rc_path.name.split(".")[2]
                rc = rc_path.read_text().strip()
                stem = out / f"{bench}.{side}.{pair}"
                if rc != "0":
                    problems.append(f"{bench}/{side} pair {pair}: exit status {rc} (see {stem}.txt)")
                got = {}
                got.update(from_gbench(bench, Path(f"{stem}.json")))
                got.update(from_summary(bench, Path(f"{stem}.txt")))
                if not got:
                    problems.append(f"{bench}/{side} pair {pair}: no figures found in the output")
                for name, (value, unit, better) in got.items():
                    f = figures.setdefault(name, {"unit": unit, "better": better, "before": [], "after": []})
                    f[side].append(value)
        for name, f in figures.items():
            rows.append((bench, name, f))

    header = f"{'bench':8} {'figure':52} {'unit':7} {'better':6} {'before':>10} {'after':>10} {'after/before':>12}  {'before min-max':>21}  {'after min-max':>21}  n"
    print(header)
    print("-" * len(header))
    for bench, name, f in rows:
        b, a = f["before"], f["after"]
        bm = statistics.median(b) if b else None
        am = statistics.median(a) if a else None
        ratio = f"{am / bm:.3f}" if bm and am is not None else "-"
        brange = f"{fmt(min(b))}-{fmt(max(b))}" if b else "-"
        arange = f"{fmt(min(a))}-{fmt(max(a))}" if a else "-"
        # Flag a figure whose after-range lies wholly on the worse side of the
        # before-range: the only kind of difference these few pairs can show
        # (not with one run a side, where every difference would qualify).
        flag = ""
        if len(b) >= 2 and len(a) >= 2:
            worse = min(a) > max(b) if f["better"] == "lower" else max(a) < min(b)
            better = max(a) < min(b) if f["better"] == "lower" else min(a) > max(b)
            flag = "  WORSE (ranges apart)" if worse else ("  better (ranges apart)" if better else "")
        print(
            f"{bench:8} {name[:52]:52} {f['unit'][:7]:7} {f['better']:6} "
            f"{fmt(bm) if bm is not None else '-':>10} {fmt(am) if am is not None else '-':>10} {ratio:>12}  "
            f"{brange:>21}  {arange:>21}  {len(b)}/{len(a)}{flag}"
        )
    if problems:
        print("\nproblems:")
        for p in problems:
            print("  " + p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
