#!/usr/bin/env bash
# Data synthesis on the GPU machine (docs/data-synthesis.md): builds kforge
# and the judge, synthesizes N tasks (default 1000) on the GPU with eager
# baselines from the CUDA judge, adds torch.compile baselines for a sample
# (merged into tasks.jsonl), judges the template generator's naive CUDA
# solutions (solutions/), audits the set for shortcuts (sharded PyTorch
# processes on the GPU), writes the split, reach estimate and card, packs the
# dataset and prints tasks per GPU-hour.
#
#   OUT=/some/dir bash scripts/gpu/synth_h200.sh
#
# The dataset is built in $SYNTH_WORK (default build/gpu-synth; a thousand
# .py files cannot come back from the device tool, which returns at most 8
# files, 2 folders deep) and $OUT gets 8 files:
#   summary.json                counts, target, rejection histogram, tasks per GPU-hour, the
#                               shortcut audit's line, each
#                               stage's exit code (rewritten after every stage: partial results)
#   summary.log                 stage lines, kforge synth's JSON summaries, tasks per GPU-hour
#   build.log                   ./run gpu-build
#   synth.log                   nvidia-smi, kforge synth's progress lines, the torch.compile log
#   DATASET_CARD.md             counts, op/op-count/dtype histograms, distributions, rejections
#   contamination_report.json   threshold, rule, every task's nearest KernelBench problem
#   rejections.json             the rejection histogram
#   synth_dataset.tar.gz        the whole dataset folder: tasks.jsonl (eager and torch.compile
#                               baselines merged in), slots.jsonl, kernelbench/*.py,
#                               solutions/ (verified naive CUDA kernels, index.json),
#                               split/, reach.json, audit_shortcuts.json, plots/*.png, the
#                               card and reports
#
# Time: every stage runs under `timeout`, and the stages share
# KFORGE_DEADLINE_S (default 290 s from the start: one command within ~5
# minutes of device time; the device tool's own limit is 600 s). The build
# (kforge, kforge-judge, kforge-runner only) takes ~60-100 s with 16 jobs; the
# synthesis gets what it left minus SYNTH_RESERVE_S (60) for the
# torch.compile sample and packing. At its deadline kforge synth gets SIGINT:
# attempts in flight finish, committed tasks stay and the reports are written
# (exit 1, "interrupted"). Rerun with STAGES=synth,compile,pack while the
# machine is warm and it continues the same set (same seed): tasks per
# GPU-hour is computed over the wall time of every round.
#
# Later stages, each under its own timeout and resumable:
#   solutions  kforge synth --solutions on: the template generator's naive CUDA kernel for up
#              to SYNTH_SOLUTIONS (400) covered tasks not judged yet, judged by the CUDA judge
#              (the only place they can be: the CPU machine only compiles them); a
#              1,000-task set had ~170 covered tasks before convolutions were
#              covered, judged in ~90 s on an H100; none is started in the
#              stage's last minute (--solutions-time-s), so that the judged
#              ones are always indexed
#   audit      python3 bench/synth/audit_shortcuts.py $WORK --device cuda --jobs
#              $SYNTH_AUDIT_JOBS (4) --deadline-s <left> --write: the shortcut audit, sharded
#              over processes sharing the GPU, so a 1,000-task set completes in this one call;
#              tasks that ran out of device memory beside the other shards are audited
#              again alone at the end (an H100 set: 20 of 1,000 did)
#   card       bench/synth/audit_contamination.py $WORK --write (the contamination
#              cross-check, seconds on the CPU), then kforge synth --split 0.8,0.1,0.1
#              --reach-sample $SYNTH_REACH (50000): the split, the reach estimate, and
#              the card with every section
#
# A 1,000-task set with every stage takes two device calls (the machine stays
# warm between them and keeps build/ and $SYNTH_WORK):
#   KFORGE_DEADLINE_S=585 STAGES=build,synth,compile,pack OUT=$OUT bash scripts/gpu/synth_h200.sh
#   KFORGE_DEADLINE_S=585 STAGES=solutions,audit,card,pack OUT=$OUT bash scripts/gpu/synth_h200.sh
# The second call's audit stage is, exactly:
#   $KFORGE_PYTHON bench/synth/audit_shortcuts.py build/gpu-synth --device cuda --jobs 4 \
#     --deadline-s <what is left less 30 s> --write
# (CPU: 400 tasks in 26 s with 2 processes; each GPU process first pays its
# CUDA start-up.)
#
# Knobs: SYNTH_N (1000), SYNTH_SEED (1), SYNTH_WORK, SYNTH_FRESH=1 (start the
# set over), SYNTH_RESERVE_S (60, kept for compile to card), SYNTH_COMPILE_SAMPLE
# (32 tasks; 0 skips), SYNTH_SOLUTIONS (400; 0 skips), SYNTH_AUDIT_JOBS (4),
# SYNTH_REACH (50000), KFORGE_DEADLINE_S (290; 585 for the whole 10-minute
# command), STAGES (build,synth,compile,solutions,audit,card,pack), KFORGE_BIN
# and SYNTH_BACKEND (dry runs).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build/gpu-out}
WORK=${SYNTH_WORK:-$PWD/build/gpu-synth}
mkdir -p "$OUT"
export PATH=/opt/torch/.venv/bin:$PATH
export KFORGE_JOBS=${KFORGE_JOBS:-16}
N=${SYNTH_N:-1000}
SEED=${SYNTH_SEED:-1}
SAMPLE=${SYNTH_COMPILE_SAMPLE:-32}
RESERVE=${SYNTH_RESERVE_S:-60}
DEADLINE=${KFORGE_DEADLINE_S:-290}
STAGES=${STAGES:-build,synth,compile,solutions,audit,card,pack}
SOLUTIONS=${SYNTH_SOLUTIONS:-400}
AUDIT_JOBS=${SYNTH_AUDIT_JOBS:-4}
REACH=${SYNTH_REACH:-50000}
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
left() { local l=$((DEADLINE - SECONDS)); ((l < 10)) && l=10; echo "$l"; }
say() { printf '[synth_h200 %4ds] %s\n' "$SECONDS" "$*" | tee -a "$OUT/summary.log"; }
status=0
build_rc=- synth_rc=- compile_rc=- solutions_rc=- audit_rc=- card_rc=- pack_rc=-
# summary.json from what exists now: the counts in tasks.jsonl, the rejection
# histogram, the rounds' rate, kforge synth's last JSON line, each stage's
# exit code. Rewritten after every stage, so a later failure keeps it.
write_summary() {
  "${SUMMARY_PYTHON:-python3}" - "$WORK" "$OUT/summary.json" "$N" "$SEED" "$SECONDS" "$build_rc" "$synth_rc" \
    "$compile_rc" "$solutions_rc" "$audit_rc" "$card_rc" "$pack_rc" <<'EOF' 2>>"$OUT/summary.log" || say "summary.json could not be written"
import json, os, sys
work, out, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = {"target": n, "seed": seed, "script_s": int(sys.argv[5]),
     "exit": dict(zip(["build", "synth", "compile", "solutions", "audit", "card", "pack"], sys.argv[6:13]))}
def lines(p):
    try:
        return [l for l in open(p) if l.strip()]
    except OSError:
        return []
tasks = [json.loads(l) for l in lines(os.path.join(work, "tasks.jsonl"))]
base = [t.get("baselines") or {} for t in tasks]
s["tasks"] = len(tasks)
s["reached_target"] = len(tasks) >= n
s["tasks_with_eager_baseline"] = sum(1 for b in base if b.get("eager_ms"))
s["tasks_with_compile_baseline"] = sum(1 for b in base if b.get("compile_ms"))
s["eager_baseline_devices"] = sorted({b.get("device", "") for b in base} - {""})
rounds = [tuple(map(int, l.split())) for l in lines(os.path.join(work, "rounds.txt"))]
made, wall = sum(r[0] for r in rounds), sum(r[1] for r in rounds)
s["rounds"] = [{"tasks": r[0], "wall_s": r[1]} for r in rounds]
s["tasks_per_gpu_hour"] = round(made * 3600 / wall) if wall else None
try:
    rej = json.load(open(os.path.join(work, "rejections.json")))
    s["attempts"], s["rejected"], s["rejections"] = rej.get("attempts"), rej.get("rejected"), rej.get("by_reason")
except (OSError, ValueError) as e:
    s["rejections"] = "unavailable: %s" % e
for key, path in (("shortcut_audit", "audit_shortcuts.json"), ("contamination_cross_check", "audit_contamination.json"),
                  ("reach", "reach.json"),
                  ("split", os.path.join("split", "split.json"))):
    try:
        s[key] = json.load(open(os.path.join(work, path)))
        if key == "split":
            s[key].pop("family_splits", None)
    except (OSError, ValueError):
        pass
try:
    sol = json.load(open(os.path.join(work, "solutions", "index.json")))
    s["solutions"] = {k: sol.get(k) for k in ("mode", "device", "tasks", "covered", "judged", "verified", "speedup",
                                              "cannot_generate")}
except (OSError, ValueError):
    pass
last = lines(os.path.join(work, "last_run.json"))
if last:
    try:
        s["last_synth_run"] = json.loads(last[-1])
    except ValueError:
        pass
json.dump(s, open(out, "w"), indent=1)
EOF
}

if stage build; then
  say "building kforge, kforge-judge, kforge-runner (./run gpu-build)"
  KFORGE_TARGETS="kforge kforge-judge kforge-runner" timeout "$(left)" ./run gpu-build >"$OUT/build.log" 2>&1
  build_rc=$?
  if [ "$build_rc" -ne 0 ]; then
    say "BUILD FAILED (exit $build_rc; 124: out of time)"
    grep -E -m 30 'error|FAILED' "$OUT/build.log" | cut -c1-400 | tee -a "$OUT/summary.log"
    write_summary
    exit 1
  fi
  say "build done"
fi
if [ -d /opt/kdeps/usr/lib/x86_64-linux-gnu ]; then
  export LD_LIBRARY_PATH=/opt/kdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# KFORGE_BIN and SYNTH_BACKEND=cpu: a dry run of the later stages on a
# machine without a GPU (STAGES=synth,compile,pack).
K=${KFORGE_BIN:-build/gpu/cli/kforge}
BACKEND=${SYNTH_BACKEND:-cuda}
export KFORGE_PYTHON=${KFORGE_PYTHON:-$(command -v python3)}
# The card's plots need matplotlib: the venv has it; Debian's python3 otherwise.
if ! "$KFORGE_PYTHON" -c 'import matplotlib' 2>/dev/null && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  export KFORGE_PLOT_PYTHON=/usr/bin/python3
fi
count() { if [ -f "$WORK/tasks.jsonl" ]; then wc -l <"$WORK/tasks.jsonl"; else echo 0; fi; }

if stage synth; then
  [ "${SYNTH_FRESH:-0}" = 1 ] && rm -rf "$WORK"
  mkdir -p "$WORK"
  {
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,temperature.gpu --format=csv
    "$KFORGE_PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  } >>"$OUT/synth.log" 2>&1
  before=$(count)
  budget=$(($(left) - RESERVE))
  ((budget < 30)) && budget=30
  say "synthesizing up to $N tasks (--backend $BACKEND, seed $SEED, $(nproc) workers, $before already committed, deadline ${budget} s)"
  start=$SECONDS
  # --foreground: only kforge gets the SIGINT; its judge finishes the request
  # in flight and is shut down by kforge. -k: a hard stop 60 s later.
  # --preserve-status: kforge's own exit code (1: interrupted, tasks kept).
  timeout --foreground --preserve-status -s INT -k 60 "$budget" \
    "$K" synth --backend "$BACKEND" --seed "$SEED" --out "$WORK" --n "$N" --compile-baselines off >"$WORK/last_run.json" 2>>"$OUT/synth.log"
  rc=$?
  synth_rc=$rc
  wall=$((SECONDS - start))
  after=$(count)
  # Rounds add up: tasks made and wall time over every round of this set.
  echo "$((after - before)) $wall" >>"$WORK/rounds.txt"
  cat "$WORK/last_run.json" >>"$OUT/summary.log"
  grep -E '^synth: ' "$OUT/synth.log" | tail -1 | tee -a "$OUT/summary.log"
  say "kforge synth exit $rc: $after tasks committed ($((after - before)) in this round, ${wall} s of wall time)"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  awk -v gpu="${gpu:-no GPU: $BACKEND}" '{ t += $1; w += $2 } END { if (w > 0) printf "[synth_h200] tasks per GPU-hour: %.0f (%d tasks in %d s of wall time over %d round(s), one %s)\n", t * 3600 / w, t, w, NR, gpu }' \
    "$WORK/rounds.txt" | tee -a "$OUT/summary.log"
  if [ "$rc" -eq 1 ] && [ "$after" -lt "$N" ]; then
    say "stopped at the deadline: rerun with STAGES=synth,compile,pack to continue the same set"
  elif [ "$rc" -ne 0 ]; then
    status=1
    tail -5 "$OUT/synth.log" | tee -a "$OUT/summary.log"
  fi
  write_summary
fi

if stage compile && [ "$SAMPLE" -gt 0 ] && [ -s "$WORK/tasks.jsonl" ]; then
  tasks=$(count)
  # Compiles stop starting at `budget`; the card and plots are rewritten
  # after them (~10 s) and packing needs the last ~10 s.
  budget=$(($(left) - 30))
  ((budget < 20)) && budget=20
  say "torch.compile baselines for up to $SAMPLE tasks, $(nproc) processes, ${budget} s (merged into tasks.jsonl)"
  # N = the committed count: nothing left to synthesize; --baselines none: no
  # judge for this round. The compile baselines are merged into tasks.jsonl
  # and the card and reports are written again.
  timeout --foreground -k 10 "$((budget + 20))" "$K" synth --backend "$BACKEND" --seed "$SEED" --out "$WORK" \
    --n "$tasks" --baselines none --compile-baselines on --compile-sample "$SAMPLE" --compile-time-s "$budget" \
    >>"$OUT/summary.log" 2>>"$OUT/synth.log"
  compile_rc=$?
  [ "$compile_rc" -ne 0 ] && status=1
  cat "$WORK/compile_baselines.log" >>"$OUT/synth.log" 2>/dev/null
  tail -1 "$WORK/compile_baselines.log" 2>/dev/null | tee -a "$OUT/summary.log"
  say "tasks with a torch.compile baseline: $(grep -c '"compile_ms"' "$WORK/tasks.jsonl")"
  write_summary
fi

# N = the committed count and --baselines none in the rounds below: nothing
# more is synthesized; each round adds its files and rewrites the card.
if stage solutions && [ "$SOLUTIONS" -gt 0 ] && [ -s "$WORK/tasks.jsonl" ]; then
  tasks=$(count)
  budget=$(($(left) - 45))
  # With the audit after it in this call, the audit keeps what it needs
  # (0.42 s a task with 4 shards on an H100): judged rows are kept, and a
  # later call with STAGES=solutions judges the rest.
  stage audit && budget=$((budget - tasks * 45 / 100))
  ((budget < 20)) && budget=20
  # No solution starts in the last minute (those in flight finish, then the
  # index is written); the timeout is only the backstop.
  starts=$((budget - 60))
  ((starts < 10)) && starts=10
  say "template solutions: up to $SOLUTIONS covered tasks judged on $BACKEND, ${budget} s, none started after ${starts} s (solutions/)"
  timeout --foreground -k 10 "$budget" "$K" synth --backend "$BACKEND" --seed "$SEED" --out "$WORK" --n "$tasks" \
    --baselines none --compile-baselines off --solutions on --solutions-limit "$SOLUTIONS" \
    --solutions-time-s "$starts" >>"$OUT/summary.log" 2>>"$OUT/synth.log"
  solutions_rc=$?
  [ "$solutions_rc" -ne 0 ] && say "solutions exit $solutions_rc (124: out of time; judged rows are kept, a rerun continues)"
  grep -E '^kforge synth: solutions' "$OUT/synth.log" | tail -1 | tee -a "$OUT/summary.log"
  write_summary
fi

if stage audit && [ -s "$WORK/tasks.jsonl" ]; then
  budget=$(($(left) - 30))
  ((budget < 20)) && budget=20
  say "shortcut audit: $AUDIT_JOBS processes on $BACKEND, deadline ${budget} s"
  timeout -k 10 "$((budget + 15))" "$KFORGE_PYTHON" bench/synth/audit_shortcuts.py "$WORK" --device "$BACKEND" \
    --jobs "$AUDIT_JOBS" --deadline-s "$budget" --write >>"$OUT/summary.log" 2>>"$OUT/synth.log"
  audit_rc=$?
  [ "$audit_rc" -ne 0 ] && status=1
  write_summary
fi

if stage card && [ -s "$WORK/tasks.jsonl" ]; then
  tasks=$(count)
  # The contamination cross-check, on the CPU in seconds; the card shows it.
  "$KFORGE_PYTHON" bench/synth/audit_contamination.py "$WORK" --write >>"$OUT/summary.log" 2>>"$OUT/synth.log" ||
    status=1
  say "split, reach estimate ($REACH graphs) and the card"
  timeout --foreground -k 10 "$(left)" "$K" synth --backend "$BACKEND" --seed "$SEED" --out "$WORK" --n "$tasks" \
    --baselines none --compile-baselines off --split 0.8,0.1,0.1 --reach-sample "$REACH" \
    >>"$OUT/summary.log" 2>>"$OUT/synth.log"
  card_rc=$?
  [ "$card_rc" -ne 0 ] && status=1
  grep -E '^kforge synth: (reach|split)' "$OUT/synth.log" | tail -2 | tee -a "$OUT/summary.log"
  write_summary
fi

if stage pack && [ -d "$WORK" ]; then
  cp "$WORK/DATASET_CARD.md" "$WORK/contamination_report.json" "$WORK/rejections.json" "$OUT/" 2>/dev/null ||
    say "the card or reports are missing in $WORK"
  timeout 60 tar czf "$OUT/synth_dataset.tar.gz" -C "$(dirname "$WORK")" "$(basename "$WORK")"
  pack_rc=$?
  [ "$pack_rc" -ne 0 ] && status=1
  say "packed $(count) tasks: $(du -h "$OUT/synth_dataset.tar.gz" | cut -f1) synth_dataset.tar.gz"
fi
write_summary
say "done (status $status): $OUT/summary.json"
exit $status
