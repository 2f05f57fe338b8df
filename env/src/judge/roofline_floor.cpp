#include "judge/roofline_floor.h"

#include <algorithm>
#include <cstdio>

#include "kforge/core/op_registry.h"

namespace kforge::judge {
namespace {

// Ops whose output may not depend on every input element.
bool may_read_part_of_input(const GraphNode& node) {
  static const char* const kPartialReaders[] = {"narrow", "slice", "tril", "triu", "where"};
  if (std::any_of(std::begin(kPartialReaders), std::end(kPartialReaders),
                  [&](const char* op) { return node.op == op; })) {
    return true;
  }
  const OpSchema* schema = op_registry().find(node.op);
  // A pooling window with a stride above its size skips input elements.
  return schema != nullptr && schema->category == OpCategory::kPooling;
}

}  // namespace

double roofline_bytes(const TaskSpec& task) {
  WorkEstimate work = estimate_work(task);
  if (std::none_of(task.nodes.begin(), task.nodes.end(), may_read_part_of_input)) return work.bytes;
  double inputs = 0;
  for (const auto& t : task.kernel_inputs()) inputs += static_cast<double>(t.nbytes());
  return std::max(work.bytes - inputs, 0.0);
}

nlohmann::json RooflineCheck::to_json() const {
  nlohmann::json j = {{"checked", checked}, {"bytes", bytes}, {"peak_bytes_per_s", peak_bytes_per_s}};
  if (checked || floor_ms > 0) j["floor_ms"] = floor_ms;
  if (!note.empty()) j["note"] = note;
  return j;
}

RooflineCheck check_roofline(double bytes, double peak_bytes_per_s, double candidate_median_ms, double resolution_ms) {
  RooflineCheck r;
  r.bytes = bytes;
  r.peak_bytes_per_s = peak_bytes_per_s;
  if (peak_bytes_per_s <= 0) {
    r.note = "the device's peak memory bandwidth is unknown: roofline check skipped";
    return r;
  }
  r.floor_ms = bytes / peak_bytes_per_s * 1e3;
  if (r.floor_ms <= std::max(resolution_ms, 0.0)) {
    r.note = "the roofline floor is below the timing resolution: check skipped";
    return r;
  }
  r.checked = true;
  if (candidate_median_ms < r.floor_ms) {
    char buf[240];
    std::snprintf(buf, sizeof(buf),
                  "median %.4f ms is below the %.4f ms that moving %.0f bytes takes at the peak bandwidth of "
                  "%.3g GB/s (time measured wrongly, or work done outside the call)",
                  candidate_median_ms, r.floor_ms, bytes, peak_bytes_per_s / 1e9);
    r.violation = buf;
  }
  return r;
}

}  // namespace kforge::judge
