// Energy per call (NVML), as a cost. Off unless a config lists it: joules per
// call vary by orders of magnitude across tasks, so the scale is task-specific.
#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

class Energy final : public SpeedTerm {
 public:
  explicit Energy(ObjectReader& r) { per_joule_ = penalty_or(r, "per_joule", -1.0); }

  json params() const override { return {{"per_joule", per_joule_}}; }

 protected:
  // Failing is punished by other terms; an energy figure of a failed run means
  // nothing, so it neither costs nor pays.
  double failure_value() const override { return 0.0; }
  double score(const SpeedFacts& facts, const RewardContext& /*ctx*/) const override {
    return facts.energy_j ? per_joule_ * *facts.energy_j : 0.0;
  }

 private:
  double per_joule_ = -1.0;
};

}  // namespace

std::unique_ptr<RewardTerm> make_energy(ObjectReader& params) { return std::make_unique<Energy>(params); }

}  // namespace kforge::reward::internal
