#!/usr/bin/env bash
# The learning example on a GPU machine, on the CUDA templates:
#   examples/learning/run_gpu.sh OUTDIR
# Builds what it needs (the `gpu` preset's kforge, judge and runner) unless
# KFORGE_BIN names a built kforge, then trains against the random-choice
# baseline on the bundled examples at their own shapes. Writes
# OUTDIR/curve.json and OUTDIR/learning_curve.png; prints the summary line.
set -euo pipefail
out=${1:?usage: run_gpu.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${KFORGE_BIN:-$repo/build/gpu/cli/kforge}
if [ ! -x "$bin" ]; then
  (cd "$repo" && cmake --preset gpu -DKFORGE_PYTHON=/usr/bin/python3 >/dev/null &&
   cmake --build --preset gpu --target kforge kforge-judge kforge-runner -j"$(nproc)")
fi
nvidia-smi -L >&2 || { echo "run_gpu.sh: no GPU visible (nvidia-smi -L failed)" >&2; exit 1; }
exec /usr/bin/python3 "$here/train.py" --kforge "$bin" --backend cuda --out "$out" \
  --iterations "${ITERATIONS:-15}" --baseline-iterations "${BASELINE_ITERATIONS:-3}" \
  --group-size "${GROUP_SIZE:-8}" "${@:2}"
