#!/usr/bin/env bash
# Runs every libFuzzer target of build/fuzz for a bounded time from its seed
# corpus (fuzz/<target>/corpus/, read-only: new inputs go to
# build/fuzz/runs/<target>/), and prints one line per target:
#   fuzz_<target>: <execs> executions in <s> s (<execs/s>/s), <n> new corpus inputs, crashes: <0|file>
# Exit status 1 if any target found a crash (the input is in
# build/fuzz/artifacts/; add it to fuzz/<target>/corpus/ as crash_<what> once
# the reader is fixed).
#
#   scripts/fuzz/run_fuzzers.sh [SECONDS_PER_TARGET] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
build=build/fuzz
mkdir -p "$build/runs" "$build/artifacts"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for d in fuzz/*/; do
    [ -f "$d/fuzz_$(basename "$d").cpp" ] && targets+=("$(basename "$d")")
  done
fi
failed=0
for t in "${targets[@]}"; do
  bin="$build/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then
    echo "fuzz_$t: not built ($bin)"
    failed=1
    continue
  fi
  work="$build/runs/$t"
  rm -rf "$work"
  mkdir -p "$work"
  log="$build/runs/$t.log"
  # -rss_limit_mb and -timeout turn a memory blow-up or a hang into a
  # finding; -max_len lets inputs grow past the 4 KiB limits the readers
  # enforce (identifier runs, launch configurations).
  "$bin" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -max_len=20000 \
    -artifact_prefix="$build/artifacts/$t-" "$work" "fuzz/$t/corpus" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  secs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  added=$(find "$work" -type f | wc -l)
  crash=$(grep -o "Test unit written to [^ ]*" "$log" | head -1 | sed 's/Test unit written to //')
  if [ $rc -ne 0 ] || [ -n "$crash" ]; then
    failed=1
    echo "fuzz_$t: ${execs:-?} executions in ${seconds} s (${secs:-?}/s), $added new corpus inputs, crashes: ${crash:-exit $rc} (log: $log)"
    grep -m1 -E "ERROR: |runtime error:" "$log" | sed 's/^/    /'
  else
    echo "fuzz_$t: ${execs:-?} executions in ${seconds} s (${secs:-?}/s), $added new corpus inputs, crashes: 0"
  fi
done
exit $failed
