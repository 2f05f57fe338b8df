// KernelGYM-style linear reward: half for being correct, half for the speedup
// up to a cap, optionally plus the share of GPU time in the candidate's own
// kernels (rewarding work that is really the candidate's, not a library's).
#include <algorithm>

#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

class LinearCapped final : public SpeedTerm {
 public:
  explicit LinearCapped(ObjectReader& r) {
    correct_weight_ = nonnegative_or(r, "correct_weight", 0.5);
    speed_weight_ = nonnegative_or(r, "speed_weight", 0.5);
    cap_ = positive_or(r, "cap", 3.0);
    own_kernel_weight_ = nonnegative_or(r, "own_kernel_weight", 0.0);
    penalty_ = number_or(r, "penalty", 0.0);
    demonstrated_ = demonstrated_estimate(r);
    resolution_ = decision_resolution_or(r);
  }

  // d(reward) = speed_weight * s * d(ln s), at most speed_weight * cap per
  // unit of log speedup.
  void add_timing_need(TimingNeed& need) const override {
    if (speed_weight_ > 0) need.log_resolution = tighter(need.log_resolution, resolution_ / (speed_weight_ * cap_));
  }

  json params() const override {
    return {{"correct_weight", correct_weight_},
            {"speed_weight", speed_weight_},
            {"cap", cap_},
            {"own_kernel_weight", own_kernel_weight_},
            {"penalty", penalty_},
            {"speedup_estimate", estimate_name(demonstrated_)},
            {"decision_resolution", resolution_}};
  }

 protected:
  double failure_value() const override { return penalty_; }
  double score(const SpeedFacts& facts, const RewardContext& /*ctx*/) const override {
    // Pivot 1: a kernel no faster than eager earns what eager would.
    const double s = demonstrated_ ? facts.demonstrated_eager(1.0) : facts.speedup_eager;
    double value = correct_weight_ + speed_weight_ * std::min(s, cap_);
    // An unknown fraction adds nothing rather than guessing.
    if (facts.own_kernel_fraction) value += own_kernel_weight_ * *facts.own_kernel_fraction;
    return value;
  }

 private:
  double correct_weight_ = 0.5;
  double speed_weight_ = 0.5;
  double cap_ = 3.0;
  double own_kernel_weight_ = 0.0;
  double penalty_ = 0.0;
  bool demonstrated_ = false;
  double resolution_ = 0.05;
};

}  // namespace

std::unique_ptr<RewardTerm> make_linear_capped(ObjectReader& params) { return std::make_unique<LinearCapped>(params); }

}  // namespace kforge::reward::internal
