// Kernel attribution of one traced kf_forward call
// (docs/architecture.md#timing, #reward-hacking): from the CUPTI activity
// records the profiler runner sends (activity_trace.h), which kernels ran, how
// often and for how long, which of them are the candidate's own (compiled from
// its source) rather than a library's, and whether anything ran outside the
// stream passed to kf_forward or was still running after the call returned.
// Pure logic over JSON, unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kforge/core/measurement.h"

namespace kforge::judge {

struct KernelAttribution {
  // Per kernel name: {"name" (demangled), "mangled", "own", "launches",
  // "total_ms", "streams": ["given"|"other"], "grid", "block", "registers",
  // "shared_bytes", "occupancy", "waves", "last_wave_fill"} (the last three
  // when the device's limits are known).
  nlohmann::json kernels = nlohmann::json::array();
  int kernel_launches = 0;
  int other_activity = 0;  // memcpy and memset records
  double kernel_ms = 0;    // sum of kernel durations
  double own_kernel_ms = 0;
  double busy_ms = 0;                 // sum of all activity durations
  double own_kernel_fraction = 0;     // own_kernel_ms / busy_ms (0 when nothing ran)
  double max_waves = 0;               // of the candidate's own kernels
  std::string own_rule;               // how "own" was decided
  std::vector<Violation> violations;  // foreign_stream, work_after_return
  nlohmann::json to_json() const;
};

struct AttributionDevice {
  std::string arch = "sm_90a";
  int sm_count = 0;  // 0: no occupancy or waves
};

// `activity` is the runner's {"stream", "synchronized_ns", "records": [...]}.
// `own_kernels` are the mangled names of the kernels compiled from the
// candidate's source (Artifact::resources); when empty, kernels on the given
// stream count as its own.
KernelAttribution attribute_kernels(const nlohmann::json& activity, const std::set<std::string>& own_kernels,
                                    const AttributionDevice& device);

}  // namespace kforge::judge
