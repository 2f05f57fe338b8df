// The sender's latency statistics: a bounded window of recent samples, so that
// a long-running worker reports current percentiles at a fixed memory cost.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kforge::rollout::internal {

inline constexpr size_t kLatencySamples = 65536;

inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// The last kLatencySamples latencies, in milliseconds.
class LatencyRing {
 public:
  void add(double ms) {
    if (samples_.size() < kLatencySamples) {
      samples_.push_back(ms);
    } else {
      samples_[next_] = ms;
    }
    next_ = (next_ + 1) % kLatencySamples;
  }
  double quantile(double q) const { return percentile(samples_, q); }
  double max() const { return samples_.empty() ? 0.0 : *std::max_element(samples_.begin(), samples_.end()); }

 private:
  std::vector<double> samples_;
  size_t next_ = 0;
};

}  // namespace kforge::rollout::internal
