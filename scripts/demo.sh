#!/usr/bin/env bash
# The whole KernelForge pipeline on the best backend present (`./run demo`,
# from a built tree):
#   1. the bundled examples evaluated through the environment (kforge demo);
#   2. the template policy served over the ZeroMQ policy protocol
#      (kforge policy-server --template), as a trainer serves its model;
#   3. the trainer's end of the trajectory stream: the example Python
#      receiver (trainer_bridge/python/examples/trainer_receiver.py, on
#      kforge.TrajectoryStream), writing chat records with rewards;
#   4. rollout workers over the example tasks at demo sizes
#      (configs/demo/tasks; groups of 2; each episode profiles a template
#      variant, then submits it; contrastive prompts), trajectories streamed
#      to the receiver and written as JSONL; the counts must match;
#   5. kforge replay of the trajectories: summary tables, techniques, a few
#      submits re-evaluated, the HTML report with plots;
#   6. a summary of the trajectories (per task: rewards, best speedup, group
#      advantages) and the paths of what was written;
#   7. a policy that learns through the same loop (examples/learning, short
#      form: two tasks, eight GRPO updates against a random-choice baseline;
#      KFORGE_DEMO_LEARNING=0 skips it), its learning curve plotted.
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
# Each run starts clean: the stream's state and spool belong to one run.
rm -rf "$OUT/stream-state" "$OUT/stream-spool" "$OUT/replay" "$OUT/received.chat.jsonl" "$OUT/trajectories.jsonl"

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

log "1/7 the bundled examples through the environment"
"$KFORGE" demo --examples "$ROOT/examples" || log "some examples could not be evaluated (see above)"

# Background processes, stopped at exit whatever happens.
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Waits for a process's first stdout line (a JSON object) and prints `key`.
ready_value() {
  local file=$1 pid=$2 key=$3 errlog=$4
  for _ in $(seq 300); do
    [ -s "$file" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$errlog" >&2; exit 3; }
    sleep 0.1
  done
  "$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' "$file" "$key"
}

log "2/7 serving the template policy over ZeroMQ (kforge policy-server --template)"
"$KFORGE" policy-server --template --explore-turns 1 --bind tcp://127.0.0.1:0 >"$OUT/policy-server.json" 2>"$OUT/policy-server.log" &
pids+=($!)
policy_endpoint=$(ready_value "$OUT/policy-server.json" $! endpoint "$OUT/policy-server.log")
log "    policy server at $policy_endpoint"

log "3/7 the trainer's receiver (kforge.TrajectoryStream, trainer_receiver.py)"
"$PYTHON" "$ROOT/trainer_bridge/python/examples/trainer_receiver.py" --bind tcp://127.0.0.1:0 \
  --state "$OUT/stream-state" --out "$OUT/received.chat.jsonl" --format chat --batch 8 --timeout 0.5 --no-fsync \
  >"$OUT/receiver.json" 2>"$OUT/receiver.log" &
receiver=$!
pids+=($receiver)
stream_endpoint=$(ready_value "$OUT/receiver.json" $receiver endpoint "$OUT/receiver.log")
log "    receiver at $stream_endpoint"

log "4/7 rollout workers: 2 rollouts of each example task, streamed and written"
"$KFORGE" rollout --config "$ROOT/configs/demo/rollout.yaml" --env "$ROOT/configs/demo/env_$backend.yaml" \
  --policy-endpoint "$policy_endpoint" --output "$OUT/trajectories.jsonl" \
  --stream "$stream_endpoint" --stream-worker demo-rollout --stream-spool "$OUT/stream-spool" | tee "$OUT/rollout.txt"
# Every acknowledged trajectory is in the receiver's file; stop it cleanly
# (SIGTERM: it finishes its batch and prints its summary).
kill -TERM $receiver
wait $receiver || true
written=$(grep -c . "$OUT/trajectories.jsonl" || true)
received=$(grep -c . "$OUT/received.chat.jsonl" || true)
log "    trajectories: $written written to JSONL, $received received by the trainer"
if [ "$written" != "$received" ]; then
  log "the stream lost or duplicated trajectories ($received received of $written)"
  exit 3
fi

log "5/7 kforge replay: summary, techniques, re-evaluation of a few submits, HTML report"
replay_status=0
"$KFORGE" replay "$OUT/trajectories.jsonl" --out "$OUT/replay" --reevaluate --max-submits 3 --repeats 2 \
  --config "$ROOT/configs/demo/env_$backend.yaml" >"$OUT/replay.txt" 2>"$OUT/replay.log" || replay_status=$?
if [ "$replay_status" -gt 1 ]; then
  cat "$OUT/replay.log" >&2
  exit "$replay_status"
fi
report=$(sed -n 's/^report: //p' "$OUT/replay.txt")

log "6/7 summary of the trajectories"
"$PYTHON" "$ROOT/scripts/demo_summary.py" "$OUT/trajectories.jsonl" | tee "$OUT/summary.txt"

learning=""
if [ "${KFORGE_DEMO_LEARNING:-1}" != "0" ]; then
  log "7/7 a policy learning through PolicyServer, kforge rollout and TrajectoryStream (examples/learning)"
  rm -rf "$OUT/learning"
  "$PYTHON" "$ROOT/examples/learning/train.py" --kforge "$KFORGE" --backend "$backend" --out "$OUT/learning" \
    --only example/affine_relu6 example/matmul_bias_relu --iterations 8 --baseline-iterations 2 --group-size 4 \
    >"$OUT/learning.log" 2>&1 || { tail -20 "$OUT/learning.log" >&2; exit 3; }
  tail -1 "$OUT/learning.log"
  learning="$OUT/learning/learning_curve.png"
fi

log "done in $(( $(date +%s) - start )) s"
log "trajectories: $OUT/trajectories.jsonl ($written; the same $received streamed to the trainer: $OUT/received.chat.jsonl)"
log "replay:       $OUT/replay.txt"
log "summary:      $OUT/summary.txt"
log "report:       $report"
[ -z "$learning" ] || log "learning:     $learning"
