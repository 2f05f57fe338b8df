// CUDA Agent's tiered reward: a few coarse levels, so timing noise only matters
// right at a tier boundary and an outlier speedup cannot dominate a batch.
#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

// What tier 3 means when the task has no torch.compile baseline.
const std::vector<std::string>& missing_compile_modes() {
  // cap_at_tier_2: an unmeasured baseline is not beaten (never pay for a claim
  //   nobody checked);
  // judge_on_eager: beating eager stands in for beating both.
  static const std::vector<std::string> kModes = {"cap_at_tier_2", "judge_on_eager"};
  return kModes;
}

class Tiered final : public SpeedTerm {
 public:
  explicit Tiered(ObjectReader& r) {
    margin_ = nonnegative_or(r, "margin", 0.05);
    if (auto v = r.optional("values")) {
      ObjectReader vr = v->as_object();
      failed_ = number_or(vr, "failed", failed_);
      correct_ = number_or(vr, "correct", correct_);
      faster_than_eager_ = number_or(vr, "faster_than_eager", faster_than_eager_);
      faster_than_both_ = number_or(vr, "faster_than_both", faster_than_both_);
      vr.finish();
    }
    missing_compile_ = enum_or(r, "missing_compile", missing_compile_modes(), "cap_at_tier_2");
    demonstrated_ = demonstrated_estimate(r);
  }

  // The tiers step where a speedup passes 1 + margin.
  void add_timing_need(TimingNeed& need) const override {
    need.eager_edges.push_back(1.0 + margin_);
    need.compile_edges.push_back(1.0 + margin_);
  }

  json params() const override {
    return {{"margin", margin_},
            {"values",
             {{"failed", failed_},
              {"correct", correct_},
              {"faster_than_eager", faster_than_eager_},
              {"faster_than_both", faster_than_both_}}},
            {"missing_compile", missing_compile_},
            {"speedup_estimate", estimate_name(demonstrated_)}};
  }

 protected:
  double failure_value() const override { return failed_; }
  // docs/architecture.md#rewards: "1 otherwise". A correct kernel whose timing could not be
  // used is correct and not shown to be faster: the correctness tier.
  double untimed_pass_value() const override { return correct_; }

  double score(const SpeedFacts& facts, const RewardContext& /*ctx*/) const override {
    // Strictly greater: exactly 1 + margin is "not faster".
    // Demonstrated: the interval's point nearest the threshold, so "faster"
    // means the whole interval (and the point) is above it.
    const double threshold = 1.0 + margin_;
    const double s = demonstrated_ ? facts.demonstrated_eager(threshold) : facts.speedup_eager;
    if (!(s > threshold)) return correct_;
    const std::optional<double> c = demonstrated_ ? facts.demonstrated_compile(threshold) : facts.speedup_compile;
    const bool beats_compile = c ? *c > threshold : missing_compile_ == "judge_on_eager";
    return beats_compile ? faster_than_both_ : faster_than_eager_;
  }

 private:
  double margin_ = 0.05;
  double failed_ = -1.0;
  double correct_ = 1.0;
  double faster_than_eager_ = 2.0;
  double faster_than_both_ = 3.0;
  std::string missing_compile_;
  bool demonstrated_ = false;
};

}  // namespace

std::unique_ptr<RewardTerm> make_tiered(ObjectReader& params) { return std::make_unique<Tiered>(params); }

}  // namespace kforge::reward::internal
