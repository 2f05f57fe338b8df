#include "judge/timing.h"

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "common/sample_stats.h"
#include "judge/output_comparison.h"
#include "judge/timing_tamper.h"
#include "judge/tolerance.h"
#include "kforge/core/reference.h"

namespace kforge::judge {
namespace {

// Seeds of timing input sets, far from verification's 0..seeds-1 so that the
// timed inputs are data the candidate has not seen.
constexpr uint64_t kTimingSeedBase = 1000003;
constexpr int kCalibrationCalls = 25;

double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

nlohmann::json summary_json(const exec::SampleSummary& s) {
  return {{"median_ms", s.median},
          {"p25_ms", s.p25},
          {"p75_ms", s.p75},
          {"mean_ms", s.mean},
          {"min_ms", s.min},
          {"max_ms", s.max},
          {"rse", std::isfinite(s.rse) ? nlohmann::json(s.rse) : nlohmann::json(nullptr)},
          {"samples", s.samples}};
}

// Reference and candidate times of the recorded rounds on one clock.
struct Samples {
  std::vector<double> reference, candidate;
};

struct InputSet {
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> reference;
};

}  // namespace

TimingResult time_candidate(const CasePlan& plan, const env::EvalOptions& options, CandidateSession* session,
                            JudgeDevice* device, exec::Deadline request_deadline) {
  TimingResult result;
  const ShapeCase& base = plan.cases.front();
  auto call_deadline = [&] {
    return exec::Deadline::earliest(request_deadline, exec::Deadline::after_ms(options.call_timeout_ms));
  };
  auto runner_failed = [&](const exec::RunnerReply& reply, const std::string& where) {
    result.verdict =
        verdict_from_runner_failure(reply, where, options.call_timeout_ms, session->runner().output_tail());
    return result;
  };

  exec::RunnerReply bound = session->bind(base, call_deadline());
  if (!bound.ok()) return runner_failed(bound, "while binding the base shape for timing");

  // Harness overhead: the same exchange without the kf_forward call, on both clocks.
  bool use_cpu = device->work_is_host_cpu_time();
  std::vector<double> null_trips, null_cpu;
  for (int i = 0; i < kCalibrationCalls; ++i) {
    exec::RunnerReply r = session->null_call(call_deadline());
    if (!r.ok()) return runner_failed(r, "during overhead calibration");
    null_trips.push_back(r.round_trip_ms);
    null_cpu.push_back(r.cpu_ms);
    use_cpu = use_cpu && r.cpu_ms >= 0;
  }
  exec::SampleSummary overhead = exec::summarize(null_trips);
  exec::SampleSummary overhead_cpu = exec::summarize(null_cpu);

  std::vector<InputSet> sets;
  for (int k = 0; k < std::max(options.timing_input_sets, 1); ++k) {
    InputSet s;
    s.inputs = ref::make_inputs(base.task, kTimingSeedBase + static_cast<uint64_t>(k), device->device());
    s.reference = ref::run_reference(base.task, s.inputs);
    sets.push_back(std::move(s));
  }

  Samples wall, cpu;
  std::vector<double> self_ms;
  const Samples& primary = use_cpu ? cpu : wall;
  auto phase_start = std::chrono::steady_clock::now();
  bool warming = true;
  int round = 0;
  exec::StoppingRule rule{options.min_samples, options.max_samples, options.target_rse, options.max_time_ms};
  std::string stop_reason;
  auto sampling_start = phase_start;

  while (true) {
    if (request_deadline.expired()) {
      stop_reason = "eval_timeout";
      break;
    }
    const InputSet& set = sets[static_cast<size_t>(round) % sets.size()];
    std::string where = std::string(warming ? "during warm-up" : "in timed call") + " " + std::to_string(round) +
                        " (input set " + std::to_string(round % static_cast<int>(sets.size())) + ")";

    device->flush_cache();
    double cpu_before = thread_cpu_ms();
    double t_ref = device->time_ms([&] {
      std::vector<at::Tensor> out = ref::run_reference(base.task, set.inputs);
      device->synchronize();
    });
    double t_ref_cpu = thread_cpu_ms() - cpu_before;

    session->load_inputs(set.inputs);
    session->poison_outputs();
    device->synchronize();
    device->flush_cache();
    exec::RunnerReply reply = session->call(call_deadline());
    if (!reply.ok()) return runner_failed(reply, where);
    int rc = reply.body.value("rc", 0);
    if (rc != 0) {
      result.verdict.outcome = Outcome::kRuntimeError;
      result.verdict.summary = "runtime error: kf_forward returned " + std::to_string(rc) + " " + where;
      return result;
    }
    double self = static_cast<double>(reply.body.value("self_ns", uint64_t{0})) / 1e6;
    if (std::string e = check_self_within_round_trip(self, reply.round_trip_ms); !e.empty()) {
      result.verdict = Verdict::violation("timing_tamper", e + " " + where);
      return result;
    }
    for (size_t i = 0; i < set.inputs.size(); ++i) {
      if (!bitwise_equal(session->inputs()[i], set.inputs[i])) {
        result.verdict =
            Verdict::violation("input_mutation", "kf_forward modified input " + base.inputs[i].name + " " + where);
        return result;
      }
    }
    for (size_t i = 0; i < set.reference.size(); ++i) {
      ComparisonStats s =
          compare_output(session->outputs()[i], set.reference[i], tolerance_for(base.task, base.outputs[i].dtype));
      if (!s.passed()) {
        result.verdict = Verdict::violation(
            "stale_output", "output " + base.outputs[i].name + " does not match this call's inputs " + where + " (" +
                                std::to_string(s.mismatches) + " of " + std::to_string(s.numel) +
                                " elements differ): the candidate passed verification but returned other results "
                                "while being timed");
        return result;
      }
    }
    ++round;

    if (warming) {
      if (elapsed_ms(phase_start) >= options.warmup_ms) {
        warming = false;
        sampling_start = std::chrono::steady_clock::now();
      }
      continue;
    }
    wall.reference.push_back(t_ref);
    wall.candidate.push_back(std::max(reply.round_trip_ms - overhead.median, 0.0));
    if (use_cpu) {
      cpu.reference.push_back(t_ref_cpu);
      cpu.candidate.push_back(std::max(reply.cpu_ms - overhead_cpu.median, 0.0));
    }
    self_ms.push_back(self);
    exec::StopReason stop =
        rule.check(exec::summarize(primary.reference), exec::summarize(primary.candidate), elapsed_ms(sampling_start));
    if (stop != exec::StopReason::kContinue) {
      stop_reason = exec::stop_reason_name(stop);
      break;
    }
  }

  exec::SampleSummary ref = exec::summarize(primary.reference), cand = exec::summarize(primary.candidate);
  exec::SampleSummary own = exec::summarize(self_ms);
  result.timing = {{"timer", use_cpu ? "cpu_time" : "wall_round_trip"},
                   {"reference", summary_json(ref)},
                   {"candidate", summary_json(cand)},
                   {"candidate_self_reported", summary_json(own)},
                   {"overhead", summary_json(use_cpu ? overhead_cpu : overhead)},
                   {"stop_reason", stop_reason},
                   {"warmup_rounds", round - static_cast<int>(primary.candidate.size())},
                   {"input_sets", sets.size()},
                   {"cache_flush_bytes", device->flush_bytes()},
                   {"elapsed_ms", elapsed_ms(phase_start)},
                   {"clocks", device->clocks()},
                   {"device", device->name()}};
  if (use_cpu) {
    // The round-trip figures, for comparison (and what GPU backends use).
    exec::SampleSummary ref_wall = exec::summarize(wall.reference), cand_wall = exec::summarize(wall.candidate);
    result.timing["reference_wall"] = summary_json(ref_wall);
    result.timing["candidate_wall"] = summary_json(cand_wall);
    result.timing["overhead_wall"] = summary_json(overhead);
    if (cand_wall.median > 0) result.timing["speedup_wall"] = ref_wall.median / cand_wall.median;
  }
  if (cand.samples == 0 || ref.samples == 0) return result;
  result.timed = true;
  // A median at or below zero means the kernel is faster than the overhead
  // can resolve; report no speedup rather than an infinite one.
  if (cand.median > 0) result.timing["speedup"] = ref.median / cand.median;
  const exec::SampleSummary& resolution = use_cpu ? overhead_cpu : overhead;
  result.timing["resolution_ms"] = resolution.p75 - resolution.p25;

  if (use_cpu) {
    if (std::string e = check_self_covers_cpu_time(own, cand); !e.empty()) {
      result.verdict = Verdict::violation("timing_tamper", e);
    }
  }
  return result;
}

}  // namespace kforge::judge
