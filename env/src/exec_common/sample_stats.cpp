#include "exec_common/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kforge::exec {
namespace {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

SampleSummary summarize(std::vector<double> samples) {
  SampleSummary s;
  s.samples = samples.size();
  s.rse = std::numeric_limits<double>::infinity();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.max = samples.back();
  s.median = percentile(samples, 0.5);
  s.p25 = percentile(samples, 0.25);
  s.p75 = percentile(samples, 0.75);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  if (samples.size() > 1) {
    double ss = 0;
    for (double v : samples) ss += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(ss / static_cast<double>(samples.size() - 1));
  }
  if (samples.size() >= 4 && s.median > 0) {
    double sigma = (s.p75 - s.p25) / 1.349;
    s.rse = 1.2533 * sigma / std::sqrt(static_cast<double>(samples.size())) / s.median;
  }
  return s;
}

const std::string& stop_reason_name(StopReason reason) {
  static const std::string kNames[] = {"continue", "converged", "time_cap", "sample_cap"};
  return kNames[static_cast<int>(reason)];
}

StopReason StoppingRule::check(const SampleSummary& a, const SampleSummary& b, double elapsed_ms) const {
  size_t n = std::min(a.samples, b.samples);
  if (n < static_cast<size_t>(std::max(min_samples, 1))) return StopReason::kContinue;
  if (a.rse <= target_rse && b.rse <= target_rse) return StopReason::kConverged;
  if (n >= static_cast<size_t>(max_samples)) return StopReason::kSampleCap;
  if (elapsed_ms >= max_time_ms) return StopReason::kTimeCap;
  return StopReason::kContinue;
}

}  // namespace kforge::exec
