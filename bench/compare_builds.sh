#!/usr/bin/env bash
# Before/after comparison of the CPU benchmarks of two builds of this tree
# (e.g. a worktree at the commit before a refactor and one at the commit
# after it, both configured with `cmake --preset default`).
#
#   bench/compare_builds.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [pairs]
#
# Runs each chosen benchmark once from each build dir, `pairs` times (default
# 3), and prints one line per headline figure: before median, after median,
# after/before ratio, and the min-max of each side (bench/compare_builds.py
# does the parsing and the table).
#
# Why interleaved: the dev machines are shared and their load drifts by tens
# of percent over minutes. Running all "before" runs and then all "after" runs
# would let that drift pass for a regression; here the two sides of a pair run
# back to back, and the order alternates from pair to pair (A B, B A, A B, ...)
# so that neither side is always the one that runs second. Medians over the
# pairs, with the min-max beside them, say whether a difference is beyond the
# noise.
#
# Benchmarks (each one's own header comment says what it measures):
#   env      bench/env/bench_env                 env step overhead (step engine, StepInfo)
#   server   bench/server/bench_server_flood     `kforge serve` latency, quiet and under flood
#   stream   bench/stream/bench_stream           trajectory sender/spool/receiver throughput and ack latency
#   exec     bench/exec/bench_exec               judge round trip and CPU evaluation (verify, time)
#   rollout  bench/rollout/bench_rollout         rollout runner steps/s against a direct EnvPool
#   pool     bench/exec/bench_pool               device pool throughput (slow: not in the default set)
# Choose with BENCHES="env server" (default: env server stream exec rollout).
# Each run has a time limit of RUN_TIMEOUT seconds (default 300).
# Raw outputs go to OUT_DIR (default: a new directory under /tmp), kept so
# that a figure can be checked against what the bench printed.
#
# A bench missing from one build (not built, or not present at that commit)
# or a run that fails is reported in the table, not fatal.
set -euo pipefail

usage() {
  echo "usage: $0 BEFORE_BUILD_DIR AFTER_BUILD_DIR [pairs]" >&2
  exit 2
}
if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage; fi
before=$(cd "$1" && pwd) || usage
after=$(cd "$2" && pwd) || usage
pairs=${3:-3}
[[ $pairs =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
benches=${BENCHES:-env server stream exec rollout}
run_timeout=${RUN_TIMEOUT:-300}
out=${OUT_DIR:-$(mktemp -d /tmp/compare_builds.XXXXXX)}
mkdir -p "$out"

# bench name -> binary path inside a build dir, and the arguments that keep
# one run short (about a minute or less on a 2-core machine).
binary_of() {
  case $1 in
    env) echo bench/env/bench_env ;;
    server) echo bench/server/bench_server_flood ;;
    stream) echo bench/stream/bench_stream ;;
    exec) echo bench/exec/bench_exec ;;
    rollout) echo bench/rollout/bench_rollout ;;
    pool) echo bench/exec/bench_pool ;;
    *) return 1 ;;
  esac
}
# $2: where Google Benchmark writes its JSON (benches that are not Google
# Benchmark binaries ignore it).
args_of() {
  case $1 in
    env | exec | pool) echo "--benchmark_out=$2 --benchmark_out_format=json" ;;
    stream) echo "--benchmark_out=$2 --benchmark_out_format=json --benchmark_min_time=0.2 --per_worker=2000 --fault_runs=0" ;;
    server) echo "--seconds 5" ;;
    rollout) echo "--groups 3 --rounds 1" ;;
  esac
}

for b in $benches; do
  binary_of "$b" >/dev/null || { echo "unknown bench '$b' (known: env server stream exec rollout pool)" >&2; exit 2; }
done

# run_one BENCH SIDE BUILD_DIR PAIR: leaves $out/BENCH.SIDE.PAIR.{txt,json,rc}
# or $out/BENCH.SIDE.missing.
run_one() {
  local bench=$1 side=$2 dir=$3 pair=$4
  local bin
  bin="$dir/$(binary_of "$bench")"
  local stem="$out/$bench.$side.$pair"
  if [ ! -x "$bin" ]; then
    echo "$bin" >"$out/$bench.$side.missing"
    echo "  $bench/$side: missing ($bin)"
    return 0
  fi
  local rc=0 t0 t1
  t0=$(date +%s)
  # shellcheck disable=SC2046  # the arguments are meant to split
  timeout --kill-after=10 "$run_timeout" "$bin" $(args_of "$bench" "$stem.json") >"$stem.txt" 2>&1 || rc=$?
  t1=$(date +%s)
  echo "$rc" >"$stem.rc"
  echo "  $bench/$side: rc $rc, $((t1 - t0)) s"
}

echo "compare_builds: before $before, after $after, $pairs pairs, benches: $benches"
echo "  raw outputs in $out; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
{
  echo "before $before"
  echo "after $after"
  echo "pairs $pairs"
  echo "benches $benches"
} >"$out/meta.txt"
for ((p = 1; p <= pairs; ++p)); do
  echo "pair $p/$pairs ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
  for b in $benches; do
    if ((p % 2 == 1)); then
      run_one "$b" before "$before" "$p"
      run_one "$b" after "$after" "$p"
    else
      run_one "$b" after "$after" "$p"
      run_one "$b" before "$before" "$p"
    fi
  done
done
echo
/usr/bin/python3 "$here/compare_builds.py" "$out"
