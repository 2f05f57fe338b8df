// CUDA-L1-style contrastive reward: the prompt showed earlier solutions with
// their speedups, so what counts is beating the best of them, not eager.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

// Without usable exemplars: "eager" compares with the eager reference itself
// (best = 1, i.e. plain log speedup); "zero" pays nothing, as there was
// nothing to contrast with.
const std::vector<std::string>& no_exemplar_modes() {
  static const std::vector<std::string> kModes = {"eager", "zero"};
  return kModes;
}

class Contrastive final : public SpeedTerm {
 public:
  explicit Contrastive(ObjectReader& r) {
    scale_ = positive_or(r, "scale", 1.0);
    std::tie(lo_, hi_) = clip_bounds(r, -1.0, 1.0);
    penalty_ = number_or(r, "penalty", -1.5);
    no_exemplars_ = enum_or(r, "no_exemplars", no_exemplar_modes(), "eager");
    demonstrated_ = demonstrated_estimate(r);
    resolution_ = decision_resolution_or(r);
  }

  json params() const override {
    return {{"scale", scale_},
            {"lo", lo_},
            {"hi", hi_},
            {"penalty", penalty_},
            {"no_exemplars", no_exemplars_},
            {"speedup_estimate", estimate_name(demonstrated_)},
            {"decision_resolution", resolution_}};
  }

  void add_timing_need(TimingNeed& need) const override {
    need.log_resolution = tighter(need.log_resolution, resolution_ / scale_);
  }

 protected:
  double failure_value() const override { return penalty_; }
  double score(const SpeedFacts& facts, const RewardContext& ctx) const override {
    const std::vector<double> exemplars = usable_speedups(ctx.exemplar_speedups);
    double best = 1.0;
    if (exemplars.empty()) {
      if (no_exemplars_ == "zero") return 0.0;
    } else {
      best = *std::max_element(exemplars.begin(), exemplars.end());
    }
    // Pivot: the best exemplar. Demonstrated, a candidate whose interval
    // holds the best exemplar's speedup ties it and earns 0, the same basis
    // on which group normalization pools ties.
    const double s = demonstrated_ ? facts.demonstrated_eager(best) : facts.speedup_eager;
    return clip(scale_ * std::log(s / best), lo_, hi_);
  }

 private:
  double scale_ = 1.0;
  double lo_ = -1.0;
  double hi_ = 1.0;
  double penalty_ = -1.5;
  std::string no_exemplars_;
  bool demonstrated_ = false;
  double resolution_ = 0.05;
};

}  // namespace

std::unique_ptr<RewardTerm> make_contrastive(ObjectReader& params) { return std::make_unique<Contrastive>(params); }

}  // namespace kforge::reward::internal
