// KernelPro-style log speedup: symmetric in "k times faster" vs "k times
// slower", and clipped so that an implausible outlier (or a lucky timing) is
// worth no more than a solid, believable one.
#include <cmath>
#include <tuple>

#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

class LogSpeedup final : public SpeedTerm {
 public:
  explicit LogSpeedup(ObjectReader& r) {
    scale_ = positive_or(r, "scale", 1.0);
    std::tie(lo_, hi_) = clip_bounds(r, -1.0, 2.0);
    penalty_ = number_or(r, "penalty", -1.5);
    demonstrated_ = demonstrated_estimate(r);
    resolution_ = decision_resolution_or(r);
  }

  json params() const override {
    return {{"scale", scale_},
            {"lo", lo_},
            {"hi", hi_},
            {"penalty", penalty_},
            {"speedup_estimate", estimate_name(demonstrated_)},
            {"decision_resolution", resolution_}};
  }

  // The reward moves by scale per unit of log speedup.
  void add_timing_need(TimingNeed& need) const override {
    need.log_resolution = tighter(need.log_resolution, resolution_ / scale_);
  }

 protected:
  double failure_value() const override { return penalty_; }
  double score(const SpeedFacts& facts, const RewardContext& /*ctx*/) const override {
    // Pivot 1: no speedup pays 0.
    const double s = demonstrated_ ? facts.demonstrated_eager(1.0) : facts.speedup_eager;
    return clip(scale_ * std::log(s), lo_, hi_);
  }

 private:
  double scale_ = 1.0;
  double lo_ = -1.0;
  double hi_ = 2.0;
  double penalty_ = -1.5;
  bool demonstrated_ = false;
  double resolution_ = 0.05;
};

}  // namespace

std::unique_ptr<RewardTerm> make_log_speedup(ObjectReader& params) { return std::make_unique<LogSpeedup>(params); }

}  // namespace kforge::reward::internal
