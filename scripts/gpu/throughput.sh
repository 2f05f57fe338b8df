#!/usr/bin/env bash
# The device pool's throughput figures on the GPU machine (docs/execution.md, "Lanes
# and the device pool"), in one command of about 8 minutes on an H200:
#
#   build    ./run gpu-build of what the stages need (skipped when built)
#   test     ctest -R CudaPool: the pool's lanes behind the GPU gate
#   pool     bench_pool on cuda: new candidates per GPU-minute with 1 and 4
#            lanes (compile overlapped), and the speedup of one pair alone,
#            under compile+verify load, and under load without the gate (the
#            set's timing stops when the `default` reward is decided, as an
#            environment's does; the pair's at target_rse); then one lane
#            again timed to target_rse (KFORGE_BENCH_DECIDED=off; `TARGET_RSE`
#            lines; KFORGE_BENCH_TARGET_RSE=0 skips it),
#            and one lane whose candidates reuse no reference (every one its
#            own episode: KFORGE_BENCH_TURNS=1, against 4 turns an episode
#            above); KFORGE_BENCH_DRIVER_QUEUES=1 adds one lane whose runners
#            keep the driver's own hardware queues
#            (KFORGE_RUNNER_CUDA_CONNECTIONS=0; the default is one queue:
#            executor.runner_cuda_connections)
#   cuda     bench_cuda's BM_EvalThroughput as a profile action (attribution
#            and counters, what every submit paid before) and as a submit
#            (the per-phase effect of paying only for what is asked)
#   probe    bench/cuda/start_probe: a runner's start-up by phase (levels 4
#            and 5 again with CUDA_MODULE_LOADING=EAGER, as kforge-runner), several at
#            once, and a kernel timed beside start-ups of every level (why
#            timing runners may start beside timing: docs/cuda-backend.md);
#            the same kernel timed in a process that carries CUPTI's activity
#            tracer against a plain one, and one in-process trace (`traced`);
#            bench/cuda/teardown_probe: a runner's context teardown by part
#            and by hardware queues (CUDA_DEVICE_MAX_CONNECTIONS), with modules
#            loaded eagerly as kforge-runner loads them, several
#            killed at once, and which calls of another process wait for it
#            (why the judge waits for a used runner: docs/execution.md,
#            "What lanes buy"; KFORGE_PROBE_TEARDOWN=0 leaves this part out,
#            but for one queue's teardown with lazy and eager module loading)
#   rollout  bench_rollout --backend cuda: rollout steps per second with the
#            template policy through the workers, against the same actions
#            driven straight through an EnvPool (KFORGE_ROLLOUT_ROUNDS, 1);
#            then again with N judges on the GPU (--lanes N for each N of
#            KFORGE_ROLLOUT_LANES, default "2": `LANES2` lines), and with N
#            spare profiler runners per judge (KFORGE_PROFILER_SPARES=N for
#            each N of KFORGE_ROLLOUT_PROFILER_SPARES, default none: `SPARES<N>`
#            lines; the judge keeps 2), and with profiles traced in the
#            candidate's own timing runner (KFORGE_TRACE_IN_TIMING_RUNNER=1:
#            `TRACE_OWN` lines; KFORGE_ROLLOUT_TRACE_OWN=0 leaves it out)
#   kb       bench/cuda/kernelbench_compare.py: GPU-seconds per new candidate
#            against KernelBench's own harness, when KFORGE_KERNELBENCH names
#            a KernelBench checkout (its src/ must import with this Python;
#            default: .kb of this tree when it exists, e.g. a `git archive`
#            of KernelBench's src/ carried along)
#
#   OUT=/some/dir [KFORGE_KERNELBENCH=/path/to/KernelBench] [KFORGE_BASE_TAR=base.tar] \
#     bash scripts/gpu/throughput.sh
#
# Before/after in the same run: KFORGE_BASE_TAR names a `git archive` of the
# baseline commit. It is built (bench_pool and what it runs) beside this tree,
# with this tree's bench_pool.cpp, whose submit takes the baseline's rule (the
# profile stage on every CUDA submit), and the pool stage runs the baseline's
# BM_PoolThroughput first, then this tree's: `[pool]` lines of both in
# summary.log, before then after; the kb stage runs kforge's side of
# kernelbench_compare.py with the baseline's judge and runner first
# (KFORGE_TOOLS_DIR), `BEFORE [kforge]` lines.
#
# Knobs: STAGES (default build,test,pool,cuda,probe,rollout,kb), KFORGE_DEADLINE_S (585),
# KFORGE_BASE_POOL (1; 0 skips the baseline's bench_pool, its kb run stays), KFORGE_BENCH_LANES (4), KFORGE_BENCH_REPEATS (10), KFORGE_KB_CANDIDATES (8,
# through KernelBench's harness on warm build directories), KFORGE_KB_NEW (2 of
# them also as new candidates, 30-60 s each), KFORGE_BENCH_DEVICES ("0";
# "0,1,2,3" spreads the throughput run over several GPUs).
# Logs and JSON in $OUT: summary.log, build.log, pool-tests.log,
# bench_pool.{log,json}, bench_pool_{decided,no_reuse}.log, bench_cuda_throughput.{log,json},
# bench_rollout.log, kernelbench.log,
# kernelbench_compare.json (and with a baseline kernelbench_base.log,
# kernelbench_compare_base.json); the kb stage works in build/gpu-kb (its
# hundreds of build files stay there: the device tool returns few files).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build/gpu-out}
mkdir -p "$OUT"
export PATH=/opt/torch/.venv/bin:$PATH
export KFORGE_JOBS=${KFORGE_JOBS:-16}
STAGES=${STAGES:-build,test,pool,cuda,probe,rollout,kb}
export KFORGE_TARGETS=${KFORGE_TARGETS-kforge kforge-judge kforge-runner cuda_pool_test bench_pool bench_cuda \
kforge_kernel_timer bench_start_probe bench_teardown_probe bench_rollout}
if [ -z "${KFORGE_KERNELBENCH:-}" ] && [ -d .kb/src/kernelbench ]; then KFORGE_KERNELBENCH=$PWD/.kb; fi
DEADLINE=${KFORGE_DEADLINE_S:-585}
left() { local l=$((DEADLINE - SECONDS)); ((l < 10)) && l=10; echo "$l"; }
status=0
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
say() { printf '[throughput %4ds] %s\n' "$SECONDS" "$*" | tee -a "$OUT/summary.log"; }

say "environment: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

BASE=""
if [ -n "${KFORGE_BASE_TAR:-}" ]; then
  BASE=$(mktemp -d /tmp/kforge-base.XXXX)
  tar -xf "$KFORGE_BASE_TAR" -C "$BASE"
  ln -s "$PWD/.debs" "$BASE/.debs"  # the same unpacked libraries (ZeroMQ, libseccomp)
  # This tree's benchmark, over the baseline's libraries: the same set and
  # figures. A baseline from before runs_profile existed had the profile
  # stage on every CUDA submit (and compile threads 0 meant one thread there,
  # not one per core); a newer one takes the benchmark as it is.
  if grep -rq "runs_profile" "$BASE/env/include"; then
    cp bench/exec/bench_pool.cpp "$BASE/bench/exec/bench_pool.cpp"
  else
    sed -e 's/runs_profile(ActionType::kSubmit, req.options)/cuda()/' \
      -e 's/config.threads = 0;/config.threads = static_cast<int>(std::thread::hardware_concurrency());/' \
      bench/exec/bench_pool.cpp >"$BASE/bench/exec/bench_pool.cpp"
  fi
  say "baseline tree in $BASE; building it beside this one"
  (cd "$BASE" && KFORGE_TARGETS="kforge-judge kforge-runner bench_pool" KFORGE_JOBS=8 KFORGE_KEEP_GOING=1 \
    timeout "$(left)" ./run gpu-build >"$OUT/build-base.log" 2>&1; echo $? >"$OUT/build-base.rc") &
fi

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
if [ -n "$BASE" ]; then
  wait
  say "baseline build: exit $(cat "$OUT/build-base.rc" 2>/dev/null)"
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

if stage pool && [ -n "$BASE" ] && [ "${KFORGE_BASE_POOL:-1}" != 0 ] && [ -x "$BASE/build/gpu/bench/exec/bench_pool" ]; then
  say "BEFORE: the baseline's bench_pool (throughput with 1 and ${KFORGE_BENCH_LANES:-4} lanes)"
  KFORGE_BENCH_BACKEND=cuda timeout "$(left)" "$BASE/build/gpu/bench/exec/bench_pool" \
    --benchmark_filter=BM_PoolThroughput --benchmark_out="$OUT/bench_pool_base.json" --benchmark_out_format=json \
    >"$OUT/bench_pool_base.log" 2>&1 || status=1
  grep -E '^BM_|^\[pool\]|ERROR' "$OUT/bench_pool_base.log" | sed 's/^/BEFORE /' | tee -a "$OUT/summary.log"
fi

if stage pool; then
  say "bench_pool (cuda: throughput with 1 and ${KFORGE_BENCH_LANES:-4} lanes, speedup alone / loaded / ungated)"
  KFORGE_BENCH_BACKEND=cuda timeout "$(left)" build/gpu/bench/exec/bench_pool \
    --benchmark_out="$OUT/bench_pool.json" --benchmark_out_format=json >"$OUT/bench_pool.log" 2>&1 || status=1
  grep -E '^BM_|^\[pool\]|^\[agreement\]|ERROR' "$OUT/bench_pool.log" | tee -a "$OUT/summary.log"
  # The same lane timed to target_rse (eval.stop_when_decided: false),
  # against the run above, whose timing stops once the reward is decided.
  if [ "${KFORGE_BENCH_TARGET_RSE:-1}" != 0 ]; then
    say "bench_pool, 1 lane, timing to target_rse (KFORGE_BENCH_DECIDED=off)"
    KFORGE_BENCH_BACKEND=cuda KFORGE_BENCH_DECIDED=off timeout "$(left)" \
      build/gpu/bench/exec/bench_pool --benchmark_filter='BM_PoolThroughput/1/' >"$OUT/bench_pool_target_rse.log" \
      2>&1 || status=1
    grep -E '^BM_|^\[pool\]|ERROR' "$OUT/bench_pool_target_rse.log" | sed 's/^/TARGET_RSE /' |
      tee -a "$OUT/summary.log"
  fi
  say "bench_pool, 1 lane, no reference reused (KFORGE_BENCH_TURNS=1: every candidate its own episode)"
  env KFORGE_BENCH_BACKEND=cuda KFORGE_BENCH_TURNS=1 timeout "$(left)" build/gpu/bench/exec/bench_pool \
    --benchmark_filter='BM_PoolThroughput/1/' >"$OUT/bench_pool_no_reuse.log" 2>&1 || status=1
  grep -E '^BM_|^\[pool\]|ERROR' "$OUT/bench_pool_no_reuse.log" | sed 's/^/NO_REUSE /' | tee -a "$OUT/summary.log"
  if [ -n "${KFORGE_BENCH_DRIVER_QUEUES:-}" ]; then
    say "bench_pool, 1 lane, runners with the driver's own hardware queues (KFORGE_RUNNER_CUDA_CONNECTIONS=0)"
    env KFORGE_BENCH_BACKEND=cuda KFORGE_RUNNER_CUDA_CONNECTIONS=0 timeout "$(left)" build/gpu/bench/exec/bench_pool \
      --benchmark_filter='BM_PoolThroughput/1/' >"$OUT/bench_pool_driver_queues.log" 2>&1 || status=1
    grep -E '^BM_|^\[pool\]|ERROR' "$OUT/bench_pool_driver_queues.log" | sed 's/^/DRIVER_QUEUES /' |
      tee -a "$OUT/summary.log"
  fi
fi

if stage cuda; then
  say "bench_cuda BM_EvalThroughput (with counters, then as a submit)"
  timeout "$(left)" build/gpu/bench/cuda/bench_cuda --benchmark_filter=BM_EvalThroughput \
    --benchmark_out="$OUT/bench_cuda_throughput.json" --benchmark_out_format=json \
    >"$OUT/bench_cuda_throughput.log" 2>&1 || status=1
  grep -E '^BM_|^\[throughput\]|ERROR' "$OUT/bench_cuda_throughput.log" | tee -a "$OUT/summary.log"
fi

if stage probe; then
  say "start_probe (runner start-up by phase; a timed kernel beside start-ups)"
  probe=build/gpu/bench/cuda/start_probe
  {
    for l in 1 2 3 4 5; do $probe start $l; done
    # kforge-runner loads modules eagerly (cuda_runner_device.cpp), cuBLAS's
    # among them; the probes above use the driver's default (lazy).
    for l in 4 5; do echo "CUDA_MODULE_LOADING=EAGER:"; CUDA_MODULE_LOADING=EAGER $probe start $l; done
    for n in 1 4 8; do $probe parallel 4 $n; done
    $probe disturb -1 3
    for l in 2 4 5; do $probe disturb $l 4; done
    # CUPTI's activity tracer initialized in the timing process itself, against
    # a plain one, and one in-process trace: could a timing runner profile its
    # own candidate after the timing (no second runner and context)?
    $probe traced 2 3
    teardown=build/gpu/bench/cuda/teardown_probe
    # A runner's teardown with one hardware queue, as kforge-runner's context
    # has, its modules loaded lazily, then eagerly as kforge-runner loads them.
    echo "CUDA_DEVICE_MAX_CONNECTIONS=1:"
    CUDA_DEVICE_MAX_CONNECTIONS=1 $teardown parts kbipg 12
    echo "CUDA_DEVICE_MAX_CONNECTIONS=1 CUDA_MODULE_LOADING=EAGER:"
    CUDA_DEVICE_MAX_CONNECTIONS=1 CUDA_MODULE_LOADING=EAGER $teardown parts kbipg 12
    if [ "${KFORGE_PROBE_TEARDOWN:-1}" = 1 ]; then
      for parts in - kbipg; do $teardown parts $parts 12; done
      for queues in 1 2 4; do CUDA_DEVICE_MAX_CONNECTIONS=$queues $teardown parts kbipg 10; done
      for k in 2 4; do $teardown batch kbipg $k 6; done
      $teardown 20
    fi
  } >"$OUT/start_probe.log" 2>&1 || status=1
  tee -a "$OUT/summary.log" <"$OUT/start_probe.log"
fi

if stage rollout; then
  # One bench_rollout run: its log's name, the prefix of its summary lines and
  # the judge settings it runs under (judge_loop.h), as NAME=VALUE words.
  # Words after `--` are bench_rollout's own arguments.
  rollout() {
    local log=$1 prefix=$2 settings=() args=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do settings+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    args=("$@")
    env "${settings[@]}" timeout "$(left)" build/gpu/bench/rollout/bench_rollout --backend cuda \
      --rounds "${KFORGE_ROLLOUT_ROUNDS:-1}" "${args[@]}" >"$OUT/$log" 2>&1 || status=1
    grep -E 'steps/s|workers / direct|^\[rollout\]' "$OUT/$log" | sed "s/^/$prefix/" | tee -a "$OUT/summary.log"
  }
  say "bench_rollout --backend cuda (template policy through the workers, then the same actions on an EnvPool)"
  rollout bench_rollout.log ""
  # Whether a second judge on the GPU overlaps what one lane's turn spends
  # off the device (the profiler runner's set-up, the report).
  for n in ${KFORGE_ROLLOUT_LANES-2}; do
    [ "$n" = 0 ] && continue
    say "LANES$n: bench_rollout with $n judges on the GPU"
    rollout "bench_rollout_lanes$n.log" "LANES$n " -- --lanes "$n"
  done
  # How many spare profiler runners take the rest of a spare's start-up
  # (profiler_setup, ~0.9 s) out of the profile action's turn, with one lane's
  # profiles ~0.3 s apart once nothing waits.
  for n in ${KFORGE_ROLLOUT_PROFILER_SPARES-}; do
    [ "$n" = 0 ] && continue
    say "SPARES$n: bench_rollout with KFORGE_PROFILER_SPARES=$n"
    rollout "bench_rollout_spares$n.log" "SPARES$n " KFORGE_PROFILER_SPARES="$n"
  done
  # A profile action traced in the candidate's own timing runner (no second
  # runner and context to set up and tear down): TRACE_OWN lines, unless
  # KFORGE_ROLLOUT_TRACE_OWN=0.
  if [ "${KFORGE_ROLLOUT_TRACE_OWN:-1}" = 1 ]; then
    say "TRACE_OWN: bench_rollout with KFORGE_TRACE_IN_TIMING_RUNNER=1"
    rollout bench_rollout_trace_own.log "TRACE_OWN " KFORGE_TRACE_IN_TIMING_RUNNER=1
  fi
fi

if stage kb && [ -n "$BASE" ] && [ -x "$BASE/build/gpu/bin/kforge-judge" ]; then
  # The judge and runner of the baseline behind this tree's kforge (their
  # protocol must match), kforge's side only: the same candidates' phases
  # before, then after in the run below.
  say "BEFORE: kernelbench_compare, kforge's side, with the baseline's judge and runner"
  rm -rf build/gpu-kb/base
  env KFORGE_TOOLS_DIR="$BASE/build/gpu/bin" timeout "$(left)" python3 bench/cuda/kernelbench_compare.py \
    --kforge build/gpu/cli/kforge --out build/gpu-kb/base >"$OUT/kernelbench_base.log" 2>&1 || status=1
  cp build/gpu-kb/base/kernelbench_compare.json "$OUT/kernelbench_compare_base.json" 2>/dev/null
  grep -E '^\[kforge\]|Error|error' "$OUT/kernelbench_base.log" | tail -8 | sed 's/^/BEFORE /' |
    tee -a "$OUT/summary.log"
fi

if stage kb; then
  say "kernelbench_compare (KernelBench checkout: ${KFORGE_KERNELBENCH:-none})"
  rm -rf build/gpu-kb/this
  timeout "$(left)" python3 bench/cuda/kernelbench_compare.py --kforge build/gpu/cli/kforge \
    --kernelbench "${KFORGE_KERNELBENCH:-}" --kb-candidates "${KFORGE_KB_CANDIDATES:-8}" --kb-new "${KFORGE_KB_NEW:-2}" --out build/gpu-kb/this \
    >"$OUT/kernelbench.log" 2>&1 || status=1
  cp build/gpu-kb/this/kernelbench_compare.json "$OUT/" 2>/dev/null
  grep -E '^\[kforge\]|^\[kernelbench\]|^\[compare\]|Error|error' "$OUT/kernelbench.log" | tail -20 |
    tee -a "$OUT/summary.log"
fi
say "done (status $status); logs in $OUT"
exit $status
