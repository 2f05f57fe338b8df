#!/usr/bin/python3
"""Draws the PNG plots of a `kforge replay` report.

    replay_plots.py DATA.json OUT_DIR

DATA.json is the replay analysis (`kforge replay --json`, or data.json in a
report folder). Writes into OUT_DIR, for what the data holds:
  reward_distribution.png    episode rewards, one series per policy version
  speedup_distribution.png   final speedups of successful episodes (log scale)
  progress_over_turns.png    per task: share solved and best speedup so far, by turn
  failure_causes.png         why episodes failed
  turns_used.png             turns used per episode
  techniques.png             techniques in the final solutions, successful or not
  reevaluation.png           recorded reward against the re-run rewards
and OUT_DIR/plots.json: [{"file", "title"}] of the plots written, in order.
Needs matplotlib (Debian: python3-matplotlib); exits 3 without it.
"""

import json
import math
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
except ImportError as e:  # the C++ side reports this line and writes the HTML without plots
    sys.stderr.write("matplotlib is not available (%s); install python3-matplotlib\n" % e)
    sys.exit(3)

MAX_SERIES = 8  # lines or bars beyond this are folded or left out, so plots stay readable


def finite(values):
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def save(fig, out_dir, name, title, written):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    written.append({"file": name, "title": title})


def reward_distribution(data, out_dir, written):
    by_version = {}
    for e in data.get("episodes", []):
        by_version.setdefault(e.get("policy_version") or "(untagged)", []).append(e.get("total_reward"))
    series = [(k, finite(v)) for k, v in sorted(by_version.items())]
    series = [(k, v) for k, v in series if v]
    if not series:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    all_values = [x for _, v in series for x in v]
    lo, hi = min(all_values), max(all_values)
    bins = 20 if hi > lo else 1
    shown = series[:MAX_SERIES]
    ax.hist([v for _, v in shown], bins=bins, range=(lo, hi if hi > lo else lo + 1), label=[k for k, _ in shown],
            stacked=True)
    ax.set_xlabel("episode reward")
    ax.set_ylabel("episodes")
    if len(shown) > 1:
        ax.legend(title="policy version", fontsize=8)
    save(fig, out_dir, "reward_distribution.png", "Reward distribution", written)


def speedup_distribution(data, out_dir, written):
    values = finite([e.get("final_speedup") for e in data.get("episodes", []) if e.get("success")])
    values = [v for v in values if v > 0]
    if not values:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    lo, hi = min(values), max(values)
    if hi > lo:
        bins = [lo * (hi / lo) ** (i / 20.0) for i in range(21)]
        ax.hist(values, bins=bins)
        ax.set_xscale("log")
    else:
        ax.hist(values, bins=1)
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("speedup vs eager PyTorch (successful episodes)")
    ax.set_ylabel("episodes")
    save(fig, out_dir, "speedup_distribution.png", "Speedup distribution", written)


def progress_over_turns(data, out_dir, written):
    progress = data.get("summary", {}).get("progress", {})
    if not progress:
        return
    # The tasks with the most episodes first.
    counts = {t["key"]: t["episodes"] for t in data.get("summary", {}).get("by_task", [])}
    tasks = sorted(progress, key=lambda t: (-counts.get(t, 0), t))[:MAX_SERIES]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for task in tasks:
        rows = progress[task]
        turns = [r["turn"] + 1 for r in rows]
        ax1.plot(turns, [r["solved_fraction"] for r in rows], marker="o", label=task)
        pts = [(r["turn"] + 1, r["mean_best_speedup"]) for r in rows if r.get("mean_best_speedup") is not None]
        if pts:
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=task)
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_xlabel("turn")
    ax1.set_ylabel("share of episodes with a correct solution")
    ax1.set_ylim(-0.02, 1.02)
    ax2.set_xlabel("turn")
    ax2.set_ylabel("best speedup so far (mean over solved episodes)")
    ax1.legend(fontsize=7)
    title = "Per-task progress over turns" + (" (%d most frequent tasks)" % len(tasks) if len(progress) > len(tasks) else "")
    save(fig, out_dir, "progress_over_turns.png", title, written)


def failure_causes(data, out_dir, written):
    causes = data.get("summary", {}).get("overall", {}).get("failure_causes", {})
    if not causes:
        return
    items = sorted(causes.items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(items) + 1.5))
    ax.barh([k for k, _ in items], [v for _, v in items])
    ax.set_xlabel("episodes")
    save(fig, out_dir, "failure_causes.png", "Failure causes", written)


def turns_used(data, out_dir, written):
    values = [e.get("turns_used") for e in data.get("episodes", []) if isinstance(e.get("turns_used"), int)]
    if not values:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    top = max(values)
    ax.hist(values, bins=[x - 0.5 for x in range(0, top + 2)], rwidth=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("turns used")
    ax.set_ylabel("episodes")
    save(fig, out_dir, "turns_used.png", "Turns used per episode", written)


def techniques(data, out_dir, written):
    stats = data.get("technique_stats", [])
    if not stats:
        return
    names = [s["name"] for s in stats]
    ok = [s["successes"] for s in stats]
    bad = [s["solutions"] - s["successes"] for s in stats]
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(names) + 1.5))
    ax.barh(names, ok, label="successful episode")
    ax.barh(names, bad, left=ok, label="failed episode")
    ax.set_xlabel("final solutions using it")
    ax.legend(fontsize=8)
    save(fig, out_dir, "techniques.png", "Optimization techniques in the final solutions", written)


def reevaluation(data, out_dir, written):
    re = data.get("reevaluation") or {}
    rows = [r for r in re.get("rows", []) if r.get("rewards")]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(6, 5))
    xs, ys, lo, hi = [], [], [], []
    for r in rows:
        runs = finite(r["rewards"])
        if not runs:
            continue
        mean = sum(runs) / len(runs)
        xs.append(r["recorded_reward"])
        ys.append(mean)
        lo.append(mean - min(runs))
        hi.append(max(runs) - mean)
    ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3)
    both = xs + ys
    a, b = min(both), max(both)
    pad = 0.05 * (b - a) if b > a else 0.5
    ax.plot([a - pad, b + pad], [a - pad, b + pad], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("recorded reward")
    ax.set_ylabel("re-run reward (mean, min-max)")
    save(fig, out_dir, "reevaluation.png", "Re-evaluation: recorded vs re-run reward", written)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: replay_plots.py DATA.json OUT_DIR\n")
        return 2
    with open(sys.argv[1]) as f:
        data = json.load(f)
    out_dir = sys.argv[2]
    written = []
    for plot in (reward_distribution, speedup_distribution, progress_over_turns, failure_causes, turns_used,
                 techniques, reevaluation):
        plot(data, out_dir, written)
    with open(os.path.join(out_dir, "plots.json"), "w") as f:
        json.dump(written, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
