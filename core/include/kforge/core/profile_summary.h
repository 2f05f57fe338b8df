// The profile part of the judge's report (docs/architecture.md#timing, CUDA profile and
// submit steps) as a typed, versioned value. Like TimingSummary
// (timing_summary.h) its JSON form travels from the judge into step infos and
// trajectories; docs/schemas.md documents it field by field and a change that
// removes or retypes a field bumps kProfileSummarySchemaVersion.
//
// The per-kernel attribution table and the roofline record keep their JSON
// form (their producers, kernel_attribution.h and analysis/roofline.h, define
// them); what consumers act on (the own-kernel share, the counters, the
// hints, why a part is missing) is typed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/core/document.h"

namespace kforge {

inline constexpr int kProfileSummarySchemaVersion = 1;

// Hardware counters of one call from the CUPTI range profiler, restated as
// docs/cuda-backend.md explains. Each is absent when the device did not
// report it.
struct HardwareMetrics {
  std::optional<double> sm_throughput_pct;
  std::optional<double> memory_throughput_pct;
  std::optional<double> dram_throughput_pct;
  std::optional<double> dram_bytes;
  std::optional<double> achieved_occupancy_pct;
  std::optional<double> range_ms;
  std::optional<double> sm_clock_mhz;
  std::optional<double> busy_ms;       // the time the throughputs are restated over
  std::optional<double> waves_per_sm;  // of the candidate's own kernels
  std::string pct_basis;               // "sm_active_cycles" | "busy" | "range"
  json over_range = nullptr;           // the range's own throughput figures, when restated
  int passes = 0;
  std::vector<std::string> unsupported;  // counters this device could not collect
};

struct ProfileSummary {
  int schema_version = kProfileSummarySchemaVersion;
  // Share of the traced call's device time spent in the candidate's own
  // kernels, in [0, 1].
  std::optional<double> own_kernel_fraction;
  std::optional<double> traced_call_ms;
  // KernelAttribution::to_json(): {"kernels": [...], "kernel_launches", ...}.
  json attribution = nullptr;
  std::optional<HardwareMetrics> metrics;
  // env::to_json(RooflineResult) plus "bytes", "flops", "time_ms".
  json roofline = nullptr;
  // What to try next, in the order the policy should read them.
  std::vector<std::string> hints;
  // Why a part is missing; empty (null for metrics_unavailable) when present.
  std::string attribution_unavailable;
  json metrics_unavailable = nullptr;
  std::string roofline_unavailable;
  std::string profiler_output;  // the profiler runner's output when it failed
  // Where the call was traced: "profiler_runner" (a second runner on the
  // candidate's memory) or "timing_runner" (the candidate's own, after its
  // timing); empty when nothing was traced.
  std::string traced_in;
  // Why a trace in the timing runner was not used and a profiler runner
  // traced instead; empty when it was used or not tried.
  std::string timing_runner_trace_failed;
  json libraries_loaded_while_profiling = nullptr;  // what CUPTI loaded mid-collection
};

json to_json(const HardwareMetrics& m);
json to_json(const ProfileSummary& p);

// InputError naming the field for a wrong type, an unknown key or another
// schema version (see timing_summary.h).
HardwareMetrics hardware_metrics_from_field(const Field& field);
HardwareMetrics hardware_metrics_from_json(const json& j, const std::string& source = "<metrics>");
ProfileSummary profile_summary_from_field(const Field& field);
ProfileSummary profile_summary_from_json(const json& j, const std::string& source = "<profile>");

}  // namespace kforge
