#include "judge/timing.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "common/deadline.h"
#include "common/json_fields.h"
#include "common/sample_stats.h"
#include "judge/leftover_work.h"
#include "judge/output_comparison.h"
#include "judge/output_quality.h"
#include "judge/reference_sanity.h"
#include "judge/roofline.h"
#include "judge/timing_inputs.h"
#include "judge/timing_protocol.h"
#include "judge/timing_tamper.h"
#include "judge/tolerance.h"

namespace kforge::judge {
namespace {

constexpr int kCalibrationCalls = 25;
constexpr const char* kTimedOutputMismatch = "timed_output_mismatch";

// A nanosecond count of a runner reply in ms (0 when absent: CPU runners).
double ns_to_ms(const nlohmann::json& body, const char* key) {
  return static_cast<double>(exec::unsigned_or(body, key, 0)) / 1e6;
}

SampleStats sample_stats(const exec::SampleSummary& s) {
  SampleStats out;
  out.median_ms = s.median;
  out.p25_ms = s.p25;
  out.p75_ms = s.p75;
  out.mean_ms = s.mean;
  out.min_ms = s.min;
  out.max_ms = s.max;
  if (std::isfinite(s.rse)) out.rse = s.rse;
  out.samples = static_cast<int64_t>(s.samples);
  return out;
}

// Reference and candidate times of the recorded rounds on one clock.
struct Samples {
  std::vector<double> reference, candidate;
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

  // Harness overhead: the same exchange without the kf_forward call, on every clock.
  // The clocks are chosen as for the reference timed alone (reference_probe.cpp):
  // CPU time where the work is host CPU time, else the device's clock.
  bool use_cpu = device->work_is_host_cpu_time();
  const bool device_clock = !use_cpu && device->runner_times_on_device();
  std::vector<double> null_trips, null_cpu, null_device, null_drain;
  for (int i = 0; i < kCalibrationCalls; ++i) {
    // Preceded by the judge's own device work, as every timed call is: on a
    // GPU the switch from the judge's context to the runner's costs ~0.2 ms
    // (measured on an H200), which belongs to the harness, not the candidate.
    device->flush_cache();
    exec::RunnerReply r = session->null_call(call_deadline());
    if (!r.ok()) return runner_failed(r, "during overhead calibration");
    null_trips.push_back(r.round_trip_ms);
    null_cpu.push_back(r.cpu_ms);
    null_device.push_back(ns_to_ms(r.body, "device_ns"));
    null_drain.push_back(ns_to_ms(r.body, "drain_ns"));
    use_cpu = use_cpu && r.cpu_ms >= 0;
  }
  exec::SampleSummary overhead = exec::summarize(null_trips);
  exec::SampleSummary overhead_cpu = exec::summarize(null_cpu);
  exec::SampleSummary overhead_device = exec::summarize(null_device);
  // CUDA: replay a graph of the call instead of calling it (EvalOptions::cuda_graph).
  const nlohmann::json call_options =
      device_clock && options.cuda_graph ? nlohmann::json{{"graph", true}} : nlohmann::json::object();
  nlohmann::json graph_state = nullptr;
  nlohmann::json candidate_gate = nullptr;  // CUDA: "on" or "off: <why>" (cuda_timing/launch_gate.h)

  const uint64_t seed = timing_seed();
  TimingInputs fresh(base.task, options.timing_input_sets, seed, device->device());

  Samples wall, cpu, dev;
  std::vector<double> self_ms, drain_ms;
  const Samples& primary = use_cpu ? cpu : device_clock ? dev : wall;
  SamplingSchedule schedule(options);
  std::string stop_reason;

  while (true) {
    if (request_deadline.expired()) {
      stop_reason = kStopEvalTimeout;
      break;
    }
    const int round = schedule.rounds();
    const bool warming = schedule.warming_up();
    // Inputs no call has seen before; the timed reference run on them is also
    // the reference the candidate's outputs are checked against.
    const std::vector<at::Tensor> inputs = fresh.round(static_cast<uint64_t>(round));
    std::vector<at::Tensor> reference;
    std::string where =
        std::string(warming ? "during warm-up" : "in timed call") + " " + std::to_string(round) + " (fresh inputs)";

    const ReferenceTimes t_ref = run_timed_reference(device, base.task, inputs, &reference);
    if (std::string bad = non_finite_reference(reference, base); !bad.empty()) {
      result.verdict = invalid_task_verdict(base, bad, where);
      return result;
    }

    session->load_inputs(inputs);
    session->poison_outputs();
    device->synchronize();
    device->flush_cache();
    exec::RunnerReply reply = session->call(call_deadline(), call_options);
    if (!reply.ok()) return runner_failed(reply, where);
    // Types checked on arrival (exec::reply_problem): graph a map, the gate a string.
    if (reply.body.contains("graph")) graph_state = reply.body["graph"];
    if (reply.body.contains("launch_gate")) candidate_gate = reply.body["launch_gate"];
    const auto rc = static_cast<int>(exec::integer_or(reply.body, "rc", 0));
    if (rc != 0) {
      result.verdict.outcome = Outcome::kRuntimeError;
      result.verdict.summary = "runtime error: kf_forward returned " + std::to_string(rc) + " " + where;
      return result;
    }
    if (std::string oob = session->out_of_bounds_write(); !oob.empty()) {
      result.verdict = Verdict::violation("out_of_bounds_write", oob + " " + where);
      return result;
    }
    double self = ns_to_ms(reply.body, "self_ns");
    double on_device = ns_to_ms(reply.body, "device_ns");
    if (std::string e = check_self_within_round_trip(device_clock ? on_device : self, reply.round_trip_ms);
        !e.empty()) {
      result.verdict = Verdict::violation("timing_tamper", e + " " + where);
      return result;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!bitwise_equal(session->inputs()[i], inputs[i])) {
        result.verdict =
            Verdict::violation("input_mutation", "kf_forward modified input " + base.inputs[i].name + " " + where);
        return result;
      }
    }
    for (size_t i = 0; i < reference.size(); ++i) {
      ComparisonStats s =
          compare_output(session->outputs()[i], reference[i], tolerance_for(base.task, base.outputs[i].dtype));
      if (!s.passed()) {
        result.verdict = Verdict::violation(
            kTimedOutputMismatch, "output " + base.outputs[i].name + " does not match this call's inputs " + where +
                                      " (" + std::to_string(s.mismatches) + " of " + std::to_string(s.numel) +
                                      " elements differ): the candidate passed verification but returned other "
                                      "results while being timed");
        return result;
      }
    }
    if (std::optional<QualityProblem> q =
            check_outputs_quality(session->outputs(), reference, base, nullptr, kTimedQualitySample)) {
      result.verdict = Verdict::violation(kTimedOutputMismatch, q->check + ": " + q->detail + " " + where);
      return result;
    }
    if (!schedule.finish_round()) continue;
    wall.reference.push_back(device_clock ? t_ref.wall_ms : t_ref.device_ms);
    wall.candidate.push_back(std::max(reply.round_trip_ms - overhead.median, 0.0));
    if (device_clock) {
      dev.reference.push_back(t_ref.device_ms);
      dev.candidate.push_back(on_device);
      drain_ms.push_back(ns_to_ms(reply.body, "drain_ns"));
    }
    if (use_cpu) {
      cpu.reference.push_back(t_ref.cpu_ms);
      cpu.candidate.push_back(std::max(reply.cpu_ms - overhead_cpu.median, 0.0));
    }
    self_ms.push_back(self);
    exec::StopReason stop = schedule.check(exec::summarize(primary.reference), exec::summarize(primary.candidate));
    if (stop != exec::StopReason::kContinue) {
      stop_reason = exec::stop_reason_name(stop);
      break;
    }
  }

  exec::SampleSummary ref = exec::summarize(primary.reference), cand = exec::summarize(primary.candidate);
  exec::SampleSummary own = exec::summarize(self_ms);
  const exec::SampleSummary ref_wall = exec::summarize(wall.reference), cand_wall = exec::summarize(wall.candidate);
  const exec::SampleSummary* primary_overhead = use_cpu ? &overhead_cpu : device_clock ? &overhead_device : &overhead;
  std::string timer = timer_name(use_cpu, device_clock);
  std::string device_clock_rejected;
  if (device_clock && cand.samples > 0) {
    // The device clock is reported by the runner, whose memory the
    // candidate shares; the judge's round trip bounds it from below
    // (timing_tamper.h). Below that bound, the round trip times both sides
    // instead: a forged device time then gains nothing, and an honest one
    // that noise pushed below (seen on the H200 before exchanges spun) costs
    // its candidate precision, not its reward. Leftover work is judged
    // separately below and stays a violation.
    device_clock_rejected = check_device_time_covers_wall(cand, cand_wall);
    if (!device_clock_rejected.empty()) {
      ref = ref_wall;
      cand = cand_wall;
      primary_overhead = &overhead;
      timer = "wall_round_trip";
    }
  }
  TimingSummary& t = result.timing.emplace();
  t.timer = timer;
  t.reference = sample_stats(ref);
  t.candidate = sample_stats(cand);
  t.candidate_self_reported = sample_stats(own);
  t.overhead = sample_stats(*primary_overhead);
  t.stop_reason = stop_reason;
  t.warmup_rounds = schedule.warmup_rounds();
  t.input_sets = fresh.pool_size();
  t.fresh_inputs = true;
  t.timing_seed = seed;
  t.cache_flush_bytes = device->flush_bytes();
  t.elapsed_ms = schedule.elapsed_ms();
  t.clocks = device->clocks();
  t.device = device->name();
  if (!device_clock_rejected.empty()) {
    t.device_clock_rejected = device_clock_rejected + "; both sides timed by the judge's round trip instead";
  }
  if (!graph_state.is_null()) t.cuda_graph = graph_state;
  if (!candidate_gate.is_null()) {
    t.launch_gate = {{"candidate", candidate_gate}, {"reference", t.clocks.value("launch_gate", "n/a")}};
  }
  if (use_cpu || device_clock) {
    // The round-trip figures, for comparison: the judge's own clock, which
    // the candidate cannot influence.
    t.reference_wall = sample_stats(ref_wall);
    t.candidate_wall = sample_stats(cand_wall);
    t.overhead_wall = sample_stats(overhead);
    if (cand_wall.median > 0) t.speedup_wall = ref_wall.median / cand_wall.median;
  }
  if (cand.samples == 0 || ref.samples == 0) return result;
  result.timed = true;
  // A median at or below zero means the kernel is faster than the overhead
  // can resolve; report no speedup rather than an infinite one.
  if (cand.median > 0) t.speedup = ref.median / cand.median;
  t.resolution_ms = primary_overhead->p75 - primary_overhead->p25;

  if (use_cpu) {
    if (std::string e = check_self_covers_cpu_time(own, cand); !e.empty()) {
      result.verdict = Verdict::violation("timing_tamper", e);
      return result;
    }
  }
  if (device_clock) {
    t.drain = {{"null_median_ms", exec::summarize(null_drain).median},
               {"call_median_ms", exec::summarize(drain_ms).median},
               {"call_max_ms", exec::summarize(drain_ms).max}};
    if (std::string w = check_work_after_return(null_drain, drain_ms); !w.empty()) {
      result.verdict = Verdict::violation("work_after_return", w);
      return result;
    }
  }
  RooflineCheck roofline =
      check_roofline(roofline_bytes(base.task), device->peak_memory_bytes_per_s(), cand.median, *t.resolution_ms);
  t.roofline = roofline.to_json();
  if (!roofline.violation.empty()) result.verdict = Verdict::violation("below_roofline", roofline.violation);
  return result;
}

}  // namespace kforge::judge
