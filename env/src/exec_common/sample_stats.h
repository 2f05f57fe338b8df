// Statistics of timing samples and the rule that decides when to stop
// sampling (docs/architecture.md#timing, after nvbench's stopping criterion).
//
// Noise handling: we summarize by the median and judge its precision by a
// robust relative standard error, RSE = 1.2533 * (IQR / 1.349) / sqrt(n) /
// median. IQR/1.349 estimates sigma for normal data but, unlike the sample
// standard deviation, is not inflated by the few large outliers that preemption
// on a shared machine produces; 1.2533/sqrt(n) is the asymptotic standard error
// of a median relative to sigma.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kforge::exec {

struct SampleSummary {
  size_t samples = 0;
  double median = 0, p25 = 0, p75 = 0, mean = 0, stddev = 0, min = 0, max = 0;
  double rse = 0;  // relative standard error of the median; +inf with fewer than 4 samples
};

// Percentiles by linear interpolation between order statistics.
SampleSummary summarize(std::vector<double> samples);

enum class StopReason { kContinue, kConverged, kTimeCap, kSampleCap };
const std::string& stop_reason_name(StopReason reason);  // "converged", "time_cap", "sample_cap"

struct StoppingRule {
  int min_samples = 10;
  int max_samples = 2000;
  double target_rse = 0.005;
  double max_time_ms = 2000.0;

  // Samples of both sides are interleaved and counted per side. min_samples
  // always holds (the request's own timeout bounds it); after that, the first
  // of: both medians precise enough, the time cap, the sample cap.
  StopReason check(const SampleSummary& a, const SampleSummary& b, double elapsed_ms) const;
};

}  // namespace kforge::exec
