#include "ties.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace kforge::reward::internal {

constexpr double kLevel = 0.95;  // every tie test's level
// A zero-width interval (a perfectly steady timing) counts as a very precise
// one rather than dividing by zero.
constexpr double kTinyStandardError = 1e-9;

namespace {

// P(a, x): the regularized lower incomplete gamma function, by its series
// (x < a + 1) or its continued fraction (Numerical Recipes' split).
double regularized_gamma_p(double a, double x) {
  if (x <= 0) return 0.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && std::abs(term) > 1e-15 * std::abs(sum); ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return sum * std::exp(log_prefix);
  }
  // Lentz's continued fraction for Q(a, x).
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < 1e-15) break;
  }
  return 1.0 - std::exp(log_prefix) * h;
}

}  // namespace

double chi_square_quantile(double p, int dof) {
  const double a = dof / 2.0;
  double lo = 0.0, hi = std::max(10.0, 10.0 * dof);
  while (regularized_gamma_p(a, hi / 2) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (regularized_gamma_p(a, mid / 2) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double two_sided_normal_quantile(double coverage) {
  // P(|Z| <= z) = erf(z / sqrt 2).
  double lo = 0.0, hi = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erf(mid / std::sqrt(2.0)) < coverage ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

std::vector<std::vector<size_t>> tie_classes(const std::vector<GroupMember>& members) {
  std::vector<size_t> order;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].speed) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return members[x].speed->log_speedup > members[y].speed->log_speedup; });
  std::vector<std::vector<size_t>> classes;
  std::vector<SpeedEvidence> current;
  for (size_t i : order) {
    current.push_back(*members[i].speed);
    if (classes.empty() || !statistically_tied(current)) {
      classes.emplace_back();
      current.assign(1, *members[i].speed);
    }
    classes.back().push_back(i);
  }
  return classes;
}

}  // namespace kforge::reward::internal

namespace kforge::reward {

double SpeedEvidence::standard_error() const {
  // Coverage outside (0.5, 1) is no interval this project makes; clamped so
  // that the quantile stays finite.
  const double z = internal::two_sided_normal_quantile(std::clamp(confidence, 0.5, 1.0 - 1e-12));
  return std::max((log_hi - log_lo) / 2.0 / z, internal::kTinyStandardError);
}

std::optional<SpeedEvidence> speed_evidence(const Measurement& m) {
  const std::optional<SpeedFacts> facts = speed_facts(m);
  if (!facts || !facts->speedup_eager_lo) return std::nullopt;
  SpeedEvidence e;
  e.log_speedup = std::log(facts->speedup_eager);
  e.log_lo = std::log(*facts->speedup_eager_lo);
  e.log_hi = std::log(*facts->speedup_eager_hi);
  if (m.speedup_confidence && *m.speedup_confidence > 0.5 && *m.speedup_confidence < 1.0) {
    e.confidence = *m.speedup_confidence;
  }
  return e;
}

bool statistically_tied(const std::vector<SpeedEvidence>& speeds) {
  if (speeds.size() < 2) return true;
  double weight = 0, weighted = 0;
  for (const SpeedEvidence& e : speeds) {
    const double se = e.standard_error();
    weight += 1 / (se * se);
    weighted += e.log_speedup / (se * se);
  }
  const double mean = weighted / weight;
  double q = 0;
  for (const SpeedEvidence& e : speeds) {
    const double se = e.standard_error();
    q += (e.log_speedup - mean) * (e.log_speedup - mean) / (se * se);
  }
  return q <= internal::chi_square_quantile(internal::kLevel, static_cast<int>(speeds.size()) - 1);
}

bool statistically_tied(const SpeedEvidence& a, const SpeedEvidence& b) { return statistically_tied({a, b}); }

}  // namespace kforge::reward
