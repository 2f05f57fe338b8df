#include "judge/timing_protocol.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "ipc/deadline.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/reference.h"

namespace kforge::judge {
namespace {

constexpr uint64_t kTimingSeedBase = 1000003;

}  // namespace

uint64_t timing_seed() { return kTimingSeedBase + (std::random_device{}() & 0xffffffffu) * 1024; }

double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

nlohmann::json summary_json(const SampleSummary& s) {
  return {{"median_ms", s.median},
          {"p25_ms", s.p25},
          {"p75_ms", s.p75},
          {"mean_ms", s.mean},
          {"min_ms", s.min},
          {"max_ms", s.max},
          {"rse", std::isfinite(s.rse) ? nlohmann::json(s.rse) : nlohmann::json(nullptr)},
          {"samples", s.samples}};
}

ReferenceTimes run_timed_reference(JudgeDevice* device, const TaskSpec& task, const std::vector<at::Tensor>& inputs,
                                   std::vector<at::Tensor>* outputs) {
  ReferenceTimes t;
  device->flush_cache();
  const double cpu_before = thread_cpu_ms();
  const auto wall_before = std::chrono::steady_clock::now();
  // time_ms waits for the device itself after its stop mark; synchronizing
  // inside fn would add the host's wake-up latency to the reference only
  // (a runner's stop event is recorded as soon as kf_forward returns).
  t.device_ms = device->time_ms([&] { *outputs = ref::run_reference(task, inputs); });
  t.wall_ms = ms_since(wall_before);
  t.cpu_ms = thread_cpu_ms() - cpu_before;
  return t;
}

std::string timer_name(bool host_cpu_clock, bool device_clock) {
  return host_cpu_clock ? "cpu_time" : device_clock ? "device_events" : "wall_round_trip";
}

SamplingSchedule::SamplingSchedule(const env::EvalOptions& options, DecisionTarget decision,
                                   std::function<bool()> clocks_at_speed)
    : warmup_ms_(options.warmup_ms),
      warmup_min_ms_(std::min(options.warmup_min_ms, options.warmup_ms)),
      clocks_at_speed_(std::move(clocks_at_speed)),
      rule_{options.min_samples, options.max_samples, options.target_rse, options.max_time_ms, std::move(decision)} {}

bool SamplingSchedule::finish_round() {
  ++rounds_;
  if (!warming_) return true;
  ++warmup_rounds_;
  const double elapsed = ms_since(start_);
  const bool ramped = clocks_at_speed_ && warmup_rounds_ >= 2 && elapsed >= warmup_min_ms_ && clocks_at_speed_();
  if (elapsed >= warmup_ms_ || ramped) {
    warming_ = false;
    warmup_elapsed_ms_ = elapsed;
    sampling_start_ = Clock::now();
  }
  return false;
}

StopReason SamplingSchedule::check(const SampleSummary& a, const SampleSummary& b) const {
  return rule_.check(a, b, ms_since(sampling_start_));
}

StopReason SamplingSchedule::check_paired(const std::vector<double>& reference,
                                          const std::vector<double>& candidate) const {
  return rule_.check_paired(reference, candidate, ms_since(sampling_start_));
}

double SamplingSchedule::elapsed_ms() const { return ms_since(start_); }

}  // namespace kforge::judge
