// A penalty for each hack check that fired (docs/architecture.md#reward-hacking), on top of the
// failure value the speed terms already give, so that cheating always scores
// below an honest failure.
#include <algorithm>
#include <map>

#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

// distinct_checks: one penalty per check name, however many seeds or shapes
//   caught it (a check firing on every seed is still one kind of cheat);
// every_violation: one penalty per reported violation.
const std::vector<std::string>& count_modes() {
  static const std::vector<std::string> kModes = {"distinct_checks", "every_violation"};
  return kModes;
}

class ViolationPenalty final : public RewardTerm {
 public:
  explicit ViolationPenalty(ObjectReader& r) {
    penalty_ = penalty_or(r, "penalty", -1.0);
    if (auto f = r.optional("per_check")) {
      ObjectReader checks = f->as_object();
      for (auto it = f->value().begin(); it != f->value().end(); ++it) {
        per_check_[it.key()] = penalty_value(checks.required(it.key()));
      }
      checks.finish();
    }
    count_ = enum_or(r, "count", count_modes(), "distinct_checks");
  }

  double compute(const Measurement& m, const RewardContext& /*ctx*/) const override {
    std::vector<std::string> checks;
    for (const auto& v : m.violations) checks.push_back(v.check);
    // The outcome alone is enough evidence; the backend may not have named it.
    if (checks.empty()) return m.outcome == Outcome::kViolation ? penalty_ : 0.0;
    if (count_ == "distinct_checks") {
      std::sort(checks.begin(), checks.end());
      checks.erase(std::unique(checks.begin(), checks.end()), checks.end());
    }
    double total = 0.0;
    for (const auto& c : checks) {
      auto it = per_check_.find(c);
      total += it == per_check_.end() ? penalty_ : it->second;
    }
    return total;
  }

  json params() const override {
    json per_check = json::object();
    for (const auto& [check, value] : per_check_) per_check[check] = value;
    return {{"penalty", penalty_}, {"per_check", per_check}, {"count", count_}};
  }

 private:
  double penalty_ = -1.0;
  std::map<std::string, double> per_check_;
  std::string count_;
};

}  // namespace

std::unique_ptr<RewardTerm> make_violation_penalty(ObjectReader& params) {
  return std::make_unique<ViolationPenalty>(params);
}

}  // namespace kforge::reward::internal
