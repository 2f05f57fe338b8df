#!/usr/bin/env bash
# Validated tasks per CPU-hour of `kforge synth` on this machine's CPU, with
# eager baselines from the CPU judge (reference check + timing per task), and
# the rejection histogram. The in-run baseline is the same synthesis on one
# worker (seed 5, N/4 tasks): the all-core run's rate is printed as a ratio
# against it (parallel scaling), and its first N/4 tasks must be the
# one-worker run's tasks (determinism across worker counts, baselines aside).
#
# Two rates per run: per CPU-hour consumed (user + system time of kforge, its
# judge and the plot script, from /usr/bin/time: what the work costs, whatever
# else runs on a shared machine) and per wall-hour.
#
#   bash bench/synth/synth_rate.sh [N] [BUILD_DIR]     (N default 40)
set -euo pipefail
N=${1:-40}
BUILD=${2:-build/default}
K=$BUILD/cli/kforge
CORES=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # workers n dir -> "wall_s cpu_s"
  /usr/bin/time -f '%e %U %S' -o "$3.time" "$K" synth --n "$2" --backend cpu --seed 5 --workers "$1" --out "$3" \
    --baselines judge --compile-baselines off --quiet >"$3.json"
  awk '{ print $1, $2 + $3 }' "$3.time"
}

one_n=$((N / 4 > 2 ? N / 4 : 2))
read -r w1 c1 < <(run 1 "$one_n" "$work/one")
read -r wn cn < <(run "$CORES" "$N" "$work/all")
rate() { echo "$1 * 3600 / $2" | bc -l; }
printf 'BM_SynthCpu/workers:1   tasks=%d wall_s=%.1f cpu_s=%.1f tasks_per_cpu_hour=%.0f tasks_per_wall_hour=%.0f\n' \
  "$one_n" "$w1" "$c1" "$(rate "$one_n" "$c1")" "$(rate "$one_n" "$w1")"
printf 'BM_SynthCpu/workers:%d   tasks=%d wall_s=%.1f cpu_s=%.1f tasks_per_cpu_hour=%.0f tasks_per_wall_hour=%.0f cpu_hour_ratio_vs_1_worker=%.2f wall_hour_ratio_vs_1_worker=%.2f\n' \
  "$CORES" "$N" "$wn" "$cn" "$(rate "$N" "$cn")" "$(rate "$N" "$wn")" \
  "$(echo "($N / $cn) / ($one_n / $c1)" | bc -l)" "$(echo "($N / $wn) / ($one_n / $w1)" | bc -l)"
/usr/bin/python3 - "$work" "$one_n" "$N" <<'EOF'
import json, sys
work, one_n, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tasks(d):
    return [json.loads(l) for l in open(d + "/tasks.jsonl")]
def strip(t):
    t = dict(t); t.pop("baselines", None); return json.dumps(t, sort_keys=True)
one, allc = tasks(work + "/one"), tasks(work + "/all")
same = [strip(a) == strip(b) for a, b in zip(one, allc)]
print("determinism: the first %d tasks of the all-core run %s the one-worker run's (baselines aside)"
      % (len(one), "equal" if all(same) and len(one) == one_n else "DIFFER FROM"))
rej = json.load(open(work + "/all/rejections.json"))
print("rejections (all-core run, %d tasks, %d rejected attempts): %s" % (rej["tasks"], rej["rejected"],
      ", ".join("%s %d" % (k, v) for k, v in sorted(rej["by_reason"].items(), key=lambda kv: -kv[1]) if v)))
with_base = [t for t in allc if (t.get("baselines") or {}).get("eager_ms")]
ms = sorted(t["baselines"]["eager_ms"] for t in with_base)
print("eager baselines from the judge: %d of %d tasks (median %.3g ms, min %.3g, max %.3g; device %s)"
      % (len(with_base), n, ms[len(ms) // 2] if ms else 0, ms[0] if ms else 0, ms[-1] if ms else 0,
         with_base[0]["baselines"]["device"] if with_base else "-"))
slots = [json.loads(l) for l in open(work + "/all/slots.jsonl")]
fs = sorted(s["filter_s"] for s in slots); bs = sorted(s["baseline_s"] for s in slots)
print("accepted attempt: filters %.2f s median, judge check + baseline %.2f s median (wall, per worker)"
      % (fs[len(fs) // 2], bs[len(bs) // 2]))
# The window is the cost model's verdict; the in-process time only annotates
# it (and rejects a miss of more than 3x beyond an edge): how often it lands
# outside, and how close any task comes to the 3x edges that could flip.
lo, hi = json.load(open(work + "/all/run.json"))["window_ms"]
outside = [s for s in slots if not s.get("measured_in_window", True)]
print("in-process times outside the window [%g, %g] ms (kept, annotated): %d of %d tasks"
      % (lo, hi, len(outside), len(slots)))
near = [s for s in slots if s["measured_ms"] < lo / 3 * 1.5 or s["measured_ms"] > hi * 3 / 1.5]
print("in-process times within 1.5x of the 3x rejection edges [%g, %g] ms: %d of %d tasks"
      % (lo / 3, hi * 3, len(near), len(slots)))
EOF
