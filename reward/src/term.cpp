#include "kforge/reward/term.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kforge/reward/reward.h"
#include "terms/builtin.h"

namespace kforge::reward {
namespace {

bool usable_positive(const std::optional<double>& v) { return v && std::isfinite(*v) && *v > 0.0; }

// Steps of these actions exist to judge the candidate; one that ends without a
// verdict is treated as failed, so that "submit something that never runs"
// cannot score better than a wrong answer.
bool judging_action(const std::string& action) {
  return action == "verify" || action == "profile" || action == "submit";
}

}  // namespace

bool timing_action(const std::string& action) { return action == "profile" || action == "submit"; }

Verdict judge(const Measurement& m) {
  if (!m.violations.empty()) return Verdict::kFailed;
  if (m.outcome == Outcome::kCorrect) return Verdict::kPassed;
  if (m.outcome == Outcome::kNotRun && !judging_action(m.action)) return Verdict::kNotJudged;
  return Verdict::kFailed;
}

const std::string& verdict_name(Verdict verdict) {
  static const std::string kNotJudged = "not_judged", kFailed = "failed", kPassed = "passed";
  switch (verdict) {
    case Verdict::kNotJudged:
      return kNotJudged;
    case Verdict::kFailed:
      return kFailed;
    case Verdict::kPassed:
      return kPassed;
  }
  return kFailed;
}

std::optional<SpeedFacts> speed_facts(const Measurement& m) {
  if (judge(m) != Verdict::kPassed || !m.timed || !usable_positive(m.speedup_eager)) return std::nullopt;
  SpeedFacts facts;
  facts.speedup_eager = *m.speedup_eager;
  if (usable_positive(m.speedup_compile)) facts.speedup_compile = m.speedup_compile;
  if (m.own_kernel_fraction && std::isfinite(*m.own_kernel_fraction) && *m.own_kernel_fraction >= 0.0 &&
      *m.own_kernel_fraction <= 1.0) {
    facts.own_kernel_fraction = m.own_kernel_fraction;
  }
  if (m.energy_j && std::isfinite(*m.energy_j) && *m.energy_j >= 0.0) facts.energy_j = m.energy_j;
  if (usable_positive(m.speedup_eager_lo) && usable_positive(m.speedup_eager_hi) &&
      *m.speedup_eager_lo <= *m.speedup_eager_hi) {
    facts.speedup_eager_lo = m.speedup_eager_lo;
    facts.speedup_eager_hi = m.speedup_eager_hi;
  }
  return facts;
}

double SpeedFacts::demonstrated_eager(double pivot) const {
  if (!speedup_eager_lo || !speedup_eager_hi) return speedup_eager;
  const double lo = std::min(*speedup_eager_lo, speedup_eager);
  const double hi = std::max(*speedup_eager_hi, speedup_eager);
  return std::clamp(pivot, lo, hi);
}

std::optional<double> SpeedFacts::demonstrated_compile(double pivot) const {
  if (!speedup_compile) return std::nullopt;
  // speedup_compile = speedup_eager * k for this task's fixed k.
  const double k = *speedup_compile / speedup_eager;
  if (!speedup_eager_lo || !speedup_eager_hi) return speedup_compile;
  const double lo = std::min(*speedup_eager_lo, speedup_eager) * k;
  const double hi = std::max(*speedup_eager_hi, speedup_eager) * k;
  return std::clamp(pivot, std::min(lo, *speedup_compile), std::max(hi, *speedup_compile));
}

std::vector<double> usable_speedups(const std::vector<double>& speedups) {
  std::vector<double> out;
  for (double s : speedups) {
    if (std::isfinite(s) && s > 0.0) out.push_back(s);
  }
  return out;
}

double SpeedTerm::compute(const Measurement& m, const RewardContext& ctx) const {
  switch (judge(m)) {
    case Verdict::kFailed:
      return failure_value();
    case Verdict::kNotJudged:
      return 0.0;
    case Verdict::kPassed:
      break;
  }
  const std::optional<SpeedFacts> facts = speed_facts(m);
  if (facts) return score(*facts, ctx);
  return timing_action(m.action) ? untimed_pass_value() : 0.0;
}

TermRegistry& TermRegistry::global() {
  // Never destroyed: terms may be created from other static destructors' paths
  // (e.g. a logger flushing a config at exit).
  static TermRegistry* registry = [] {
    auto* r = new TermRegistry;
    internal::register_builtin_terms(*r);
    return r;
  }();
  return *registry;
}

void TermRegistry::add(const std::string& type, TermFactory factory) {
  if (type.empty()) throw std::invalid_argument("reward term type must not be empty");
  if (!factory) throw std::invalid_argument("reward term \"" + type + "\": no factory given");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& f : factories_) {
    if (f.first == type) throw std::invalid_argument("reward term \"" + type + "\" is already registered");
  }
  factories_.emplace_back(type, std::move(factory));
}

bool TermRegistry::contains(const std::string& type) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::any_of(factories_.begin(), factories_.end(), [&](const auto& f) { return f.first == type; });
}

std::vector<std::string> TermRegistry::types() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& f : factories_) out.push_back(f.first);
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<RewardTerm> TermRegistry::create(const std::string& type, ObjectReader& params) const {
  TermFactory factory;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& f : factories_) {
      if (f.first == type) factory = f.second;
    }
  }
  if (!factory) throw std::out_of_range("unknown reward term type \"" + type + "\"");
  // Called outside the lock: a factory may itself consult the registry.
  return factory(params);
}

}  // namespace kforge::reward
