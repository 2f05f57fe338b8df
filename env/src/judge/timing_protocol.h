// The parts of the timing protocol (docs/architecture.md#timing) that every timed request
// shares: a candidate's timing (timing.h), whose reference side is the
// speedup's denominator, and the reference timed alone (reference_probe.h),
// which synthesized tasks record as their eager baseline. Defined once here,
// so that a recorded baseline and a speedup's denominator come from the same
// clock, cache flush, warm-up and stopping rule.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "judge/judge_device.h"
#include "judge/sample_stats.h"
#include "kforge/core/task_spec.h"
#include "kforge/env/eval.h"

namespace kforge::judge {

// The stop reason when the request's own deadline ends sampling (the others
// are stop_reason_name's).
inline constexpr const char* kStopEvalTimeout = "eval_timeout";

// Seeds of a timing input pool (timing_inputs.h): far from verification's
// 0..seeds-1, plus a random part per request, so that timed inputs are data
// nobody has seen before.
uint64_t timing_seed();

// CPU time of the calling thread, in ms.
double thread_cpu_ms();

// {"median_ms", "p25_ms", "p75_ms", "mean_ms", "min_ms", "max_ms", "rse", "samples"}.
nlohmann::json summary_json(const SampleSummary& s);

// One reference run on every clock the protocol reads.
struct ReferenceTimes {
  double device_ms = 0;  // JudgeDevice::time_ms: CUDA events on GPUs, the steady clock on the CPU
  double wall_ms = 0;    // the steady clock around the whole run
  double cpu_ms = 0;     // the judge thread's CPU time
  // The figure the protocol compares: CPU time where the device's work is host
  // CPU time (JudgeDevice::work_is_host_cpu_time), else the device's own clock.
  double primary(bool host_cpu_clock) const { return host_cpu_clock ? cpu_ms : device_ms; }
};

// Flushes the device's last-level cache, then runs the reference of `task`
// on `inputs` once; its outputs go to `outputs`.
ReferenceTimes run_timed_reference(JudgeDevice* device, const TaskSpec& task, const std::vector<at::Tensor>& inputs,
                                   std::vector<at::Tensor>* outputs);

// The name of the primary clock as reports give it.
std::string timer_name(bool host_cpu_clock, bool device_clock);

// Warm-up by time, then samples until the stopping rule (sample_stats.h)
// says stop. Rounds are whatever the caller times together (a reference run,
// or a reference run and a candidate call).
class SamplingSchedule {
 public:
  // `decision`: what the reward needs of the speedup (sample_stats.h); when
  // asked, check_paired stops on it instead of on target_rse.
  // `clocks_at_speed` (JudgeDevice::clocks_at_speed): when given, the warm-up
  // may end after warmup_min_ms once it says so.
  explicit SamplingSchedule(const env::EvalOptions& options, DecisionTarget decision = {},
                            std::function<bool()> clocks_at_speed = {});

  // Call after every round that completed; false while the round was part of
  // the warm-up (do not record its samples). The warm-up's last round is the
  // first to end at or after warmup_ms of phase time, or, from the second
  // round on, the first at or after warmup_min_ms with the clocks at speed
  // (there is always at least one warm-up round).
  bool finish_round();
  // After the recorded samples of a round: the rule's verdict on both sides'
  // summaries (pass the same summary twice for one side).
  StopReason check(const SampleSummary& a, const SampleSummary& b) const;
  // The same for paired rounds of a reference and a candidate, where the
  // decision rule can apply.
  StopReason check_paired(const std::vector<double>& reference, const std::vector<double>& candidate) const;

  bool warming_up() const { return warming_; }  // the next round is a warm-up round
  int rounds() const { return rounds_; }
  int warmup_rounds() const { return warmup_rounds_; }
  double warmup_elapsed_ms() const { return warmup_elapsed_ms_; }  // how long the warm-up lasted
  double elapsed_ms() const;                                       // since the schedule was made

 private:
  using Clock = std::chrono::steady_clock;
  double warmup_ms_;
  double warmup_min_ms_;
  std::function<bool()> clocks_at_speed_;
  double warmup_elapsed_ms_ = 0;
  StoppingRule rule_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point sampling_start_ = start_;
  bool warming_ = true;
  int rounds_ = 0;
  int warmup_rounds_ = 0;
};

}  // namespace kforge::judge
