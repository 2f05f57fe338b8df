// Shaping by failure kind: the speed terms give every failure the same value,
// which says nothing about how close the candidate came. This term orders them
// (by default: not compiling < crashing < wrong answer).
#include <array>

#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

struct Default {
  Outcome outcome;
  double penalty;
};

// kNotRun counts only where judge() calls it a failure (a judging action that
// produced no verdict). kViolation defaults to 0 because violation_penalty
// owns that case; kCorrect has no entry.
constexpr std::array<Default, 8> kDefaults = {{
    {Outcome::kNotRun, -1.0},
    {Outcome::kCompileError, -1.0},
    {Outcome::kRejected, -1.0},
    {Outcome::kRuntimeError, -0.75},
    {Outcome::kCrash, -0.75},
    {Outcome::kTimeout, -0.75},
    {Outcome::kWrong, -0.5},
    {Outcome::kViolation, 0.0},
}};

class FailurePenalty final : public RewardTerm {
 public:
  explicit FailurePenalty(ObjectReader& r) {
    for (size_t i = 0; i < kDefaults.size(); ++i) {
      penalties_[i] = penalty_or(r, outcome_name(kDefaults[i].outcome), kDefaults[i].penalty);
    }
  }

  double compute(const Measurement& m, const RewardContext& /*ctx*/) const override {
    if (judge(m) != Verdict::kFailed) return 0.0;
    for (size_t i = 0; i < kDefaults.size(); ++i) {
      if (kDefaults[i].outcome == m.outcome) return penalties_[i];
    }
    // kCorrect with violations: violation_penalty's business.
    return 0.0;
  }

  json params() const override {
    json j = json::object();
    for (size_t i = 0; i < kDefaults.size(); ++i) j[outcome_name(kDefaults[i].outcome)] = penalties_[i];
    return j;
  }

 private:
  std::array<double, kDefaults.size()> penalties_{};
};

}  // namespace

std::unique_ptr<RewardTerm> make_failure_penalty(ObjectReader& params) {
  return std::make_unique<FailurePenalty>(params);
}

}  // namespace kforge::reward::internal
