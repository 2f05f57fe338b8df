// kforge eval over many solutions (re-scoring a dataset of candidate
// kernels): the command's options and display over the resumable batch in
// env::run_eval_batch (kforge/env/eval_batch.h: the input forms, the results
// file, resume), with a progress display, a summary table and JSONL results.
#pragma once

#include <filesystem>

#include "kforge/env/env_config.h"
#include "kforge/env/eval_batch.h"

namespace kforge::cli {

// The library's options (what to score, where the results go) and how the
// command shows them.
struct BatchArgs : env::EvalBatchOptions {
  bool json_output = false;     // the summary as JSON on stdout
  bool progress_lines = false;  // plain lines even on a terminal
};

// Runs the batch; returns the exit code (0 every pair evaluated, whatever the
// verdicts; 1 some could not be; 2 bad input).
int run_batch(const BatchArgs& args, const env::EnvConfig& config);

}  // namespace kforge::cli
