#!/usr/bin/env bash
# The throughput issue's figures on the GPU machine (docs/execution.md, "Lanes
# and the device pool"), in one command of about 8 minutes on an H200:
#
#   build    ./run gpu-build of what the stages need (skipped when built)
#   test     ctest -R CudaPool: the pool's lanes behind the GPU gate
#   pool     bench_pool on cuda: new candidates per GPU-minute with 1 and 4
#            lanes (compile overlapped), and the speedup of one pair alone,
#            under compile+verify load, and under load without the gate
#   cuda     bench_cuda's BM_EvalThroughput with and without hardware
#            counters on submits (the per-phase effect of paying only for
#            what is asked)
#   kb       bench/cuda/kernelbench_compare.py: GPU-seconds per new candidate
#            against KernelBench's own harness, when KFORGE_KERNELBENCH names
#            a KernelBench checkout (its src/ must import with this Python)
#
#   OUT=/some/dir [KFORGE_KERNELBENCH=/path/to/KernelBench] bash scripts/gpu/throughput.sh
#
# Knobs: STAGES (default build,test,pool,cuda,kb), KFORGE_DEADLINE_S (585),
# KFORGE_BENCH_LANES (4), KFORGE_BENCH_REPEATS (10), KFORGE_KB_CANDIDATES (2,
# about a minute each), KFORGE_BENCH_DEVICES ("0"; "0,1,2,3" spreads the
# throughput run over several GPUs, issue 16).
# Logs and JSON in $OUT: summary.log, build.log, pool-tests.log,
# bench_pool.{log,json}, bench_cuda_throughput.{log,json}, kernelbench.log,
# kernelbench_compare.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build/gpu-out}
mkdir -p "$OUT"
export PATH=/opt/torch/.venv/bin:$PATH
export KFORGE_JOBS=${KFORGE_JOBS:-16}
STAGES=${STAGES:-build,test,pool,cuda,kb}
export KFORGE_TARGETS=${KFORGE_TARGETS-kforge kforge-judge kforge-runner cuda_pool_test bench_pool bench_cuda \
kforge_kernel_timer}
DEADLINE=${KFORGE_DEADLINE_S:-585}
left() { local l=$((DEADLINE - SECONDS)); ((l < 10)) && l=10; echo "$l"; }
status=0
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
say() { printf '[throughput %4ds] %s\n' "$SECONDS" "$*" | tee -a "$OUT/summary.log"; }

say "environment: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

if stage build; then
  if [ -x build/gpu/bench/exec/bench_pool ] && [ -x build/gpu/cli/kforge ] && [ -z "${KFORGE_REBUILD:-}" ]; then
    say "build: already built (KFORGE_REBUILD=1 rebuilds)"
  else
    say "building (./run gpu-build: $KFORGE_TARGETS)"
    if ! KFORGE_KEEP_GOING=1 timeout "$(left)" ./run gpu-build >"$OUT/build.log" 2>&1; then
      status=1
      say "BUILD FAILED; first errors:"
      grep -E -m 40 'error|Error|FAILED' "$OUT/build.log" | cut -c1-400 | tee -a "$OUT/summary.log"
    else
      say "build done"
    fi
  fi
fi
if [ -d /opt/kdeps/usr/lib/x86_64-linux-gnu ]; then
  export LD_LIBRARY_PATH=/opt/kdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

if stage test; then
  say "GPU pool tests (ctest -R CudaPool)"
  timeout "$(left)" ctest --test-dir build/gpu -R CudaPool -j 1 --output-on-failure --timeout 300 \
    --output-junit "$OUT/pool-tests.xml" >"$OUT/pool-tests.log" 2>&1 || status=1
  grep -E 'tests passed|tests failed|\*\*\*Failed|Timeout' "$OUT/pool-tests.log" | tee -a "$OUT/summary.log"
fi

if stage pool; then
  say "bench_pool (cuda: throughput with 1 and ${KFORGE_BENCH_LANES:-4} lanes, speedup alone / loaded / ungated)"
  KFORGE_BENCH_BACKEND=cuda timeout "$(left)" build/gpu/bench/exec/bench_pool \
    --benchmark_out="$OUT/bench_pool.json" --benchmark_out_format=json >"$OUT/bench_pool.log" 2>&1 || status=1
  grep -E '^BM_|^\[pool\]|^\[agreement\]|ERROR' "$OUT/bench_pool.log" | tee -a "$OUT/summary.log"
fi

if stage cuda; then
  say "bench_cuda BM_EvalThroughput (with counters, then as a submit)"
  timeout "$(left)" build/gpu/bench/cuda/bench_cuda --benchmark_filter=BM_EvalThroughput \
    --benchmark_out="$OUT/bench_cuda_throughput.json" --benchmark_out_format=json \
    >"$OUT/bench_cuda_throughput.log" 2>&1 || status=1
  grep -E '^BM_|^\[throughput\]|ERROR' "$OUT/bench_cuda_throughput.log" | tee -a "$OUT/summary.log"
fi

if stage kb; then
  say "kernelbench_compare (KernelBench checkout: ${KFORGE_KERNELBENCH:-none})"
  timeout "$(left)" python3 bench/cuda/kernelbench_compare.py --kforge build/gpu/cli/kforge \
    --kernelbench "${KFORGE_KERNELBENCH:-}" --kb-candidates "${KFORGE_KB_CANDIDATES:-2}" --out "$OUT/kb" \
    >"$OUT/kernelbench.log" 2>&1 || status=1
  cp "$OUT/kb/kernelbench_compare.json" "$OUT/" 2>/dev/null
  grep -E '^\[kforge\]|^\[kernelbench\]|^\[compare\]|Error|error' "$OUT/kernelbench.log" | tail -20 |
    tee -a "$OUT/summary.log"
fi
say "done (status $status); logs in $OUT"
exit $status
