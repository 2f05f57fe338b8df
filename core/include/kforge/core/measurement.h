// The facts a step established about a candidate: the single input of every
// reward function (reward/), produced by the environment's backends (env/).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"

namespace kforge {

// A check that caught the candidate doing something a correct, honest kernel
// never does (docs/architecture.md#reward-hacking). A violation forfeits any speed reward.
struct Violation {
  std::string check;   // stable name, e.g. "foreign_stream", "input_mutation"
  std::string detail;  // human-readable evidence
};

enum class Outcome {
  kNotRun,  // the action did not get this far (e.g. compile only)
  kCompileError,
  kRejected,      // refused before running (forbidden symbol, bad flag, ...)
  kRuntimeError,  // kf_forward returned non-zero or a CUDA error
  kCrash,         // the runner died (signal, illegal address, abort, exit)
  kTimeout,
  kWrong,      // ran, outputs do not match the reference
  kViolation,  // a hack check fired
  kCorrect,    // verified on every seed and shape variant
};

const std::string& outcome_name(Outcome outcome);

struct Measurement {
  std::string action;  // compile | verify | profile | submit | analyze
  bool compiled = false;
  Outcome outcome = Outcome::kNotRun;
  bool timed = false;                     // timing ran and produced numbers
  std::optional<double> candidate_ms;     // median
  std::optional<double> eager_ms;         // reference measured in the same run
  std::optional<double> compile_ms;       // torch.compile baseline, scaled to this run
  std::optional<double> speedup_eager;    // eager_ms / candidate_ms
  std::optional<double> speedup_compile;  // compile_ms / candidate_ms
  // The eager speedup's confidence interval (TimingSummary::speedup_interval)
  // and its exact coverage; absent when the timing gave none. The compile
  // speedup's interval is this one scaled by speedup_compile / speedup_eager
  // (the compile baseline is a fixed multiple of this run's eager time).
  std::optional<double> speedup_eager_lo;
  std::optional<double> speedup_eager_hi;
  std::optional<double> speedup_confidence;
  // Share of the candidate's GPU time spent in its own kernels (CUPTI).
  std::optional<double> own_kernel_fraction;
  std::optional<double> energy_j;  // per call, NVML
  std::vector<Violation> violations;
  int turn = 0;  // 0-based index of this step in the episode
  int compile_errors_so_far = 0;

  bool correct() const { return outcome == Outcome::kCorrect; }
};

json to_json(const Measurement& m);
Measurement measurement_from_json(const json& j);

}  // namespace kforge
