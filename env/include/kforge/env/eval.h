// Evaluating a compiled candidate against a task on one device: the request
// the environment sends to an Executor and the report it gets back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/core/action.h"
#include "kforge/core/document.h"
#include "kforge/core/measurement.h"
#include "kforge/core/profile_summary.h"
#include "kforge/core/splitmix64.h"
#include "kforge/core/task_spec.h"
#include "kforge/core/timing_summary.h"
#include "kforge/env/compiler.h"

namespace kforge::env {

// Protocol knobs (docs/architecture.md#verification, #timing). Defaults are the
// production settings; tests shrink the time budgets, never the checks.
struct EvalOptions {
  // Verification.
  int seeds = 5;                   // fresh random inputs per seed, per shape variant
  bool float64_reference = false;  // also judge against a float64 reference
  bool check_determinism = true;   // run every check twice and compare
  // Timing, all in milliseconds of wall time.
  double warmup_ms = 50.0;  // warm-up by time, before samples are kept: at most this long
  // The warm-up may end this early once the GPU's SM clock has reached its
  // speed (JudgeDevice::clocks_at_speed): a GPU kept busy by the previous
  // candidates needs no 50 ms to ramp its clocks; one that was idle still
  // gets them. Devices without a clock reading (the CPU) warm up for
  // warmup_ms. Measured on an H100: 50 ms of warm-up were 53 % of a submit's
  // timing phase (94 ms) on bench_pool's set.
  double warmup_min_ms = 10.0;
  double max_time_ms = 2000.0;  // cap on the sampling phase (both sides)
  int min_samples = 10;
  int max_samples = 2000;
  double target_rse = 0.005;  // stop when the median's relative std. error is below this
  int timing_input_sets = 3;  // pool from which every timed call's fresh inputs are mixed
  bool cuda_graph = false;    // CUDA: time graph replays of the candidate's call
  // Timing that stops when the reward is decided (judge/sample_stats.h,
  // StoppingRule::decision): with edges or a resolution, sampling stops once
  // the speedup's interval contains no edge and is at most that wide, instead
  // of at target_rse; close calls sample on to max_time_ms / max_samples.
  // Off (both empty) unless the environment fills them: it does, from its
  // reward function (RewardFunction::timing_need, EnvPool), while
  // stop_when_decided is on, as it is by default: a step pays for the timing
  // its reward needs (bench_pool on an H200: 314 new candidates a minute
  // against 208 timed to target_rse, the same tiers). false times every
  // request to target_rse, for speedups more precise than the reward reads.
  bool stop_when_decided = true;
  std::vector<double> decision_edges;          // eager speedups at which the reward steps
  std::vector<double> decision_compile_edges;  // torch.compile speedups at which it steps (the
                                               // judge converts them with the task's baselines)
  double decision_resolution = 0.0;            // largest useful half-width of the log-speedup interval; 0: none
  // CUDA profile: CUPTI range-profiler metrics (hardware counters; about a
  // second per evaluation on the H200). The environment asks for them on
  // `profile` actions, and on `submit` only with hardware_metrics_on_submit:
  // a submit's reward does not read them (StepEngine).
  bool hardware_metrics = true;
  bool hardware_metrics_on_submit = false;  // read by the environment, not the judge
  // The profile stage (CUPTI kernel attribution, energy, roofline hints) on
  // `submit` too; `profile` actions always have it. Off by default: the
  // checks every timed evaluation needs are part of timing (work left on
  // other streams: the drain check; work synchronized on them: the device
  // time against the round trip; judge/timing.h), and the profile stage cost
  // ~110 ms of exclusive GPU time per candidate on an H100. An env whose
  // reward reads what only the profile measures (own_kernel_fraction, energy)
  // turns it on (EnvPool). Read by the environment, not the judge.
  bool profile_on_submit = false;
  // CUDA profile: energy per call from NVML over back-to-back calls lasting
  // about this long per side (~100 is a good value); 0 leaves it out, which
  // saves twice the window per profiled evaluation. An env whose reward has
  // an `energy` term turns it on (EnvPool).
  double energy_window_ms = 0.0;
  // Limits for the candidate.
  double call_timeout_ms = 10000.0;          // one kf_forward call, including sync
  double eval_timeout_ms = 120000.0;         // the whole request
  uint64_t memory_limit_bytes = 4ull << 30;  // runner address space (CPU backend)
  // Memory a task's tensors may take in the judge (judge/task_fit.h): a task
  // that needs more is refused with figures. 0: the device decides (80% of
  // the host's memory on the CPU, the GPU's memory less 4 GiB).
  uint64_t judge_memory_limit_bytes = 0;
  // Memory the judge may keep, across requests, for the inputs and reference
  // outputs of recent (shape case, input seed) pairs, so that the next
  // candidate of a task with the same input seed (an episode's next turn)
  // reuses them instead of drawing and running the reference again
  // (judge/reference_cache.h). Device memory on GPUs, host memory on the
  // CPU; each request keeps at most half of what its task leaves of the
  // judge's limit, counted in the judge's share of a lane. 0: no cache.
  uint64_t reference_cache_bytes = uint64_t{1} << 30;
};

json to_json(const EvalOptions& o);
// Whether the evaluation of an action of `type` runs the profile stage: on
// `profile` actions always, on `submit` with options.profile_on_submit, never
// on untimed ones. StepEngine and the benchmarks ask here, so that what they
// measure is what a step costs.
bool runs_profile(ActionType type, const EvalOptions& options);
// Reads the options from a config object (keys as in the struct); unknown keys
// are errors. `base` supplies the defaults.
EvalOptions parse_eval_options(const Field& field, EvalOptions base = {});

struct EvalRequest {
  TaskSpec task;
  Artifact artifact;
  bool verify = true;    // verification checks
  bool time = false;     // timing (only when verification passed)
  bool profile = false;  // CUDA: kernel attribution + hardware metrics
  EvalOptions options;
  // Verification seed k (0 <= k < options.seeds) draws its inputs with
  // make_inputs(task, input_seed + k). The environment derives it from the
  // episode's seed (verification_input_seed); 0 gives the seeds 0..seeds-1.
  uint64_t input_seed = 0;
};

// env::splitmix64, the name the verification seeds below are documented by.
using ::kforge::splitmix64;

// Verification inputs of an episode with seed `episode_seed` (any uint64):
// input seeds base + k with base = splitmix64(episode_seed), and base 0 for
// seed 0 (the historical 0..seeds-1). Distinct seeds have distinct bases, and
// two seeds' windows of kMaxVerificationSeeds inputs overlap only with
// probability about 2 * 1000 / 2^64 per pair; the same seed always gives the
// same inputs, so a replay reproduces the verdict.
inline constexpr uint64_t kMaxVerificationSeeds = 1000;  // the bound on EvalOptions::seeds
uint64_t verification_input_seed(uint64_t episode_seed);

// The request as it travels to the judge process. `time` implies verification:
// a candidate is only timed after it verified (docs/architecture.md#verification).
json to_json(const EvalRequest& r);
// Throws InputError naming the field for malformed requests.
EvalRequest eval_request_from_json(const json& j);

// Everything the judge established. `outcome` and `violations` feed the
// reward; the rest feeds the observation.
struct EvalReport {
  Outcome outcome = Outcome::kNotRun;
  std::string summary;  // one line, e.g. "crashed: SIGSEGV in kf_forward (seed 0, shape 0)"
  std::vector<Violation> violations;
  // [{"seed", "variant", "shapes", "max_abs_err", "max_rel_err", "mismatches",
  //   "numel", "first_mismatch": {...}, "nan_count", "passed"}], plus
  // "float64" statistics when requested.
  json verification = json::array();
  // Present when timing ran (after verification passed), even if it was cut
  // short by a violation (timing_summary.h).
  std::optional<TimingSummary> timing;
  // CUDA profile and submit steps (profile_summary.h).
  std::optional<ProfileSummary> profile;
  std::string candidate_output;    // tail of the runner's stdout/stderr
  json phase_ms = json::object();  // "verify", "time", "profile", "spawn" wall times
  std::string device;              // e.g. "NVIDIA H200" or the CPU model

  bool correct() const { return outcome == Outcome::kCorrect; }
};

json to_json(const EvalReport& r);
EvalReport eval_report_from_json(const json& j);

}  // namespace kforge::env
