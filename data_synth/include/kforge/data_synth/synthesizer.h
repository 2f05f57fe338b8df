// The synthesis run (docs/data-synthesis.md#pipeline): compose -> sample shapes -> contamination ->
// dedup pre-check -> filters -> baseline (through the caller's callback) ->
// commit in slot order. `kforge synth` drives it (cli/synth_command.cpp).
//
// Determinism: task slot i is the first attempt k = 0, 1, ... (attempt seed
// derived from (seed, i, k)) that passes every filter and is neither
// contaminated nor a duplicate of slots 0..i-1. Workers run slots in parallel
// and speculatively; a single committer appends them to tasks.jsonl in slot
// order, so the file is the same for every thread count and schedule.
//
// Resumption: tasks.jsonl holds the committed slots (whole lines only; a torn
// last line is cut off); slots.jsonl holds each committed slot's attempt
// statistics and measurements, written before the task line. A rerun with the
// same options continues at the first uncommitted slot and produces the same
// file an uninterrupted run would.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kforge/core/task_spec.h"
#include "kforge/data_synth/composer.h"
#include "kforge/data_synth/contamination.h"
#include "kforge/data_synth/filters.h"
#include "kforge/data_synth/shape_sampler.h"

namespace kforge::synth {

// What the judge measured for a task's reference: the eager baseline in the
// environment's own clock, L2 flush and stopping rule.
struct BaselineResult {
  std::optional<double> eager_ms;
  std::string device;  // e.g. "NVIDIA H200" or the CPU model
  // A system error of the judge (it could not answer): the request is made
  // again (SynthConfig::judge_retries), then the attempt is rejected as
  // judge_error.
  std::string error;
  // Non-empty when the judge refused the task (its reference check: what
  // `kforge task check` and the env's reset ask): the attempt is rejected as
  // "judge_check" with this message, so no exported task fails that check.
  std::string invalid;
  json detail = json::object();  // the judge's timing statistics, kept in slots.jsonl
};
// Called from worker threads, possibly concurrently; must be thread-safe. On
// the cuda backend it is called with the device held exclusively (no filter
// work of other slots runs meanwhile), so that the judge times the reference
// on an otherwise idle GPU.
using BaselineFn = std::function<BaselineResult(const TaskSpec&)>;

struct SynthConfig {
  int64_t n = 100;
  uint64_t seed = 0;
  std::string backend = "cpu";  // cpu | cuda: where filters and shape search run
  int workers = 0;              // 0: every core
  ComposeOptions compose;
  ShapeOptions shapes;
  FilterOptions filter;              // device and lock are set from `backend`
  std::filesystem::path signatures;  // empty: default_signature_path()
  double contamination_threshold = kContaminationThreshold;
  // A curriculum (roofline.h): keep only tasks whose predicted headroom (the
  // cost model's eager time over the backend's roofline bound) is in
  // [lo, hi]; others are rejected as headroom_range. Predicted, not measured,
  // so the seed alone decides. Empty: every headroom.
  std::vector<double> headroom_range;
  // A slot that rejects this many attempts in a row stops the run: the
  // options cannot produce tasks (e.g. an unreachable runtime window).
  int max_attempts_per_slot = 2000;
  // A judge system error (BaselineResult::error from a callback that is
  // given) is asked again this many times; still an error, the attempt is
  // rejected as judge_error. A task is never committed without the judge's
  // check.
  int judge_retries = 3;
  // Set (e.g. by a SIGINT handler) to stop early: attempts in flight finish,
  // nothing more is committed, and synthesize() returns with done == false.
  // What was committed stays; a rerun continues from there.
  const std::atomic<bool>* cancel = nullptr;
  // The options that decide which tasks come out, recorded in run.json; a
  // resume with different ones is refused.
  json identity() const;
};

// The output format, recorded in run.json. /2: the cost model decides the
// runtime window. /3: tolerances scaled to the outputs' magnitude and a
// composer that reaches eq, ne and log. /4: contamination by what the kernel
// must do, index reductions drawn as the last op, output_magnitude, and
// difficulty labels and families in each task's meta. The same seed gives
// other tasks under another format; a folder of another format is refused,
// not resumed.
inline constexpr char kSynthFormat[] = "kforge-synth/4";

struct SynthProgress {
  int64_t target = 0;
  int64_t accepted = 0;                       // committed, including resumed ones
  int64_t resumed = 0;                        // committed before this run started
  int64_t attempts = 0;                       // this run's attempts
  int64_t rejected = 0;                       // this run's rejections
  std::map<std::string, int64_t> rejections;  // this run's, by reason
  int64_t judge_retries = 0;                  // judge system errors asked again
  double elapsed_s = 0;
  bool done = false;       // every slot up to the target is committed
  bool cancelled = false;  // stopped early through SynthConfig::cancel
};
using ProgressFn = std::function<void(const SynthProgress&)>;

// Runs until `config.n` tasks are committed under `out_dir` (created if
// needed). Returns the final progress. InputError for an out_dir holding a
// run with other options; SystemError when a slot exhausts its attempts.
SynthProgress synthesize(const SynthConfig& config, const std::filesystem::path& out_dir, const BaselineFn& baseline,
                         const ProgressFn& progress);

// Cuts a file after its last newline (a record torn by a kill). Returns the
// number of bytes removed.
size_t truncate_torn_tail(const std::filesystem::path& path);

}  // namespace kforge::synth
