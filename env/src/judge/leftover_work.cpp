#include "judge/leftover_work.h"

#include <algorithm>
#include <cstdio>

namespace kforge::judge {
namespace {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

std::string check_work_after_return(const std::vector<double>& null_drain_ms,
                                    const std::vector<double>& call_drain_ms) {
  if (null_drain_ms.empty() || call_drain_ms.empty()) return "";
  const double threshold = quantile(null_drain_ms, 0.9) + std::max(kDrainSlackMs, quantile(null_drain_ms, 0.5));
  int draining = 0;
  double worst = 0;
  for (double d : call_drain_ms) {
    if (d > threshold) ++draining;
    worst = std::max(worst, d);
  }
  if (draining < kMinDrainingCalls || draining < kMinDrainingShare * static_cast<double>(call_drain_ms.size())) {
    return "";
  }
  char buf[300];
  std::snprintf(buf, sizeof(buf),
                "after %d of %zu timed calls the GPU was still busy with this candidate's work once its stream was "
                "synchronized (up to %.3f ms more, against %.3f ms for calls that do nothing): work was put on a "
                "stream other than the one passed to kf_forward and outlived the call",
                draining, call_drain_ms.size(), worst, threshold);
  return buf;
}

std::string check_foreign_stream(const nlohmann::json& done_body) {
  if (!done_body.value("foreign_pending", false)) return "";
  return "work was still queued or running on the legacy default stream or the per-thread stream when kf_forward "
         "returned: all GPU work must go on the stream passed to kf_forward and be complete there";
}

}  // namespace kforge::judge
