#!/usr/bin/env bash
# The whole KernelForge pipeline on the best backend present (`./run demo`,
# from a built tree):
#   1. the bundled examples evaluated through the environment (kforge demo);
#   2. the baseline policy served over the ZeroMQ policy protocol
#      (kforge policy-server --baseline), as a trainer serves its model;
#   3. rollout workers over the example tasks at demo sizes
#      (configs/demo/tasks; groups of 2; each episode profiles a template
#      variant, then submits it; contrastive prompts), trajectories written
#      as JSONL;
#   4. a summary of the trajectories (per task: rewards, best speedup, group
#      advantages) and the paths of what was written.
#
# Usage: scripts/demo.sh [BUILD_DIR]   (default build/default)
# KFORGE_DEMO_DIR: where outputs go (default BUILD_DIR/demo);
# KFORGE_DEMO_BACKEND: cpu or cuda instead of the best one present.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/default}
KFORGE=$BUILD/cli/kforge
PYTHON=${KFORGE_PYTHON:-/usr/bin/python3}
OUT=${KFORGE_DEMO_DIR:-$BUILD/demo}
mkdir -p "$OUT"

log() { printf '\033[1m[demo]\033[0m %s\n' "$*" >&2; }

[ -x "$KFORGE" ] || { log "$KFORGE is not built (run ./run build)"; exit 2; }

# The best backend present: CUDA when there is a GPU (KFORGE_DEMO_BACKEND
# overrides).
backend=${KFORGE_DEMO_BACKEND:-cpu}
if [ -z "${KFORGE_DEMO_BACKEND:-}" ] && [ -e /dev/nvidia0 ] && command -v nvidia-smi >/dev/null; then
  backend=cuda
fi
log "backend: $backend"
start=$(date +%s)

log "1/4 the bundled examples through the environment"
"$KFORGE" demo --examples "$ROOT/examples" || log "some examples could not be evaluated (see above)"

log "2/4 serving the baseline policy over ZeroMQ"
"$KFORGE" policy-server --baseline --explore-turns 1 --bind tcp://127.0.0.1:0 >"$OUT/policy-server.json" 2>"$OUT/policy-server.log" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  [ -s "$OUT/policy-server.json" ] && break
  kill -0 $server 2>/dev/null || { cat "$OUT/policy-server.log" >&2; exit 3; }
  sleep 0.1
done
endpoint=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["endpoint"])' "$OUT/policy-server.json")
log "    policy server at $endpoint"

log "3/4 rollout workers: 2 rollouts of each example task"
"$KFORGE" rollout --config "$ROOT/configs/demo/rollout.yaml" --env "$ROOT/configs/demo/env_$backend.yaml" \
  --policy-endpoint "$endpoint" --output "$OUT/trajectories.jsonl"

log "4/4 summary of the trajectories"
"$PYTHON" "$ROOT/scripts/demo_summary.py" "$OUT/trajectories.jsonl" | tee "$OUT/summary.txt"

log "done in $(( $(date +%s) - start )) s"
log "trajectories: $OUT/trajectories.jsonl"
log "summary:      $OUT/summary.txt"
