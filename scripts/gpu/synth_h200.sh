#!/usr/bin/env bash
# Data synthesis on the GPU machine (docs/data-synthesis.md, issue 13's
# measurement): builds kforge and the judge, synthesizes N tasks (default
# 1000) on the GPU with eager baselines from the judge, then torch.compile
# baselines for a sample in parallel processes, and leaves under $OUT:
#   synth/tasks.jsonl, synth/DATASET_CARD.md, synth/contamination_report.json,
#   synth/rejections.json, synth/kernelbench/*.py, synth.log, summary.log
# and prints tasks per GPU-hour. Resumable: rerunning continues the same set.
#
#   OUT=/some/dir bash scripts/gpu/synth_h200.sh
#
# Knobs: SYNTH_N (1000), SYNTH_SEED (1), SYNTH_DEADLINE_S (seconds for the
# synthesis itself, default 420: the device tool stops a command at 600 s),
# SYNTH_COMPILE_SAMPLE (torch.compile baselines for this many tasks, default
# 64; 0 skips), STAGES (build,synth,compile; default all).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build/gpu-out}
mkdir -p "$OUT"
export PATH=/opt/torch/.venv/bin:$PATH
export KFORGE_JOBS=${KFORGE_JOBS:-16}
N=${SYNTH_N:-1000}
SEED=${SYNTH_SEED:-1}
STAGES=${STAGES:-build,synth,compile}
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
say() { printf '[synth_h200 %4ds] %s\n' "$SECONDS" "$*" | tee -a "$OUT/summary.log"; }
status=0

if stage build; then
  say "building kforge, kforge-judge, kforge-runner (./run gpu-build)"
  if ! KFORGE_TARGETS="kforge kforge-judge kforge-runner" timeout 400 ./run gpu-build >"$OUT/build.log" 2>&1; then
    say "BUILD FAILED"; grep -E -m 30 'error|FAILED' "$OUT/build.log" | tee -a "$OUT/summary.log"; exit 1
  fi
  say "build done"
fi
if [ -d /opt/kdeps/usr/lib/x86_64-linux-gnu ]; then
  export LD_LIBRARY_PATH=/opt/kdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
K=build/gpu/cli/kforge
export KFORGE_PYTHON=${KFORGE_PYTHON:-$(command -v python3)}

if stage synth; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv >"$OUT/gpu.log" 2>&1
  say "synthesizing $N tasks on the GPU (seed $SEED, workers $(nproc))"
  start=$SECONDS
  # SIGINT at the deadline: the committed tasks stay, a rerun continues.
  timeout -s INT "${SYNTH_DEADLINE_S:-420}" "$K" synth --n "$N" --backend cuda --seed "$SEED" \
    --out "$OUT/synth" --compile-baselines off >"$OUT/synth.json" 2>"$OUT/synth.log"
  rc=$?
  wall=$((SECONDS - start))
  tail -3 "$OUT/synth.log" | tee -a "$OUT/summary.log"
  tasks=$(wc -l <"$OUT/synth/tasks.jsonl" 2>/dev/null || echo 0)
  say "synth exit $rc: $tasks tasks in ${wall} s of wall time on one GPU"
  if [ "$rc" -ne 0 ] && [ "$tasks" -gt 0 ]; then
    # Stopped at the deadline: the same run with N = what it committed has
    # nothing left to synthesize and writes the card and reports.
    "$K" synth --n "$tasks" --backend cuda --seed "$SEED" --out "$OUT/synth" --compile-baselines off \
      >>"$OUT/synth.json" 2>>"$OUT/synth.log" && rc=0
  fi
  awk -v t="$tasks" -v w="$wall" 'BEGIN { if (w > 0) printf "[synth_h200] tasks per GPU-hour: %.0f\n", t * 3600 / w }' |
    tee -a "$OUT/summary.log"
  [ "$rc" -eq 0 ] || status=1
  cat "$OUT/synth.json" >>"$OUT/summary.log" 2>/dev/null
fi

if stage compile && [ "${SYNTH_COMPILE_SAMPLE:-64}" -gt 0 ] && [ -f "$OUT/synth/tasks.jsonl" ]; then
  say "torch.compile baselines for ${SYNTH_COMPILE_SAMPLE:-64} tasks, $(nproc) processes"
  timeout 150 "$KFORGE_PYTHON" data_synth/python/compile_baselines.py --tasks "$OUT/synth/tasks.jsonl" \
    --pydir "$OUT/synth/kernelbench" --out "$OUT/synth/compile_baselines.jsonl" \
    --summary "$OUT/synth/compile_baselines.json" --device cuda --workers "$(nproc)" \
    --limit "${SYNTH_COMPILE_SAMPLE:-64}" >"$OUT/compile.log" 2>&1 || status=1
  tail -2 "$OUT/compile.log" | tee -a "$OUT/summary.log"
  cat "$OUT/synth/compile_baselines.json" >>"$OUT/summary.log" 2>/dev/null
fi
say "done (status $status)"
exit $status
