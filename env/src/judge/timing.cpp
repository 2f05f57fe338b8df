#include "judge/timing.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "ipc/deadline.h"
#include "judge/json_fields.h"
#include "judge/leftover_work.h"
#include "judge/output_comparison.h"
#include "judge/output_quality.h"
#include "judge/reference_sanity.h"
#include "judge/roofline_floor.h"
#include "judge/sample_stats.h"
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
  return static_cast<double>(unsigned_or(body, key, 0)) / 1e6;
}

SampleStats sample_stats(const SampleSummary& s) {
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

// What the reward needs of the speedup (EvalOptions::decision_*), on the
// eager speedup: a torch.compile edge c is the eager edge c * eager / compile
// of the task's baselines (the environment scales the compile baseline by
// this run's eager time, so the two speedups differ by that constant). A
// task without both baselines has no compile speedup, and no such edge.
DecisionTarget decision_target(const env::EvalOptions& options, const TaskSpec& task) {
  DecisionTarget d;
  d.edges = options.decision_edges;
  d.log_resolution = options.decision_resolution;
  const auto& b = task.baselines;
  if (b && b->eager_ms && b->compile_ms && *b->eager_ms > 0 && *b->compile_ms > 0) {
    for (double c : options.decision_compile_edges) d.edges.push_back(c * *b->eager_ms / *b->compile_ms);
  }
  return d;
}

// What every phase works on: the base shape, the options, the candidate's
// runner and the device, under the request's deadline.
struct TimingCall {
  const ShapeCase& base;
  const env::EvalOptions& options;
  CandidateSession* session;
  JudgeDevice* device;
  ipc::Deadline request_deadline;

  // One exchange's deadline: the call timeout, within the request's.
  ipc::Deadline call_deadline() const {
    return ipc::Deadline::earliest(request_deadline, ipc::Deadline::after_ms(options.call_timeout_ms));
  }
  Verdict runner_failed(const RunnerReply& reply, const std::string& where) const {
    return verdict_from_runner_failure(reply, where, options.call_timeout_ms, session->runner().output_tail());
  }
};

// The clocks the rounds are timed on. They are chosen as for the reference
// timed alone (reference_request.cpp): CPU time where the work is host CPU
// time, else the device's clock; the wall round trip always.
struct Clocks {
  bool use_cpu = false;
  bool device_clock = false;
};

// The harness's own cost on every clock: null calls, the same exchange
// without the kf_forward call.
struct Overhead {
  SampleSummary wall, cpu, device;
  std::vector<double> drain;  // the runner's drain time after each null call
};

// Reference and candidate times of the recorded rounds on one clock.
struct Samples {
  std::vector<double> reference, candidate;
};

// Everything the recorded rounds left for the summaries.
struct Rounds {
  Samples wall, cpu, dev;
  std::vector<double> self_ms, drain_ms;
  nlohmann::json graph_state = nullptr;
  nlohmann::json candidate_gate = nullptr;  // CUDA: "on" or "off: <why>" (cuda_timing/launch_gate.h)
  std::string stop_reason;

  const Samples& primary(const Clocks& clocks) const { return clocks.use_cpu ? cpu : clocks.device_clock ? dev : wall; }
};

// The speedup's interval from the rounds the figures came from.
std::optional<SpeedupInterval> speedup_interval(const Samples& samples) {
  const RatioInterval i = paired_ratio_interval(samples.reference, samples.candidate);
  if (!i.valid()) return std::nullopt;
  SpeedupInterval out;
  out.lo = i.lo;
  out.hi = i.hi;
  out.confidence = i.confidence;
  out.level = i.level;
  out.rounds = static_cast<int64_t>(i.rounds);
  out.method = kSpeedupIntervalMethod;
  out.median = i.median;
  return out;
}

// Warm-up of the harness: kCalibrationCalls null calls. A runner whose CPU
// clock cannot be read is timed by another clock (clocks->use_cpu cleared).
std::optional<Verdict> calibrate_overhead(const TimingCall& call, Clocks* clocks, Overhead* overhead) {
  std::vector<double> null_trips, null_cpu, null_device;
  for (int i = 0; i < kCalibrationCalls; ++i) {
    // Preceded by the judge's own device work, as every timed call is: on a
    // GPU the switch from the judge's context to the runner's costs ~0.2 ms
    // (measured on an H200), which belongs to the harness, not the candidate.
    call.device->flush_cache();
    RunnerReply r = call.session->null_call(call.call_deadline());
    if (!r.ok()) return call.runner_failed(r, "during overhead calibration");
    null_trips.push_back(r.round_trip_ms);
    null_cpu.push_back(r.cpu_ms);
    null_device.push_back(ns_to_ms(r.body, "device_ns"));
    overhead->drain.push_back(ns_to_ms(r.body, "drain_ns"));
    clocks->use_cpu = clocks->use_cpu && r.cpu_ms >= 0;
  }
  overhead->wall = summarize(null_trips);
  overhead->cpu = summarize(null_cpu);
  overhead->device = summarize(null_device);
  return std::nullopt;
}

// What the candidate's call did besides taking time: a failure, a violation
// of the rules (out-of-bounds writes, tampered clocks, mutated inputs) or
// outputs other than the reference's on this round's inputs.
std::optional<Verdict> check_timed_call(const TimingCall& call, const Clocks& clocks,
                                        const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& reference,
                                        const RunnerReply& reply, const std::string& where) {
  const ShapeCase& base = call.base;
  CandidateSession* session = call.session;
  const auto rc = static_cast<int>(integer_or(reply.body, "rc", 0));
  if (rc != 0) {
    Verdict v;
    v.outcome = Outcome::kRuntimeError;
    v.summary = "runtime error: kf_forward returned " + std::to_string(rc) + " " + where;
    return v;
  }
  if (std::string foreign = check_foreign_stream(reply.body); !foreign.empty()) {
    return Verdict::violation("foreign_stream", foreign + " " + where);
  }
  if (std::string oob = session->out_of_bounds_write(); !oob.empty()) {
    return Verdict::violation("out_of_bounds_write", oob + " " + where);
  }
  const double self = ns_to_ms(reply.body, "self_ns");
  const double on_device = ns_to_ms(reply.body, "device_ns");
  if (std::string e = check_self_within_round_trip(clocks.device_clock ? on_device : self, reply.round_trip_ms);
      !e.empty()) {
    return Verdict::violation("timing_tamper", e + " " + where);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!bitwise_equal(session->inputs()[i], inputs[i])) {
      return Verdict::violation("input_mutation", "kf_forward modified input " + base.inputs[i].name + " " + where);
    }
  }
  for (size_t i = 0; i < reference.size(); ++i) {
    ComparisonStats s =
        compare_output(session->outputs()[i], reference[i], tolerance_for(base.task, base.outputs[i].dtype), nullptr,
                       ExpectedValues::kFinite);  // checked when it ran
    if (!s.passed()) {
      return Verdict::violation(kTimedOutputMismatch,
                                "output " + base.outputs[i].name + " does not match this call's inputs " + where +
                                    " (" + std::to_string(s.mismatches) + " of " + std::to_string(s.numel) +
                                    " elements differ): the candidate passed verification but returned other "
                                    "results while being timed");
    }
  }
  if (std::optional<QualityProblem> q =
          check_outputs_quality(session->outputs(), reference, base, nullptr, kTimedQualitySample)) {
    return Verdict::violation(kTimedOutputMismatch, q->check + ": " + q->detail + " " + where);
  }
  return std::nullopt;
}

// One round's samples on every clock it is timed by.
void record_round(const Clocks& clocks, const Overhead& overhead, const ReferenceTimes& t_ref, const RunnerReply& reply,
                  Rounds* rounds) {
  rounds->wall.reference.push_back(clocks.device_clock ? t_ref.wall_ms : t_ref.device_ms);
  rounds->wall.candidate.push_back(std::max(reply.round_trip_ms - overhead.wall.median, 0.0));
  if (clocks.device_clock) {
    rounds->dev.reference.push_back(t_ref.device_ms);
    rounds->dev.candidate.push_back(ns_to_ms(reply.body, "device_ns"));
    rounds->drain_ms.push_back(ns_to_ms(reply.body, "drain_ns"));
  }
  if (clocks.use_cpu) {
    rounds->cpu.reference.push_back(t_ref.cpu_ms);
    rounds->cpu.candidate.push_back(std::max(reply.cpu_ms - overhead.cpu.median, 0.0));
  }
  rounds->self_ms.push_back(ns_to_ms(reply.body, "self_ns"));
}

// Warm-up and trials: rounds of one timed reference run and one candidate
// call on fresh inputs, until the schedule's stopping rule (or the request's
// deadline) ends them. A failure or violation in any round ends the timing.
std::optional<Verdict> run_rounds(const TimingCall& call, const Clocks& clocks, const Overhead& overhead,
                                  TimingInputs* fresh, SamplingSchedule* schedule, Rounds* rounds) {
  // CUDA: replay a graph of the call instead of calling it (EvalOptions::cuda_graph).
  const nlohmann::json call_options =
      clocks.device_clock && call.options.cuda_graph ? nlohmann::json{{"graph", true}} : nlohmann::json::object();
  while (true) {
    if (call.request_deadline.expired()) {
      rounds->stop_reason = kStopEvalTimeout;
      return std::nullopt;
    }
    const int round = schedule->rounds();
    const bool warming = schedule->warming_up();
    // Inputs no call has seen before; the timed reference run on them is also
    // the reference the candidate's outputs are checked against.
    const std::vector<at::Tensor> inputs = fresh->round(static_cast<uint64_t>(round));
    std::vector<at::Tensor> reference;
    std::string where =
        std::string(warming ? "during warm-up" : "in timed call") + " " + std::to_string(round) + " (fresh inputs)";

    const ReferenceTimes t_ref = run_timed_reference(call.device, call.base.task, inputs, &reference);
    if (std::string bad = non_finite_reference(reference, call.base); !bad.empty()) {
      return invalid_task_verdict(call.base, bad, where);
    }

    call.session->load_inputs(inputs);
    call.session->poison_outputs();
    call.device->synchronize();
    call.device->flush_cache();
    RunnerReply reply = call.session->call(call.call_deadline(), call_options);
    if (!reply.ok()) return call.runner_failed(reply, where);
    // Types checked on arrival (reply_problem): graph a map, the gate a string.
    if (reply.body.contains("graph")) rounds->graph_state = reply.body["graph"];
    if (reply.body.contains("launch_gate")) rounds->candidate_gate = reply.body["launch_gate"];
    if (std::optional<Verdict> v = check_timed_call(call, clocks, inputs, reference, reply, where)) return v;
    if (!schedule->finish_round()) continue;
    record_round(clocks, overhead, t_ref, reply, rounds);
    const Samples& primary = rounds->primary(clocks);
    StopReason stop = schedule->check_paired(primary.reference, primary.candidate);
    if (stop != StopReason::kContinue) {
      rounds->stop_reason = stop_reason_name(stop);
      return std::nullopt;
    }
  }
}

// The figures the summary reports: the primary clock's, or the round trip's
// where the device clock was rejected.
struct Figures {
  SampleSummary ref, cand, own, ref_wall, cand_wall;
  const SampleSummary* overhead;
  std::string timer;
  std::string device_clock_rejected;
};

Figures summarize_rounds(const Clocks& clocks, const Overhead& overhead, const Rounds& rounds) {
  const Samples& primary = rounds.primary(clocks);
  Figures f;
  f.ref = summarize(primary.reference);
  f.cand = summarize(primary.candidate);
  f.own = summarize(rounds.self_ms);
  f.ref_wall = summarize(rounds.wall.reference);
  f.cand_wall = summarize(rounds.wall.candidate);
  f.overhead = clocks.use_cpu ? &overhead.cpu : clocks.device_clock ? &overhead.device : &overhead.wall;
  f.timer = timer_name(clocks.use_cpu, clocks.device_clock);
  if (clocks.device_clock && f.cand.samples > 0) {
    // The device clock is reported by the runner, whose memory the
    // candidate shares; the judge's round trip bounds it from below
    // (timing_tamper.h). Below that bound, the round trip times both sides
    // instead: a forged device time then gains nothing, and an honest one
    // that noise pushed below (seen on the H200 before exchanges spun) costs
    // its candidate precision, not its reward. Leftover work is judged
    // separately (check_after_timing) and stays a violation.
    f.device_clock_rejected = check_device_time_covers_wall(f.cand, f.cand_wall);
    if (!f.device_clock_rejected.empty()) {
      f.ref = f.ref_wall;
      f.cand = f.cand_wall;
      f.overhead = &overhead.wall;
      f.timer = "wall_round_trip";
    }
  }
  return f;
}

// The report's TimingSummary; speedup and resolution are added once both
// sides have samples.
void fill_summary(const TimingCall& call, const Clocks& clocks, const Overhead& overhead, const Rounds& rounds,
                  const Figures& f, const TimingInputs& fresh, const SamplingSchedule& schedule, uint64_t seed,
                  TimingSummary* t) {
  t->timer = f.timer;
  t->reference = sample_stats(f.ref);
  t->candidate = sample_stats(f.cand);
  t->candidate_self_reported = sample_stats(f.own);
  t->overhead = sample_stats(*f.overhead);
  t->stop_reason = rounds.stop_reason;
  t->warmup_rounds = schedule.warmup_rounds();
  if (!schedule.warming_up()) t->warmup_ms = schedule.warmup_elapsed_ms();  // absent when it never ended
  t->input_sets = fresh.pool_size();
  t->fresh_inputs = true;
  t->timing_seed = seed;
  t->cache_flush_bytes = call.device->flush_bytes();
  t->elapsed_ms = schedule.elapsed_ms();
  t->clocks = call.device->clocks();
  t->device = call.device->name();
  if (!f.device_clock_rejected.empty()) {
    t->device_clock_rejected = f.device_clock_rejected + "; both sides timed by the judge's round trip instead";
  }
  if (!rounds.graph_state.is_null()) t->cuda_graph = rounds.graph_state;
  if (!rounds.candidate_gate.is_null()) {
    t->launch_gate = {{"candidate", rounds.candidate_gate}, {"reference", t->clocks.value("launch_gate", "n/a")}};
  }
  if (clocks.use_cpu || clocks.device_clock) {
    // The round-trip figures, for comparison: the judge's own clock, which
    // the candidate cannot influence.
    t->reference_wall = sample_stats(f.ref_wall);
    t->candidate_wall = sample_stats(f.cand_wall);
    t->overhead_wall = sample_stats(overhead.wall);
    if (f.cand_wall.median > 0) t->speedup_wall = f.ref_wall.median / f.cand_wall.median;
  }
}

// The checks only the whole timing can make: no work may outlive the calls,
// and the median must not beat the roofline floor. Adds the drain and
// roofline figures to `t`, and the self-reported clock's disagreement with
// the CPU time when there is one: reported, never a verdict, because no side
// is timed by the runner's clock and load alone has produced it
// (timing_tamper.h).
Verdict check_after_timing(const TimingCall& call, const Clocks& clocks, const Overhead& overhead, const Rounds& rounds,
                           const Figures& f, TimingSummary* t) {
  if (clocks.use_cpu) t->self_clock_disagrees = check_self_covers_cpu_time(f.own, f.cand);
  if (clocks.device_clock) {
    t->drain = {{"null_median_ms", summarize(overhead.drain).median},
                {"call_median_ms", summarize(rounds.drain_ms).median},
                {"call_max_ms", summarize(rounds.drain_ms).max}};
    if (std::string w = check_work_after_return(overhead.drain, rounds.drain_ms); !w.empty()) {
      return Verdict::violation("work_after_return", w);
    }
  }
  RooflineCheck roofline = check_roofline(roofline_bytes(call.base.task), call.device->peak_memory_bytes_per_s(),
                                          f.cand.median, *t->resolution_ms);
  t->roofline = roofline.to_json();
  if (!roofline.violation.empty()) return Verdict::violation("below_roofline", roofline.violation);
  return {};
}

// A timing that ended before any figure existed.
TimingResult failed(Verdict verdict) {
  TimingResult result;
  result.verdict = std::move(verdict);
  return result;
}

}  // namespace

TimingResult time_candidate(const CasePlan& plan, const env::EvalOptions& options, CandidateSession* session,
                            JudgeDevice* device, ipc::Deadline request_deadline) {
  const TimingCall call{plan.cases.front(), options, session, device, request_deadline};

  // Check: the base shape binds.
  RunnerReply bound = session->bind(call.base, call.call_deadline());
  if (!bound.ok()) return failed(call.runner_failed(bound, "while binding the base shape for timing"));

  // The harness's overhead, on the clocks this device and runner can time by.
  Clocks clocks;
  clocks.use_cpu = device->work_is_host_cpu_time();
  clocks.device_clock = !clocks.use_cpu && device->runner_times_on_device();
  Overhead overhead;
  if (std::optional<Verdict> v = calibrate_overhead(call, &clocks, &overhead)) return failed(std::move(*v));

  // Warm-up and trials on fresh inputs.
  const uint64_t seed = timing_seed();
  TimingInputs fresh(call.base.task, options.timing_input_sets, seed, device->device());
  SamplingSchedule schedule(options, decision_target(options, call.base.task),
                            [device] { return device->clocks_at_speed(); });
  Rounds rounds;
  if (std::optional<Verdict> v = run_rounds(call, clocks, overhead, &fresh, &schedule, &rounds)) {
    return failed(std::move(*v));
  }

  // Summaries.
  TimingResult result;
  const Figures f = summarize_rounds(clocks, overhead, rounds);
  TimingSummary& t = result.timing.emplace();
  fill_summary(call, clocks, overhead, rounds, f, fresh, schedule, seed, &t);
  if (f.cand.samples == 0 || f.ref.samples == 0) return result;
  result.timed = true;
  // A median at or below zero means the kernel is faster than the overhead
  // can resolve; report no speedup rather than an infinite one.
  if (f.cand.median > 0) t.speedup = f.ref.median / f.cand.median;
  if (t.speedup)
    t.speedup_interval = speedup_interval(f.device_clock_rejected.empty() ? rounds.primary(clocks) : rounds.wall);
  t.resolution_ms = f.overhead->p75 - f.overhead->p25;

  // The checks of the whole timing.
  result.verdict = check_after_timing(call, clocks, overhead, rounds, f, &t);
  return result;
}

}  // namespace kforge::judge
