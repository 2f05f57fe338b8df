#!/usr/bin/env bash
# Validated tasks per CPU-hour of `kforge synth` on this machine's CPU, with
# eager baselines from the CPU judge, and the rejection histogram. The
# in-run baseline is the same synthesis on one worker: the script prints the
# all-core rate as a ratio against it (parallel scaling).
#
#   bash bench/synth/synth_rate.sh [N] [BUILD_DIR]     (N default 40)
set -euo pipefail
N=${1:-40}
BUILD=${2:-build/default}
K=$BUILD/cli/kforge
CORES=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # workers n dir -> prints "seconds json"
  local start end
  start=$(date +%s.%N)
  "$K" synth --n "$2" --backend cpu --seed 5 --workers "$1" --out "$3" --compile-baselines off --quiet >"$3.json"
  end=$(date +%s.%N)
  echo "$(echo "$end - $start" | bc) $(cat "$3.json")"
}

one_n=$(( N / 4 > 2 ? N / 4 : 2 ))
read -r t1 j1 < <(run 1 "$one_n" "$work/one")
read -r tn jn < <(run "$CORES" "$N" "$work/all")
rate1=$(echo "$one_n * 3600 / $t1" | bc -l)
raten=$(echo "$N * 3600 / $tn" | bc -l)
printf 'BM_SynthCpu/workers:1   tasks=%d wall_s=%.1f tasks_per_hour=%.0f tasks_per_cpu_hour=%.0f\n' "$one_n" "$t1" "$rate1" "$rate1"
printf 'BM_SynthCpu/workers:%d   tasks=%d wall_s=%.1f tasks_per_hour=%.0f tasks_per_cpu_hour=%.0f ratio_vs_1_worker=%.2f\n' \
  "$CORES" "$N" "$tn" "$raten" "$(echo "$raten / $CORES" | bc -l)" "$(echo "$raten / $rate1" | bc -l)"
echo "rejections (all-core run): $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["by_reason"])' "$work/all/rejections.json")"
echo "eager baselines from the judge: $(grep -c eager_ms "$work/all/tasks.jsonl" || true) of $N tasks"
