// kforge eval over many solutions (re-scoring a dataset of candidate
// kernels): pairs of task and solution from a folder, a list file or a JSONL
// file, evaluated as submit steps through one EnvPool (and so through the
// device pool: every configured GPU or CPU slot), with a progress display, a
// summary table and JSONL results. Resumable: pairs whose result is already
// in the results file are skipped, except those that got a system error.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/solution.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/env_config.h"

namespace kforge::cli {

struct BatchArgs {
  std::filesystem::path solutions;  // a folder, a list file or a .jsonl file
  std::filesystem::path task;       // the task of a folder (or of one-column list lines)
  std::filesystem::path results;    // JSONL, appended to
  int concurrency = 0;              // episodes in flight; 0: placement.episodes_per_device x devices
  bool json_output = false;         // the summary as JSON on stdout
  bool progress_lines = false;      // plain lines even on a terminal
};

// One pair as read from the input: either loaded or with the reason it
// could not be (which becomes its result line).
struct BatchPair {
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
std::vector<BatchPair> read_batch_pairs(const BatchArgs& args, SolutionMode default_mode);

// Runs the batch; returns the exit code (0 every pair evaluated, whatever the
// verdicts; 1 some could not be; 2 bad input).
int run_batch(const BatchArgs& args, const env::EnvConfig& config);

}  // namespace kforge::cli
