// Statistics of timing samples and the rule that decides when to stop
// sampling (docs/architecture.md#timing, after nvbench's stopping criterion).
//
// Noise handling: we summarize by the median and judge its precision by a
// robust relative standard error, RSE = 1.2533 * (IQR / 1.349) / sqrt(n) /
// median. IQR/1.349 estimates sigma for normal data but, unlike the sample
// standard deviation, is not inflated by the few large outliers that preemption
// on a shared machine produces; 1.2533/sqrt(n) is the asymptotic standard error
// of a median relative to sigma.
//
// The speedup's confidence interval (paired_ratio_interval): reference and
// candidate are timed in interleaved rounds, so each round k gives one paired
// log ratio d_k = ln(ref_k / cand_k), in which drift and load common to the
// round cancel. The interval is the distribution-free order-statistic (sign
// test) interval for the median of the d_k: [d_(k), d_(n+1-k)] with the
// largest k whose exact binomial coverage 1 - 2 P(Bin(n, 1/2) <= k - 1) is at
// least the nominal level (95 %); that exact coverage is reported with it
// (0.979 at 10 rounds, 0.959 at 20, 0.95 + O(1/sqrt(n)) beyond). It assumes
// only that rounds are independent and their ratios continuous; it estimates
// the typical per-round ratio, which is the ratio of the two medians whenever
// both sides' noise has the same shape (ref = R x, cand = y with x, y of one
// law) or one side is steady. Below 6 rounds no interval reaches 95 %: [min,
// max] is given with its lower exact coverage (0.94 at 5, 0.875 at 4).
//
// The decision rule (StoppingRule::decision): instead of a precision target,
// stop when the speedup's interval decides the reward: it contains no
// reward edge (a tier's threshold) and its half-width in log units is within
// the resolution a continuous term pays for. Close calls sample on to the
// time or sample cap.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace kforge::judge {

struct SampleSummary {
  size_t samples = 0;
  double median = 0, p25 = 0, p75 = 0, mean = 0, stddev = 0, min = 0, max = 0;
  double rse = 0;  // relative standard error of the median; +inf with fewer than 4 samples
};

// Percentiles by linear interpolation between order statistics.
SampleSummary summarize(std::vector<double> samples);

enum class StopReason { kContinue, kConverged, kTimeCap, kSampleCap, kDecided };
// "converged", "time_cap", "sample_cap", "decided"
const std::string& stop_reason_name(StopReason reason);

// The nominal level of every speedup interval.
inline constexpr double kSpeedupIntervalLevel = 0.95;
inline constexpr const char* kSpeedupIntervalMethod = "paired_log_ratio_sign_test";

// An interval for reference / candidate from paired rounds (see above).
struct RatioInterval {
  size_t rounds = 0;
  double lo = 0, hi = 0;  // ratio bounds, 0 < lo <= hi < inf when valid()
  double median = 0;      // exp(median of the paired log ratios)
  // The interval's exact coverage for continuous, independent rounds: at
  // least `level` from 6 rounds on (kSpeedupIntervalLevel), lower below.
  double confidence = 0;
  double level = kSpeedupIntervalLevel;

  bool valid() const;
  // Half the interval's width in log units, ln(hi / lo) / 2.
  double log_half_width() const;
};

// The interval of reference[k] / candidate[k] over the rounds both have.
// Invalid (valid() false) with fewer than 2 rounds, or when a bound falls on
// a round whose ratio is not finite and positive (a candidate time of 0: faster
// than the harness resolves).
RatioInterval paired_ratio_interval(const std::vector<double>& reference, const std::vector<double>& candidate,
                                    double level = kSpeedupIntervalLevel);

// The largest k (1-based, k <= n/2) such that [x_(k), x_(n+1-k)] covers the
// median with probability >= level, and that coverage; k = 1 with its (lower)
// coverage when even [min, max] falls short. Exact binomial sums up to 5000
// rounds, the normal approximation with continuity correction beyond.
std::pair<size_t, double> sign_test_rank(size_t n, double level);

// What the reward needs to know of the speedup, which decides when timing
// may stop: the speedups at which the reward steps (tier thresholds), and
// the interval's largest useful half-width in log units (0: none asked).
struct DecisionTarget {
  std::vector<double> edges;
  double log_resolution = 0;

  bool asked() const { return !edges.empty() || log_resolution > 0; }
  // No edge inside [lo, hi] and, when asked, half-width <= log_resolution.
  bool decided(const RatioInterval& interval) const;
};

struct StoppingRule {
  int min_samples = 10;
  int max_samples = 2000;
  double target_rse = 0.005;
  double max_time_ms = 2000.0;

  // Samples of both sides are interleaved and counted per side. min_samples
  // always holds (the request's own timeout bounds it); after that, the first
  // of: both medians precise enough, the time cap, the sample cap.
  StopReason check(const SampleSummary& a, const SampleSummary& b, double elapsed_ms) const;

  // When the reward asked for a decision (decision.asked()), it replaces the
  // precision target: after min_samples, the first of: the paired interval
  // of reference / candidate decides the reward ("decided"), the sample cap,
  // the time cap. Otherwise check() on the two sides' summaries, unchanged.
  DecisionTarget decision = {};
  StopReason check_paired(const std::vector<double>& reference, const std::vector<double>& candidate,
                          double elapsed_ms) const;
};

}  // namespace kforge::judge
