#include "judge/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kforge::judge {
namespace {

// Above this many rounds the binomial sum gives way to the normal
// approximation (its error in the coverage is then below 1e-3).
constexpr size_t kExactBinomialRounds = 5000;

// P(Bin(n, 1/2) <= j) for j = 0.. until it exceeds `limit`: the cumulative
// sums, in log space so that 2^-n cannot underflow.
std::vector<double> binomial_half_cdf(size_t n, double limit) {
  std::vector<double> cdf;
  double log_pmf = -static_cast<double>(n) * std::log(2.0);
  double total = 0;
  for (size_t j = 0; j <= n / 2; ++j) {
    if (j > 0) log_pmf += std::log(static_cast<double>(n - j + 1)) - std::log(static_cast<double>(j));
    total += std::exp(log_pmf);
    cdf.push_back(total);
    if (total > limit) break;
  }
  return cdf;
}

double standard_normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

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
  static const std::string kNames[] = {"continue", "converged", "time_cap", "sample_cap", "decided"};
  return kNames[static_cast<int>(reason)];
}

std::pair<size_t, double> sign_test_rank(size_t n, double level) {
  if (n < 2) return {1, 0.0};
  const double tail = (1.0 - level) / 2.0;  // allowed per side
  if (n > kExactBinomialRounds) {
    // P(B <= k - 1) ~ Phi((k - 1 + 0.5 - n/2) / (sqrt(n)/2)).
    const double half = static_cast<double>(n) / 2.0, sd = std::sqrt(static_cast<double>(n)) / 2.0;
    // The upper tail quantile z, by bisection: Phi(-z) = tail.
    double z_lo = 0.0, z_hi = 40.0;
    for (int i = 0; i < 100; ++i) {
      const double mid = (z_lo + z_hi) / 2.0;
      (standard_normal_cdf(-mid) > tail ? z_lo : z_hi) = mid;
    }
    const double z = z_hi;
    auto k = static_cast<size_t>(std::floor(half - z * sd + 0.5));
    k = std::max<size_t>(k, 1);
    const double below = standard_normal_cdf((static_cast<double>(k) - 0.5 - half) / sd);
    return {k, 1.0 - 2.0 * below};
  }
  const std::vector<double> cdf = binomial_half_cdf(n, tail);
  // cdf[j] = P(B <= j); k - 1 = the largest j with cdf[j] <= tail.
  size_t k = 1;
  for (size_t j = 0; j < cdf.size(); ++j) {
    if (cdf[j] <= tail) k = j + 1;
  }
  k = std::min(k, n / 2);
  k = std::max<size_t>(k, 1);
  return {k, 1.0 - 2.0 * cdf[k - 1]};
}

bool RatioInterval::valid() const {
  return rounds >= 2 && std::isfinite(lo) && std::isfinite(hi) && lo > 0 && hi >= lo;
}

double RatioInterval::log_half_width() const {
  return valid() ? std::log(hi / lo) / 2.0 : std::numeric_limits<double>::infinity();
}

RatioInterval paired_ratio_interval(const std::vector<double>& reference, const std::vector<double>& candidate,
                                    double level) {
  RatioInterval out;
  out.level = level;
  const size_t n = std::min(reference.size(), candidate.size());
  out.rounds = n;
  if (n < 2) return out;
  // ln(r / c) with its limits: a candidate time of 0 is +inf, a reference
  // time of 0 is -inf; they sort to the ends and only matter if a bound
  // lands on them.
  std::vector<double> d(n);
  for (size_t k = 0; k < n; ++k) {
    const double r = reference[k], c = candidate[k];
    if (!(c > 0)) {
      d[k] = r > 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    } else if (!(r > 0)) {
      d[k] = -std::numeric_limits<double>::infinity();
    } else {
      d[k] = std::log(r / c);
    }
    if (std::isnan(d[k])) return out;
  }
  std::sort(d.begin(), d.end());
  const auto [k, confidence] = sign_test_rank(n, level);
  out.confidence = confidence;
  out.lo = std::exp(d[k - 1]);
  out.hi = std::exp(d[n - k]);
  out.median = std::exp(percentile(d, 0.5));
  return out;
}

bool DecisionTarget::decided(const RatioInterval& interval) const {
  if (!interval.valid()) return false;
  for (double edge : edges) {
    if (interval.lo <= edge && edge <= interval.hi) return false;
  }
  return !(log_resolution > 0) || interval.log_half_width() <= log_resolution;
}

StopReason StoppingRule::check_paired(const std::vector<double>& reference, const std::vector<double>& candidate,
                                      double elapsed_ms) const {
  if (!decision.asked()) return check(summarize(reference), summarize(candidate), elapsed_ms);
  const size_t n = std::min(reference.size(), candidate.size());
  if (n < static_cast<size_t>(std::max(min_samples, 1))) return StopReason::kContinue;
  if (decision.decided(paired_ratio_interval(reference, candidate))) return StopReason::kDecided;
  if (n >= static_cast<size_t>(max_samples)) return StopReason::kSampleCap;
  if (elapsed_ms >= max_time_ms) return StopReason::kTimeCap;
  return StopReason::kContinue;
}

StopReason StoppingRule::check(const SampleSummary& a, const SampleSummary& b, double elapsed_ms) const {
  size_t n = std::min(a.samples, b.samples);
  if (n < static_cast<size_t>(std::max(min_samples, 1))) return StopReason::kContinue;
  if (a.rse <= target_rse && b.rse <= target_rse) return StopReason::kConverged;
  if (n >= static_cast<size_t>(max_samples)) return StopReason::kSampleCap;
  if (elapsed_ms >= max_time_ms) return StopReason::kTimeCap;
  return StopReason::kContinue;
}

}  // namespace kforge::judge
