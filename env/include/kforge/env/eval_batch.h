// Resumable scoring of many solutions (re-scoring a dataset of candidate
// kernels; `kforge eval --solutions`): pairs of task and solution from a
// folder, a list file or a JSONL file, evaluated as submit steps through one
// EnvPool (and so through the device pool: every configured GPU or CPU
// slot), one JSONL result row per pair appended as it finishes.
//
// Resumable: a pair is identified by its task's and solution's content (a
// moved dataset resumes; an edited file is a new pair); pairs whose row is
// already in the results file are skipped, except those that got a system
// error. A torn last row (a killed run) is cut off and its pair evaluated
// again.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env_config.h"
#include "kforge/env/step_info.h"

namespace kforge::env {

struct EvalBatchOptions {
  std::filesystem::path solutions;  // a folder, a list file or a .jsonl file
  std::filesystem::path task;       // the task of a folder (or of one-column list lines)
  std::filesystem::path results;    // JSONL, appended to
  int concurrency = 0;              // episodes in flight; 0: placement.episodes_per_device x devices
  // Seconds after the batch began past which no pair is started (0: no
  // limit); pairs in flight finish. A pair not started gets no row (the
  // summary's `not_started`), so a rerun evaluates it: a batch that must fit
  // a time slot ends with every row it judged written.
  double time_limit_s = 0;
};

// One pair as read from the input: either loaded or with the reason it
// could not be (which becomes its result row).
struct EvalBatchPair {
  std::string label;     // "<task file> <solution file>", or the JSONL line's id
  std::string task_ref;  // where the task came from, for the results
  std::string solution_ref;
  std::optional<TaskSpec> task;
  std::optional<Solution> solution;
  std::string error;  // bad input: why the pair cannot be evaluated
  std::string key;    // sha256 of the task's and the solution's content (resume)
};

// Limits on the input: more pairs than this is a mistake, not a dataset, and
// a longer list line is not a pair of paths.
inline constexpr size_t kMaxBatchPairs = 1000000;
inline constexpr size_t kMaxListLineBytes = 8192;

// Reads the pairs. InputError (naming the file and line) for an input that
// is not one of the three forms; a pair whose task or solution does not load
// is returned with `error` set, so that the rest of the batch still runs.
std::vector<EvalBatchPair> read_batch_pairs(const EvalBatchOptions& options, SolutionMode default_mode);

// Told of the batch's progress (a display); both may be empty.
struct EvalBatchObserver {
  std::function<void(size_t to_evaluate)> on_start;  // pairs with no earlier row, once
  std::function<void(const json& row)> on_row;       // each row as it is appended
};

struct EvalBatchResult {
  // One per distinct pair, in input order (earlier rows included), but for
  // pairs the time limit left unstarted.
  std::vector<json> rows;
  size_t evaluated_now = 0;
  size_t from_earlier = 0;
  // {"pairs", "evaluated_now", "from_earlier_results", "not_evaluated", "not_started",
  //  "verdicts": {verdict: n}, "seconds", "results", "speedup"?: {
  //  "correct_timed", "median", "geomean", "best": {"speedup", "label"},
  //  "faster_than_eager"}}
  json summary;
};

// Runs the batch. InputError for bad input as a whole (no pairs, a results
// file that is not one); pairs that cannot be evaluated get a row saying why.
EvalBatchResult run_eval_batch(const EvalBatchOptions& options, const EnvConfig& config,
                               const EvalBatchObserver& observer = {});

}  // namespace kforge::env
