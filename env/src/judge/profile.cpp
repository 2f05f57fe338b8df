#include "judge/profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "judge/json_fields.h"
#include "judge/kernel_attribution.h"
#include "judge/profile_reply.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/reference.h"
#include "kforge/env/analysis/roofline.h"

namespace kforge::judge {
namespace {

using json = nlohmann::json;
using Status = RunnerReply::Status;

// Data the candidate has not seen in verification or timing.
constexpr uint64_t kProfileSeed = 7000003;
// Energy (EvalOptions::energy_window_ms): the NVML counter advances in steps
// of milliseconds, so windows much shorter than ~100 ms get noisy.
constexpr int kMaxEnergyCalls = 20000;
constexpr int kMaxEnergyWindows = 3;

using Clock = std::chrono::steady_clock;

// The profile request: one traced call plus one call per range-profiler pass.
constexpr double kProfileBudgetMs = 60000;

int energy_calls(double per_call_ms, double window_ms) {
  if (!(per_call_ms > 0) || !(window_ms > 0)) return 0;
  return static_cast<int>(std::clamp(std::ceil(window_ms / per_call_ms), 1.0, double{kMaxEnergyCalls}));
}

// Joules per call of the candidate and of the reference; nothing when the
// device has no energy counter.
Verdict measure_energy(const CasePlan& plan, CandidateSession* session, JudgeDevice* device,
                       const std::vector<at::Tensor>& inputs, double window_ms, double limit_ms, ipc::Deadline deadline,
                       TimingSummary* timing) {
  const int cand_calls = energy_calls(timing->candidate.median_ms, window_ms);
  const int ref_calls = energy_calls(timing->reference.median_ms, window_ms);
  if (cand_calls == 0 || ref_calls == 0 || !device->energy_mj()) return {};
  json energy = {{"source", "NVML total energy counter"}, {"window_ms", window_ms}};

  // NVML refreshes the counter on its own schedule (on the H200 VM a window
  // of 1,700 reference calls once saw it not move at all), so each side runs
  // further windows until it has moved, up to kMaxEnergyWindows of them.
  // `window` runs one window's calls and returns how many ran (0: stop).
  auto joules_per_call = [&](const std::function<int()>& window, const char* side) {
    int total = 0;
    device->synchronize();
    const std::optional<uint64_t> e0 = device->energy_mj();
    std::optional<uint64_t> e1 = e0;
    for (int w = 0; w < kMaxEnergyWindows && e0 && e1 && *e1 <= *e0; ++w) {
      const int ran = window();
      if (ran == 0) break;
      total += ran;
      e1 = device->energy_mj();
    }
    if (total > 0 && e0 && e1 && *e1 > *e0) {
      SampleStats& stats = std::string(side) == "candidate" ? timing->candidate : timing->reference;
      stats.energy_j = static_cast<double>(*e1 - *e0) / 1000.0 / total;
    }
    energy[std::string(side) + "_calls"] = total;
  };

  std::optional<RunnerReply> failed;
  joules_per_call(
      [&] {
        RunnerReply reply = session->call(deadline, {{"repeat", cand_calls}});
        if (!reply.ok()) {
          failed = std::move(reply);
          return 0;
        }
        return integer_or(reply.body, "rc", 0) == 0 ? cand_calls : 0;
      },
      "candidate");
  if (failed) {
    return verdict_from_runner_failure(*failed, "in back-to-back calls for the energy measurement", limit_ms,
                                       session->runner().output_tail());
  }
  const TaskSpec& task = plan.cases.front().task;
  joules_per_call(
      [&] {
        for (int i = 0; i < ref_calls; ++i) ref::run_reference(task, inputs);
        device->synchronize();
        return ref_calls;
      },
      "reference");
  timing->energy = energy;
  return {};
}

std::set<std::string> own_kernel_names(const env::Artifact& artifact) {
  std::set<std::string> names;
  if (!artifact.resources.is_object()) return names;
  for (const auto& [signature, r] : artifact.resources.items()) {
    names.insert(string_or(r, "mangled", signature));
  }
  return names;
}

bool uses_tensor_cores(const TaskSpec& task) {
  for (const auto& node : task.nodes) {
    const OpSchema* op = op_registry().find(node.op);
    if (op != nullptr && op->category == OpCategory::kMainLoop) return true;
  }
  return false;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", v);
  return buf;
}

// Hints from the measured counters and launch shapes, beyond the roofline's.
void add_metric_hints(const json& metrics, const KernelAttribution* a, double min_bytes,
                      std::vector<std::string>* hints) {
  if (metrics.contains("achieved_occupancy_pct") && metrics["achieved_occupancy_pct"].get<double>() < 25 &&
      metrics.value("sm_throughput_pct", 100.0) < 50) {
    hints->push_back("achieved occupancy is " + percent(metrics["achieved_occupancy_pct"].get<double>()) +
                     " of the warps an SM can hold and the SMs are mostly idle: launch more blocks, or lower "
                     "registers and shared memory per block so more fit on each SM.");
  }
  if (metrics.contains("dram_bytes") && min_bytes > 0) {
    double ratio = metrics["dram_bytes"].get<double>() / min_bytes;
    if (ratio > 1.5) {
      char buf[240];
      std::snprintf(buf, sizeof(buf),
                    "the call moved %.1fx the bytes it must (%.3g MB through DRAM for a minimum of %.3g MB): "
                    "read each input once, keep intermediates in registers or shared memory, and fuse passes.",
                    ratio, metrics["dram_bytes"].get<double>() / 1e6, min_bytes / 1e6);
      hints->push_back(buf);
    }
  }
  if (a == nullptr) return;
  for (const auto& k : a->kernels) {
    if (!k.value("own", false) || !k.contains("waves")) continue;
    double waves = k["waves"].get<double>(), fill = k.value("last_wave_fill", 1.0);
    if (waves > 0 && waves < 1) {
      hints->push_back(k["name"].get<std::string>() + " fills " + percent(100 * waves) +
                       " of one wave of blocks across the SMs: split the work into more blocks so every SM is busy.");
    } else if (waves >= 1 && waves < 4 && fill < 0.5) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.2f waves", waves);
      hints->push_back(k["name"].get<std::string>() + " runs " + buf + " with the last wave " + percent(100 * fill) +
                       " full: size the grid to a multiple of the blocks the SMs hold at once, or use a "
                       "grid-stride loop over exactly that many blocks.");
    }
  }
  if (a->kernel_launches > 3) {
    hints->push_back(std::to_string(a->kernel_launches) +
                     " kernel launches per call: each costs microseconds of launch latency; fuse them.");
  }
}

json roofline_profile(const TaskSpec& task, double time_ms, int launches, const JudgeDevice& device) {
  WorkEstimate work = estimate_work(task);
  env::DevicePeaks peaks = env::DevicePeaks::h200();
  peaks.name = device.name();
  if (device.name().find("H200") == std::string::npos && device.peak_memory_bytes_per_s() > 0) {
    // Not the part the table describes: its own bandwidth, same FLOP rates.
    peaks.memory_bytes_per_s = device.peak_memory_bytes_per_s();
  }
  env::RooflineInput in;
  in.bytes = work.bytes;
  in.flops = work.flops;
  in.time_s = time_ms / 1000.0;
  in.launches = std::max(launches, 1);
  in.tensor_cores = uses_tensor_cores(task);
  json j = env::to_json(env::classify_roofline(in, peaks));
  j["bytes"] = work.bytes;
  j["flops"] = work.flops;
  j["time_ms"] = time_ms;
  return j;
}

// What the phases of profile_candidate share.
struct ProfileCall {
  const env::EvalRequest& request;
  const env::EvalOptions& options;
  const ShapeCase& base;
  CandidateSession* session;
  JudgeDevice* device;
  RunnerPool* profilers;
  const RunnerLimits& limits;
  ipc::Deadline deadline;

  ipc::Deadline call_deadline(double ms) const {
    return ipc::Deadline::earliest(deadline, ipc::Deadline::after_ms(ms));
  }
};

// One profiling pass: the runner's reply, and its output tail when it failed.
struct ProfilerPass {
  RunnerReply reply;
  std::string output;
};

// What the profiler runner saw, for the roofline and the hints.
struct Observation {
  std::optional<KernelAttribution> attribution;
  json metrics = nullptr;
};

// One profiling pass in a fresh profiler runner on the candidate's arena; the
// runner is gone after it. `unavailable` says why no runner could be taken.
ProfilerPass profile_once(const ProfileCall& call, bool with_metrics, std::string* unavailable, json* phase_ms) {
  RunnerReply r;
  std::unique_ptr<RunnerProcess> runner;
  const auto t_take = Clock::now();
  try {
    RunnerPool::Taken taken = call.profilers->take(call.call_deadline(RunnerPool::kStartLimitMs));
    runner = std::move(taken.runner);
    if (!taken.started.ok()) {
      *unavailable = std::string("the profiler runner did not start: ") + taken.started.detail;
      return {taken.started, std::string()};
    }
    // The next profile's runner starts while this one profiles, the one
    // stage that times nothing. Its start-up work on the GPU (a context,
    // a few KiB of memsets) is small beside a profiled call's: DRAM bytes
    // read this way agreed with Nsight Compute's within 1% (bench_cuda).
    call.profilers->refill();
  } catch (const SystemError& e) {
    *unavailable = std::string("no profiler runner: ") + e.what();
    r.status = Status::kError;
    r.detail = *unavailable;
    return {r, std::string()};
  }
  r = runner->setup(runner_candidate(call.request.artifact, call.request.task), call.limits,
                    call.session->arena().descriptor(), call.session->arena().descriptors(),
                    call.call_deadline(std::max(call.options.call_timeout_ms, 5000.0)));
  if (r.ok()) {
    json b = call.session->tensor_bindings(call.base);
    r = runner->bind(b["inputs"], b["outputs"], call.call_deadline(call.options.call_timeout_ms));
  }
  (*phase_ms)["profiler_setup"] = phase_ms->value("profiler_setup", 0.0) + ms_since(t_take);
  if (r.ok()) r = runner->profile({{"metrics", with_metrics}}, call.call_deadline(kProfileBudgetMs));
  std::string output = r.ok() ? std::string() : runner->output_tail(2048);
  runner->terminate();
  return {r, output};
}

// The pass the profile is read from: with counters if asked for, again
// without them if the sandbox stopped their collection; a reply whose
// profile is malformed counts as a protocol failure.
ProfilerPass profile_with_fallback(const ProfileCall& call, std::string* unavailable, ProfileResult* result) {
  ProfilerPass pass = profile_once(call, call.options.hardware_metrics, unavailable, &result->phase_ms);
  RunnerReply& r = pass.reply;
  if (r.status == Status::kSandbox && call.options.hardware_metrics) {
    // Counter collection makes CUPTI touch files (on the H200: openat,
    // stat, then unlink), which the sandbox refuses; that is the harness's
    // doing, not the candidate's. Profile again without counters: the
    // attribution pass, which decides the violations below, runs the same
    // candidate code either way, so a candidate that trips the sandbox on
    // purpose is still caught by the second pass.
    result->profile.metrics_unavailable =
        "counter collection was stopped by the sandbox (" + r.detail + "); profiled again without counters";
    pass = profile_once(call, false, unavailable, &result->phase_ms);
  }
  // The reply is the candidate's to forge: every field is checked before
  // anything reads it (profile_reply.h).
  if (r.ok()) {
    if (std::string problem = profile_reply_problem(r.body["profile"]); !problem.empty()) {
      r.status = Status::kProtocol;
      r.detail = "a 'profiled' reply whose profile." + problem;
    }
  }
  return pass;
}

// A pass that failed: the harness's problem (no runner, or a failure before
// the candidate was loaded), which costs the profile and nothing else, or
// the candidate's.
void blame_failed_pass(const ProfilerPass& pass, const std::string& unavailable, ProfileResult* result) {
  const RunnerReply& r = pass.reply;
  ProfileSummary& profile = result->profile;
  if (!unavailable.empty()) {
    profile.attribution_unavailable = unavailable;
  } else if (!r.ok() && !r.candidate_ran) {
    profile.attribution_unavailable = "the profiler runner failed before the candidate was loaded (" +
                                      std::string(runner_status_name(r.status)) + ": " + r.detail + ")";
    profile.profiler_output = pass.output;
  } else if (!r.ok()) {
    // Once the candidate is loaded, an error reply is no better evidence
    // than a crash: its code could have written it, e.g. to keep the
    // traced call (and its foreign streams) out of the report.
    result->verdict = Verdict::violation("profiler_fault",
                                         "the candidate passed verification and timing but its runner failed under the "
                                         "profiler (" +
                                             std::string(runner_status_name(r.status)) + ": " + r.detail +
                                             "): it behaves differently when observed");
    profile.profiler_output = pass.output;
  }
}

// Why a checked profile reply holds no trace of the call; "" when it does.
std::string missing_trace(const json& p) {
  if (p.contains("activity") && !p["activity"].contains("error")) return "";
  const json why = p.contains("activity") ? p["activity"]["error"] : p.value("activity_unavailable", json("unknown"));
  const std::string text = why.is_string() ? why.get<std::string>() : why.dump();
  return text.empty() ? "the trace failed without saying why" : text;
}

// A checked profile reply into the report: its phase times, the kernel
// attribution (whose violations become the verdict's) and the metrics.
Observation read_profile(const ProfileCall& call, const json& p, ProfileResult* result) {
  Observation seen;
  ProfileSummary& profile = result->profile;
  const json parts = p.value("phase_ms", json::object());
  for (const auto& [part, ms] : parts.items()) result->phase_ms[part] = ms;
  if (const std::string missing = missing_trace(p); !missing.empty()) {
    profile.attribution_unavailable = missing;
  } else {
    AttributionDevice where;
    json clocks = call.device->clocks();
    where.sm_count = clocks.value("sm_count", 0);
    KernelAttribution& attribution =
        seen.attribution.emplace(attribute_kernels(p["activity"], own_kernel_names(call.request.artifact), where));
    profile.attribution = attribution.to_json();
    profile.own_kernel_fraction = attribution.own_kernel_fraction;
    profile.traced_call_ms = static_cast<double>(p["activity"].value("device_ns", uint64_t{0})) / 1e6;
    if (!attribution.violations.empty() && !result->verdict.failed()) {
      result->verdict = Verdict::violation(attribution.violations[0].check, attribution.violations[0].detail);
      for (size_t i = 1; i < attribution.violations.size(); ++i) {
        result->verdict.violations.push_back(attribution.violations[i]);
      }
    }
  }
  if (p.contains("metrics")) {
    seen.metrics = normalize_metrics(p["metrics"].value("values", json::object()),
                                     seen.attribution ? seen.attribution->busy_ms : 0.0);
    seen.metrics["passes"] = p["metrics"].value("passes", 0);
    seen.metrics["unsupported"] = p["metrics"].value("unsupported", json::array());
    if (seen.attribution) seen.metrics["waves_per_sm"] = seen.attribution->max_waves;
    profile.metrics = hardware_metrics_from_json(seen.metrics, "<profiler metrics>");
  } else if (p.contains("metrics_unavailable")) {
    profile.metrics_unavailable = p["metrics_unavailable"];
  }
  // CUPTI loading libraries mid-collection is what the sandbox has
  // stopped before (cuda_runner_device.cpp, extra_syscalls): kept in view.
  if (p.contains("libraries_loaded")) profile.libraries_loaded_while_profiling = p["libraries_loaded"];
  return seen;
}

// Attribution and metrics in a profiler runner on the same arena.
Observation observe_in_profiler(const ProfileCall& call, ProfileResult* result) {
  if (call.profilers == nullptr) {
    result->profile.attribution_unavailable = "this backend has no profiler runner";
    return {};
  }
  std::string unavailable;
  ProfilerPass pass = profile_with_fallback(call, &unavailable, result);
  blame_failed_pass(pass, unavailable, result);
  if (!pass.reply.ok()) return {};
  result->profile.traced_in = "profiler_runner";
  return read_profile(call, pass.reply.body["profile"], result);
}

// Attribution in the candidate's own runner, after its timing (a tracing
// timing runner, JudgeLoopConfig::trace_in_timing_runner): no second runner
// to load and tear down. Nothing when that trace failed, for whatever reason
// (the reason goes to the profile); the caller then traces in a profiler
// runner, which judges the candidate as it always has, so a candidate that
// fails here on purpose is still observed, and a tracer the timing runner's
// sandbox stops costs time, never a verdict.
std::optional<Observation> observe_in_timing_runner(const ProfileCall& call, ProfileResult* result) {
  // As before every timed call: nothing of the judge's own still running,
  // and the L2 flushed (the runner traces at once, cuda_runner_device.cpp).
  call.device->synchronize();
  call.device->flush_cache();
  // One call traced, no counter passes: a call's limit, with room for the
  // trace's own flush, rather than the whole profile's budget.
  const double limit_ms = std::max(2 * call.options.call_timeout_ms, 5000.0);
  RunnerReply r = call.session->runner().profile({{"metrics", false}}, call.call_deadline(limit_ms));
  std::string failed;
  if (!r.ok()) {
    failed = std::string(runner_status_name(r.status)) + ": " + r.detail;
  } else if (std::string problem = profile_reply_problem(r.body["profile"]); !problem.empty()) {
    failed = "a 'profiled' reply whose profile." + problem;
  } else {
    failed = missing_trace(r.body["profile"]);
  }
  if (!failed.empty()) {
    result->profile.timing_runner_trace_failed = "the trace in the timing runner failed (" + failed + ")";
    return std::nullopt;
  }
  result->profile.traced_in = "timing_runner";
  return read_profile(call, r.body["profile"], result);
}

// Where the call is traced: in the timing runner when it carries a tracer
// and no counters are asked for, else (or when that fails) in a profiler
// runner.
Observation observe(const ProfileCall& call, ProfileResult* result) {
  if (call.session->runner().traces() && !call.options.hardware_metrics && call.session->runner().alive()) {
    if (std::optional<Observation> seen = observe_in_timing_runner(call, result)) return *std::move(seen);
  }
  return observe_in_profiler(call, result);
}

// Roofline: the timed median when there is one, else the traced call; then
// the hints from it and from the measured counters.
void add_roofline_and_hints(const TaskSpec& task, const JudgeDevice& device, const Observation& seen,
                            const TimingSummary* timing, ProfileSummary* profile) {
  double time_ms = timing != nullptr ? timing->candidate.median_ms : 0;
  if (!(time_ms > 0)) time_ms = profile->traced_call_ms.value_or(0.0);
  std::vector<std::string> hints;
  if (time_ms > 0) {
    try {
      json roofline = roofline_profile(task, time_ms, seen.attribution ? seen.attribution->kernel_launches : 1, device);
      for (const auto& h : roofline["hints"]) hints.push_back(h.get<std::string>());
      profile->roofline = roofline;
    } catch (const InputError& e) {
      profile->roofline_unavailable = e.what();
    }
  }
  add_metric_hints(seen.metrics.is_object() ? seen.metrics : json::object(),
                   seen.attribution ? &*seen.attribution : nullptr, estimate_work(task).bytes, &hints);
  profile->hints = std::move(hints);
}

}  // namespace

json normalize_metrics(const json& values, double busy_ms) {
  json m = json::object();
  auto take = [&](const char* name, const char* key, double scale) {
    if (values.contains(name) && values[name].is_number()) m[key] = values[name].get<double>() * scale;
  };
  take("gpu__time_duration.sum", "range_ms", 1e-6);
  take("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm_throughput_pct", 1);
  take("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "memory_throughput_pct", 1);
  take("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_throughput_pct", 1);
  take("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved_occupancy_pct", 1);
  take("sm__cycles_elapsed.avg.per_second", "sm_clock_mhz", 1e-6);
  if (values.contains("dram__bytes_read.sum") && values.contains("dram__bytes_write.sum")) {
    m["dram_bytes"] = values["dram__bytes_read.sum"].get<double>() + values["dram__bytes_write.sum"].get<double>();
  }
  const double range_ms = m.value("range_ms", 0.0);
  std::string basis = "busy";
  // (A counter CUPTI could not evaluate arrives as null, never as a number.)
  auto number = [&](const char* name) {
    return values.contains(name) && values[name].is_number() ? values[name].get<double>() : 0.0;
  };
  const double active = number("sm__cycles_active.max");
  const double elapsed = number("sm__cycles_elapsed.max");
  if (active > 0 && elapsed > 0 && range_ms > 0) {
    busy_ms = range_ms * std::min(1.0, active / elapsed);
    basis = "sm_active_cycles";
  }
  // Only ever scaled up: a busy time longer than the range (taken from a
  // traced call that ran slower) leaves the range's figures.
  if (!(busy_ms > 0) || !(range_ms > busy_ms)) {
    m["pct_basis"] = "range";
    return m;
  }
  const double scale = range_ms / busy_ms;
  json over_range = json::object();
  for (const char* key : {"sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct"}) {
    if (!m.contains(key)) continue;
    over_range[key] = m[key];
    // Capped: the busy time is a proxy, not the hardware's own elapsed count.
    m[key] = std::min(100.0, m[key].get<double>() * scale);
  }
  m["busy_ms"] = busy_ms;
  m["pct_basis"] = basis;
  m["over_range"] = over_range;
  return m;
}

ProfileResult profile_candidate(const env::EvalRequest& request, const CasePlan& plan, CandidateSession* session,
                                JudgeDevice* device, RunnerPool* profilers, const RunnerLimits& limits,
                                ipc::Deadline deadline, TimingSummary* timing) {
  ProfileResult result;
  const ProfileCall call{request, request.options, plan.cases.front(), session, device, profilers, limits, deadline};

  // Check: the base shape binds, on inputs the candidate has not seen.
  RunnerReply bound = session->bind(call.base, call.call_deadline(call.options.call_timeout_ms));
  if (!bound.ok()) {
    result.verdict = verdict_from_runner_failure(bound, "while binding for the profile", call.options.call_timeout_ms,
                                                 session->runner().output_tail());
    return result;
  }
  std::vector<at::Tensor> inputs = ref::make_inputs(call.base.task, kProfileSeed, device->device());
  session->load_inputs(inputs);
  session->poison_outputs();
  device->synchronize();

  // Energy per call of both sides, beside the timed medians.
  if (timing != nullptr && call.options.energy_window_ms > 0) {
    const auto t = Clock::now();
    const double limit_ms = call.options.call_timeout_ms * 4;
    Verdict v = measure_energy(plan, session, device, inputs, call.options.energy_window_ms, limit_ms,
                               call.call_deadline(limit_ms), timing);
    result.phase_ms["energy"] = ms_since(t);
    if (v.failed()) {
      result.verdict = std::move(v);
      return result;
    }
  }

  // Kernel attribution and hardware metrics.
  const Observation seen = observe(call, &result);

  // Roofline and hints.
  add_roofline_and_hints(call.base.task, *device, seen, timing, &result.profile);
  return result;
}

}  // namespace kforge::judge
