// kforge eval over many solutions (re-scoring a dataset of candidate
// kernels): the command's options and display over the resumable batch in
// env::run_eval_batch (kforge/env/eval_batch.h: the input forms, the results
// file, resume), with a progress display, a summary table and JSONL results.
#pragma once

#include <filesystem>

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

// Runs the batch; returns the exit code (0 every pair evaluated, whatever the
// verdicts; 1 some could not be; 2 bad input).
int run_batch(const BatchArgs& args, const env::EnvConfig& config);

}  // namespace kforge::cli
