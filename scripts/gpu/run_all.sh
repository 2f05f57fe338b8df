#!/usr/bin/env bash
# Everything the CUDA backend needs checked on the GPU machine, in one command
# (docs/cuda-backend.md): build the `gpu` preset, run every GPU test and the
# CUDA benchmarks, and leave the logs in $OUT. Measured on one H200 with 16
# cores (2026-12-02): build 80-100 s, GPU tests ~315 s with 500 drift
# evaluations cut to 100, benchmarks ~60 s; each stage under its own timeout
# so that later stages still report.
#
#   OUT=/some/dir bash scripts/gpu/run_all.sh
#
# The device tool allows 10 minutes per command: if the build and tests use
# most of it, run `STAGES=bench` as a second command (the build is kept while
# the machine stays warm).
#
# The build itself is `./run gpu-build`: the same dependency set-up as
# `./run gpu-test` (ZeroMQ and libseccomp from .debs/unpack.sh, libtorch from
# the Python that has torch). That Python is /opt/torch/.venv's (PyTorch 2.11
# with CUDA 13), put first on PATH here. Environment knobs:
#   KFORGE_GPU_LEAK_EVALS  evaluations in the GPU-memory drift test (default
#                          here 500; the test alone defaults to 1000)
#   KFORGE_GPU_TEST_REGEX  only GPU tests matching this ctest -R regex
#   KFORGE_GPU_TEST_EXCLUDE  leave out GPU tests matching this ctest -E regex
#   KFORGE_DEADLINE_S      seconds all stages may use together (default 585)
#   STAGES                 which of build,test,bench to run (default all three)
#   KFORGE_BENCH_COMPILE_FILTER  bench_compile's --benchmark_filter (default
#                          -NvccTorchExtension: without the torch-extension
#                          baseline, about a minute per sample; '.' keeps it)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build/gpu-out}
mkdir -p "$OUT"
export PATH=/opt/torch/.venv/bin:$PATH
export KFORGE_JOBS=${KFORGE_JOBS:-16}
export KFORGE_GPU_LEAK_EVALS=${KFORGE_GPU_LEAK_EVALS:-500}
STAGES=${STAGES:-build,test,bench}
# What the GPU stages need; the CPU-only tests are CI's. KFORGE_TARGETS= builds all.
export KFORGE_TARGETS=${KFORGE_TARGETS-kforge kforge-judge kforge-runner cuda_unit_test \
cuda_executor_test reference_gpu_test gym_cuda_test analysis_gpu_test honest_cuda_gpu_test \
adversarial_cuda_gpu_test bench_cuda kforge_kernel_timer bench_compile}
# The device tool stops a command at 600 s; each stage gets what is left.
DEADLINE=${KFORGE_DEADLINE_S:-585}
left() { local l=$((DEADLINE - SECONDS)); ((l < 10)) && l=10; echo "$l"; }
status=0
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
say() { printf '[run_all %4ds] %s\n' "$SECONDS" "$*" | tee -a "$OUT/summary.log"; }

{
  nvidia-smi
  nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  grep -i -E 'profil' /proc/driver/nvidia/params 2>/dev/null
  command -v ncu
  uname -a
  id
  ls -l /usr/include/openssl/evp.h
  dpkg -l 2>/dev/null | grep -E "libgtest|libbenchmark|libssl-dev|libspdlog|libfmt" | cut -c1-80
} >"$OUT/environment.log" 2>&1
say "environment: $(grep -m1 -o 'NVIDIA H[0-9]*[^|]*' "$OUT/environment.log" | head -1)"

if stage build; then
  say "building (./run gpu-build, $KFORGE_JOBS jobs)"
  # Keep going past a failed target: the tests of what did build still report.
  if ! KFORGE_KEEP_GOING=1 timeout "$(left)" ./run gpu-build >"$OUT/build.log" 2>&1; then
    status=1
    say "BUILD FAILED; first errors:"
    grep -E -m 40 'error|Error|FAILED' "$OUT/build.log" | cut -c1-400 | tee -a "$OUT/summary.log"
  else
    say "build done"
  fi
fi

# Tests and benchmarks run outside ./run, so the libraries it unpacked from
# .debs (ZeroMQ for the kforge CLI) must be found here too.
if [ -d /opt/kdeps/usr/lib/x86_64-linux-gnu ]; then
  export LD_LIBRARY_PATH=/opt/kdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# GPU tests one at a time: they share the GPU and time kernels.
regex=()
[ -n "${KFORGE_GPU_TEST_REGEX:-}" ] && regex=(-R "$KFORGE_GPU_TEST_REGEX")
[ -n "${KFORGE_GPU_TEST_EXCLUDE:-}" ] && regex+=(-E "$KFORGE_GPU_TEST_EXCLUDE")
if stage test; then
  say "GPU tests (ctest -L gpu)"
  timeout "$(left)" ctest --test-dir build/gpu -L gpu -j 1 --output-on-failure --timeout 300 "${regex[@]}" \
    --output-junit "$OUT/gpu-tests.xml" >"$OUT/gpu-tests.log" 2>&1 || status=1
  grep -E 'tests passed|tests failed|Total Test time|\*\*\*Failed|Timeout|Not Run' "$OUT/gpu-tests.log" |
    tee -a "$OUT/summary.log"
fi

if stage bench; then
  say "benchmarks (bench_cuda)"
  timeout "$(left)" build/gpu/bench/cuda/bench_cuda --benchmark_out="$OUT/bench_cuda.json" \
    --benchmark_out_format=json >"$OUT/bench_cuda.log" 2>&1 || status=1
  grep -E '^BM_|ERROR|error' "$OUT/bench_cuda.log" | tee -a "$OUT/summary.log"
  if [ -x build/gpu/bench/compile/bench_compile ]; then
    filter=${KFORGE_BENCH_COMPILE_FILTER:--NvccTorchExtension}
    say "benchmarks (bench_compile --benchmark_filter=$filter)"
    timeout "$(left)" build/gpu/bench/compile/bench_compile --benchmark_filter="$filter" \
      >"$OUT/bench_compile.log" 2>&1 || status=1
    grep -E '^BM_' "$OUT/bench_compile.log" | tee -a "$OUT/summary.log"
  fi
fi
say "done (status $status); logs in $OUT"
exit $status
