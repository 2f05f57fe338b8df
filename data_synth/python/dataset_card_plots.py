"""Plots for a synthesized dataset's card (kforge synth writes card_stats.json).

Usage: dataset_card_plots.py CARD_STATS.json OUT_DIR

Writes op_histogram.png, op_count.png, shapes.png, runtime.png,
rejections.png, kernelbench_distance.png and headroom.png (measured eager
time over the roofline bound). Needs matplotlib (Debian:
python3-matplotlib); exits 1 with a message when it is missing.
"""

import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:  # the card says so instead of showing plots
    print("matplotlib is not available: %s (Debian: apt-get install python3-matplotlib)" % e)
    sys.exit(1)


def bar(path, labels, values, title, xlabel, rotate=False):
    fig, ax = plt.subplots(figsize=(max(6, 0.28 * len(labels) + 2), 4))
    ax.bar(range(len(values)), values, color="#4C72B0")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=90 if rotate else 0, fontsize=7 if rotate else 9)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def log_bins_hist(path, series, title, xlabel):
    import math

    fig, ax = plt.subplots(figsize=(6, 4))
    all_values = [v for _, values in series for v in values if v and v > 0]
    if all_values:
        lo, hi = math.log10(min(all_values)), math.log10(max(all_values))
        if hi - lo < 1e-9:
            hi = lo + 1
        bins = [10 ** (lo + (hi - lo) * i / 40.0) for i in range(41)]
        for label, values in series:
            values = [v for v in values if v and v > 0]
            if values:
                ax.hist(values, bins=bins, alpha=0.6, label="%s (n=%d)" % (label, len(values)))
        ax.set_xscale("log")
        ax.legend(fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    with open(sys.argv[1]) as f:
        s = json.load(f)
    out = sys.argv[2]
    ops = sorted(s["op_histogram"].items(), key=lambda kv: -kv[1])
    bar(out + "/op_histogram.png", [k for k, _ in ops], [v for _, v in ops], "Ops across tasks", "op", rotate=True)
    counts = sorted(s["op_count_histogram"].items(), key=lambda kv: int(kv[0]))
    bar(out + "/op_count.png", [k for k, _ in counts], [v for _, v in counts], "Ops per task", "ops")
    log_bins_hist(out + "/shapes.png", [("first input elements", s["first_input_numel"]),
                                        ("bytes per call", s["bytes"])],
                  "Sizes", "elements / bytes (log scale)")
    log_bins_hist(out + "/runtime.png", [("eager baseline (judge)", s["eager_ms"]),
                                         ("in-process eager", s["measured_ms"]),
                                         ("cost model", s["predicted_ms"])],
                  "Runtime", "ms (log scale)")
    rej = list(s["rejections"].items())
    bar(out + "/rejections.png", [k for k, _ in rej], [v for _, v in rej], "Rejected attempts by reason",
        "reason", rotate=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(s["kernelbench_distance"], bins=20, range=(0, 1), color="#55A868")
    ax.set_title("Distance to the nearest KernelBench problem")
    ax.set_xlabel("normalized op-sequence distance")
    ax.set_ylabel("tasks")
    fig.tight_layout()
    fig.savefig(out + "/kernelbench_distance.png", dpi=110)
    plt.close(fig)
    log_bins_hist(out + "/headroom.png", [("eager / roofline bound", s.get("headroom", []))],
                  "Headroom (difficulty)", "eager time over the roofline bound (log scale)")


if __name__ == "__main__":
    main()
