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

#include "common/json_fields.h"
#include "judge/kernel_attribution.h"
#include "judge/profile_reply.h"
#include "kforge/core/error.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/reference.h"
#include "kforge/env/analysis/roofline.h"

namespace kforge::judge {
namespace {

using json = nlohmann::json;
using Status = exec::RunnerReply::Status;

// Data the candidate has not seen in verification or timing.
constexpr uint64_t kProfileSeed = 7000003;
// Energy (EvalOptions::energy_window_ms): the NVML counter advances in steps
// of milliseconds, so windows much shorter than ~100 ms get noisy.
constexpr int kMaxEnergyCalls = 20000;
constexpr int kMaxEnergyWindows = 3;

using Clock = std::chrono::steady_clock;
using exec::ms_since;

// The profile request: one traced call plus one call per range-profiler pass.
constexpr double kProfileBudgetMs = 60000;

int energy_calls(double per_call_ms, double window_ms) {
  if (!(per_call_ms > 0) || !(window_ms > 0)) return 0;
  return static_cast<int>(std::clamp(std::ceil(window_ms / per_call_ms), 1.0, double{kMaxEnergyCalls}));
}

// Joules per call of the candidate and of the reference; nothing when the
// device has no energy counter.
Verdict measure_energy(const CasePlan& plan, CandidateSession* session, JudgeDevice* device,
                       const std::vector<at::Tensor>& inputs, double window_ms, double limit_ms,
                       exec::Deadline deadline, TimingSummary* timing) {
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

  std::optional<exec::RunnerReply> failed;
  joules_per_call(
      [&] {
        exec::RunnerReply reply = session->call(deadline, {{"repeat", cand_calls}});
        if (!reply.ok()) {
          failed = std::move(reply);
          return 0;
        }
        return exec::integer_or(reply.body, "rc", 0) == 0 ? cand_calls : 0;
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
    names.insert(exec::string_or(r, "mangled", signature));
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
                                JudgeDevice* device, RunnerPool* profilers, const exec::RunnerLimits& limits,
                                exec::Deadline deadline, TimingSummary* timing) {
  ProfileResult result;
  ProfileSummary& profile = result.profile;
  const env::EvalOptions& options = request.options;
  const ShapeCase& base = plan.cases.front();
  auto call_deadline = [&](double ms) { return exec::Deadline::earliest(deadline, exec::Deadline::after_ms(ms)); };

  exec::RunnerReply bound = session->bind(base, call_deadline(options.call_timeout_ms));
  if (!bound.ok()) {
    result.verdict = verdict_from_runner_failure(bound, "while binding for the profile", options.call_timeout_ms,
                                                 session->runner().output_tail());
    return result;
  }
  std::vector<at::Tensor> inputs = ref::make_inputs(base.task, kProfileSeed, device->device());
  session->load_inputs(inputs);
  session->poison_outputs();
  device->synchronize();

  if (timing != nullptr && options.energy_window_ms > 0) {
    const auto t = Clock::now();
    const double limit_ms = options.call_timeout_ms * 4;
    Verdict v = measure_energy(plan, session, device, inputs, options.energy_window_ms, limit_ms,
                               call_deadline(limit_ms), timing);
    result.phase_ms["energy"] = ms_since(t);
    if (v.failed()) {
      result.verdict = std::move(v);
      return result;
    }
  }

  // Attribution and metrics in a profiler runner on the same arena.
  std::optional<KernelAttribution> attribution;
  json metrics = nullptr;
  if (profilers == nullptr) {
    profile.attribution_unavailable = "this backend has no profiler runner";
  } else {
    // One profiling pass in a fresh profiler runner; the runner is gone after it.
    auto profile_once = [&](bool with_metrics, std::string* unavailable) {
      exec::RunnerReply r;
      std::unique_ptr<exec::RunnerProcess> runner;
      const auto t_take = Clock::now();
      try {
        runner = profilers->take();
        // The next profile's runner starts while this one profiles, the one
        // stage that times nothing. Its start-up work on the GPU (a context,
        // a few KiB of memsets) is small beside a profiled call's: DRAM bytes
        // read this way agreed with Nsight Compute's within 1% (bench_cuda).
        profilers->refill();
      } catch (const SystemError& e) {
        *unavailable = std::string("no profiler runner: ") + e.what();
        r.status = Status::kError;
        r.detail = *unavailable;
        return std::make_pair(r, std::string());
      }
      r = runner->setup(runner_candidate(request.artifact, request.task), limits, session->arena().descriptor(),
                        session->arena().descriptors(), call_deadline(std::max(options.call_timeout_ms, 5000.0)));
      if (r.ok()) {
        json b = session->tensor_bindings(base);
        r = runner->bind(b["inputs"], b["outputs"], call_deadline(options.call_timeout_ms));
      }
      result.phase_ms["profiler_setup"] = result.phase_ms.value("profiler_setup", 0.0) + ms_since(t_take);
      if (r.ok()) r = runner->profile({{"metrics", with_metrics}}, call_deadline(kProfileBudgetMs));
      std::string output = r.ok() ? std::string() : runner->output_tail(2048);
      runner->terminate();
      return std::make_pair(r, output);
    };
    std::string unavailable;
    std::pair<exec::RunnerReply, std::string> attempt = profile_once(options.hardware_metrics, &unavailable);
    exec::RunnerReply& r = attempt.first;
    const std::string& output = attempt.second;
    if (r.status == Status::kSandbox && options.hardware_metrics) {
      // Counter collection makes CUPTI touch files (on the H200: openat,
      // stat, then unlink), which the sandbox refuses; that is the harness's
      // doing, not the candidate's. Profile again without counters: the
      // attribution pass, which decides the violations below, runs the same
      // candidate code either way, so a candidate that trips the sandbox on
      // purpose is still caught by the second pass.
      profile.metrics_unavailable =
          "counter collection was stopped by the sandbox (" + r.detail + "); profiled again without counters";
      attempt = profile_once(false, &unavailable);
    }
    // The reply is the candidate's to forge: every field is checked before
    // anything reads it (profile_reply.h).
    if (r.ok()) {
      if (std::string problem = profile_reply_problem(r.body["profile"]); !problem.empty()) {
        r.status = Status::kProtocol;
        r.detail = "a 'profiled' reply whose profile." + problem;
      }
    }
    if (!unavailable.empty()) {
      profile.attribution_unavailable = unavailable;
    } else if (!r.ok() && !r.candidate_ran) {
      // The profiler runner failed before the candidate was in it: the
      // harness's problem, which costs the profile and nothing else.
      profile.attribution_unavailable = "the profiler runner failed before the candidate was loaded (" +
                                        std::string(exec::runner_status_name(r.status)) + ": " + r.detail + ")";
      profile.profiler_output = output;
    } else if (!r.ok()) {
      // Once the candidate is loaded, an error reply is no better evidence
      // than a crash: its code could have written it, e.g. to keep the
      // traced call (and its foreign streams) out of the report.
      result.verdict =
          Verdict::violation("profiler_fault",
                             "the candidate passed verification and timing but its runner failed under the "
                             "profiler (" +
                                 std::string(exec::runner_status_name(r.status)) + ": " + r.detail +
                                 "): it behaves differently when observed");
      profile.profiler_output = output;
    }
    if (r.ok()) {
      const json& p = r.body["profile"];
      const json parts = p.value("phase_ms", json::object());
      for (const auto& [part, ms] : parts.items()) result.phase_ms[part] = ms;
      if (p.contains("activity") && !p["activity"].contains("error")) {
        AttributionDevice where;
        json clocks = device->clocks();
        where.sm_count = clocks.value("sm_count", 0);
        attribution = attribute_kernels(p["activity"], own_kernel_names(request.artifact), where);
        profile.attribution = attribution->to_json();
        profile.own_kernel_fraction = attribution->own_kernel_fraction;
        profile.traced_call_ms = static_cast<double>(p["activity"].value("device_ns", uint64_t{0})) / 1e6;
        if (!attribution->violations.empty() && !result.verdict.failed()) {
          result.verdict = Verdict::violation(attribution->violations[0].check, attribution->violations[0].detail);
          for (size_t i = 1; i < attribution->violations.size(); ++i) {
            result.verdict.violations.push_back(attribution->violations[i]);
          }
        }
      } else {
        const json why =
            p.contains("activity") ? p["activity"]["error"] : p.value("activity_unavailable", json("unknown"));
        profile.attribution_unavailable = why.is_string() ? why.get<std::string>() : why.dump();
      }
      if (p.contains("metrics")) {
        metrics =
            normalize_metrics(p["metrics"].value("values", json::object()), attribution ? attribution->busy_ms : 0.0);
        metrics["passes"] = p["metrics"].value("passes", 0);
        metrics["unsupported"] = p["metrics"].value("unsupported", json::array());
        if (attribution) metrics["waves_per_sm"] = attribution->max_waves;
        profile.metrics = hardware_metrics_from_json(metrics, "<profiler metrics>");
      } else if (p.contains("metrics_unavailable")) {
        profile.metrics_unavailable = p["metrics_unavailable"];
      }
      // CUPTI loading libraries mid-collection is what the sandbox has
      // stopped before (cuda_runner_device.cpp, extra_syscalls): kept in view.
      if (p.contains("libraries_loaded")) profile.libraries_loaded_while_profiling = p["libraries_loaded"];
    }
  }

  // Roofline: the timed median when there is one, else the traced call.
  double time_ms = timing != nullptr ? timing->candidate.median_ms : 0;
  if (!(time_ms > 0)) time_ms = profile.traced_call_ms.value_or(0.0);
  std::vector<std::string> hints;
  if (time_ms > 0) {
    try {
      json roofline = roofline_profile(base.task, time_ms, attribution ? attribution->kernel_launches : 1, *device);
      for (const auto& h : roofline["hints"]) hints.push_back(h.get<std::string>());
      profile.roofline = roofline;
    } catch (const InputError& e) {
      profile.roofline_unavailable = e.what();
    }
  }
  add_metric_hints(metrics.is_object() ? metrics : json::object(), attribution ? &*attribution : nullptr,
                   estimate_work(base.task).bytes, &hints);
  profile.hints = std::move(hints);
  return result;
}

}  // namespace kforge::judge
