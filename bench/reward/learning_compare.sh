#!/usr/bin/env bash
# Does the noise-aware reward learn at least as fast as the point reward?
# (docs/rewards.md, "Measured".) Runs examples/learning/train.py twice at the
# same time, so that both see the same machine and its load: once with the
# learning example's reward (the log speedup as measured), once with the same
# reward paying the speedup its interval demonstrated (`speedup_estimate:
# demonstrated`). Same seed, tasks and options. The two rewards have different
# scales, so the figure to compare is what both are for: the mean speedup
# against eager PyTorch per iteration, measured the same way in both runs.
#
#   bench/reward/learning_compare.sh OUT_DIR [train.py options, e.g. --iterations 8]
#
# OUT_DIR gets point/ and demonstrated/ (each train.py's output: curve.json,
# learning_curve.png, trajectories), the demonstrated run's env and reward
# configs, and compare.txt (the table printed at the end).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [train.py options]" >&2; exit 2; }
out=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
python=/usr/bin/python3
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The demonstrated run's configs: the learning example's, one key apart.
sed 's/^    penalty: -6.0$/    penalty: -6.0\n    speedup_estimate: demonstrated/' \
  "$repo/examples/learning/reward.yaml" >"$out/reward-demonstrated.yaml"
grep -q 'speedup_estimate: demonstrated' "$out/reward-demonstrated.yaml" ||
  { echo "learning_compare: could not derive the demonstrated reward from reward.yaml" >&2; exit 1; }
sed 's|function: ./reward.yaml|function: ./reward-demonstrated.yaml|' \
  "$repo/examples/learning/env-cpu.yaml" >"$out/env-demonstrated.yaml"

"$python" "$repo/examples/learning/train.py" --out "$out/point" "$@" >"$out/point.log" 2>&1 &
point=$!
"$python" "$repo/examples/learning/train.py" --out "$out/demonstrated" --env "$out/env-demonstrated.yaml" "$@" \
  >"$out/demonstrated.log" 2>&1 &
demonstrated=$!
status=0
wait "$point" || { echo "learning_compare: the point run failed (see $out/point.log)" >&2; status=1; }
wait "$demonstrated" || { echo "learning_compare: the demonstrated run failed (see $out/demonstrated.log)" >&2; status=1; }
[ $status -eq 0 ] || exit $status

"$python" - "$out" <<'EOF' | tee "$out/compare.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
curves = {name: json.loads((out / name / "curve.json").read_text()) for name in ("point", "demonstrated")}
print("%-10s %28s %28s" % ("", "point reward", "demonstrated reward"))
print("%-10s %14s %13s %14s %13s" % ("iteration", "mean speedup", "mean reward", "mean speedup", "mean reward"))
for name in ("baseline",):
    row = [curves[c]["baseline"] for c in ("point", "demonstrated")]
    print("%-10s %13.2fx %13.3f %13.2fx %13.3f" % (
        "random", row[0]["mean_speedup"]["mean"], row[0]["mean_reward"]["mean"],
        row[1]["mean_speedup"]["mean"], row[1]["mean_reward"]["mean"]))
rows = [curves[c]["training"] for c in ("point", "demonstrated")]
for a, b in zip(*rows):
    print("%-10d %13.2fx %13.3f %13.2fx %13.3f" % (
        a["iteration"], a["mean_speedup"], a["mean_reward"], b["mean_speedup"], b["mean_reward"]))
half = max(1, len(rows[0]) // 2)
for name, r in zip(("point", "demonstrated"), rows):
    tail = r[half:]
    print("%s: mean speedup over the last %d iterations %.2fx" % (
        name, len(tail), sum(x["mean_speedup"] for x in tail) / len(tail)))
EOF
