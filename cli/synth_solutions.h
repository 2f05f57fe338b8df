// Proof that synthesized tasks are solvable (`kforge synth --solutions on`):
// where the template policy's code generator
// (rollout/src/policy/template_policy) covers a task's ops, its naive kernel
// (the default variant) is written to <out>/solutions/ and judged by the
// environment as a submit is (every verification seed and shape variant, then
// timing against the eager baseline, to target_rse: a shipped speedup is a
// label, not a reward); only verified solutions stay there.
// solutions/index.json says, per task, whether it was covered, the verdict and
// the speedup, and per op how many tasks use it, are covered and verified,
// and which ops the generator cannot generate. The dataset card reads it.
//
// Mode: `cpp` on the CPU backend (the CPU judge compiles and verifies C++),
// `cuda` on the GPU (scripts/gpu/synth_h200.sh runs that stage: nothing here
// can run a CUDA kernel). Resumable: judged pairs are kept in
// solutions/results.jsonl (env/eval_batch.h) and not judged again.
#pragma once

#include <filesystem>
#include <string>

namespace kforge::cli {

struct SolutionOptions {
  std::string backend = "cpu";  // cpu | cuda: the judge, and so the mode
  int concurrency = 0;          // episodes in flight; 0: the env config's
  // Judge at most this many covered tasks not judged yet (0: all), in
  // tasks.jsonl order; a rerun judges the next ones. What bounds the step's
  // time (a CUDA template compiles in seconds with nvcc).
  int64_t limit = 0;
  // Stop starting solutions after this many seconds (0: no limit): the ones
  // judged are written and indexed, the rest stay "not judged" for a rerun
  // (EvalBatchOptions::time_limit_s).
  double time_limit_s = 0;
};

// Returns a one-line note for the log (covered, verified, median speedup).
std::string add_template_solutions(const std::filesystem::path& out, const SolutionOptions& options);

}  // namespace kforge::cli
