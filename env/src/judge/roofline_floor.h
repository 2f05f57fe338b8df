// The roofline floor (docs/architecture.md#timing): a candidate's median time below the
// time its bytes need at the device's peak memory bandwidth is not a record,
// it is the violation below_roofline: the measurement was fooled.
//
// The floor is only as good as its two inputs, so both err on the side of a
// lower floor:
//   * roofline_bytes(): the bytes one call must move. Every kernel input is
//     read once and every output written once (kforge::estimate_work), except
//     when the graph has an op that may legitimately read only part of its
//     input (narrow, slice, tril, triu, where, pooling): then only the outputs
//     count, because a fused kernel may skip the rest.
//   * the peak comes from JudgeDevice::peak_memory_bytes_per_s(), an upper
//     bound by contract (0 = unknown: the check is skipped and says so).
// A floor at or below the timing resolution (the spread of the harness
// overhead) cannot be judged and is skipped too.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kforge/core/task_spec.h"

namespace kforge::judge {

double roofline_bytes(const TaskSpec& task);

struct RooflineCheck {
  bool checked = false;
  std::string note;  // why the check was skipped, when it was
  double bytes = 0;
  double peak_bytes_per_s = 0;
  double floor_ms = 0;
  std::string violation;  // non-empty: the candidate's median is below the floor
  nlohmann::json to_json() const;
};

RooflineCheck check_roofline(double bytes, double peak_bytes_per_s, double candidate_median_ms, double resolution_ms);

}  // namespace kforge::judge
