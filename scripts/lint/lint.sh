#!/usr/bin/env bash
# The house rules a program can check (docs/contributing.md).
#
#   lint.sh           (what `./run lint` and CI run, ~1 minute on two cores)
#     1. scripts/lint/check_sources.py: file size, function size (C++ by
#        cxx_functions.py, Python by its ast), private namespace names;
#     2. clang-format --dry-run --Werror over the tracked C++ files.
#   lint.sh --tidy [FILE...]
#     clang-tidy's readability-function-size (LineThreshold in .clang-tidy) on
#     these translation units, or on every C++ source unit of the modules in
#     build/default/compile_commands.json. The same rule as pass 1 read from the
#     AST: 11 CPU-minutes for the tree (why CI runs pass 1 instead, see
#     docs/contributing.md). Needs build/default configured.
# Every pass runs even when an earlier one failed, so one run lists everything.
# JOBS (default: nproc) processes run at once.
set -uo pipefail
cd "$(dirname "$0")/../.."
JOBS=${JOBS:-$(nproc)}
BUILD=${KFORGE_LINT_BUILD:-build/default}
# Inputs, not our code: candidate solutions (the bundled examples, the test
# suites' data, the exploit and honest corpora), fuzz corpora, the lint's own
# fixture. Their bytes are what tests assert on (line counts, diagnostics).
NOT_OURS='^(examples/|tests/adversarial/|tests/honest/|tests/lint/fixtures/|tests/.*/data/|fuzz/.*/corpus/)'
# The modules whose functions are held to the size rule (tests read as scenarios).
MODULES='^(core|reward|data_synth|env|rollout|cli)/'

log() { printf '\033[1m[lint]\033[0m %s\n' "$*" >&2; }

module_units() {
  /usr/bin/python3 - "$BUILD/compile_commands.json" "$MODULES" <<'EOF'
import json, os, re, sys
root = os.getcwd() + "/"
for f in sorted({e["file"] for e in json.load(open(sys.argv[1]))}):
    rel = f[len(root):] if f.startswith(root) else f
    if re.match(sys.argv[2], rel) and rel.endswith((".cpp", ".cu")):
        print(rel)
EOF
}

# clang-tidy prints "path:line:col: warning: ... [readability-function-size]"
# and notes; only the warnings count, once each (a header's inline function is
# seen by every unit that includes it).
tidy() {
  if [ ! -f "$BUILD/compile_commands.json" ]; then
    log "$BUILD/compile_commands.json is missing: configure first (./run build)"
    return 2
  fi
  local units=("$@")
  [ ${#units[@]} -gt 0 ] || mapfile -t units < <(module_units)
  log "clang-tidy readability-function-size on ${#units[@]} units, $JOBS at a time"
  local found
  found=$(printf '%s\n' "${units[@]}" | xargs -P "$JOBS" -n 4 clang-tidy -p "$BUILD" --quiet \
    --checks='-*,readability-function-size' 2>/dev/null |
    grep -E 'warning: .*\[readability-function-size\]' | sort -u)
  [ -z "$found" ] && return 0
  echo "$found"
  return 1
}

if [ "${1:-}" = "--tidy" ]; then
  shift
  tidy "$@"
  exit $?
fi

status=0
log "1/2 file and function sizes, namespace names (scripts/lint/check_sources.py)"
/usr/bin/python3 scripts/lint/check_sources.py || status=1

log "2/2 clang-format"
mapfile -t cxx < <(git ls-files '*.cpp' '*.h' '*.cu' | grep -v -E "$NOT_OURS")
unformatted=$(printf '%s\n' "${cxx[@]}" | xargs -P "$JOBS" -n 32 clang-format --dry-run 2>&1 |
  grep -oE '^[^:]+:[0-9]+:[0-9]+: warning' | cut -d: -f1 | sort -u)
if [ -n "$unformatted" ]; then
  echo "$unformatted" | sed 's/$/: not clang-format clean (clang-format -i FILE)/'
  status=1
fi

[ "$status" -eq 0 ] && log "clean: ${#cxx[@]} C++ files formatted and within the sizes"
exit "$status"
