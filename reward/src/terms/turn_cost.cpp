// A cost per turn, so that among equally good episodes the shorter one wins
// and a policy does not idle through its turn budget.
#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

// constant: every step costs `cost` (an episode of n steps pays n * cost);
// linear: step t costs (t - free_turns + 1) * cost, so long episodes pay more
//   per step.
const std::vector<std::string>& schedules() {
  static const std::vector<std::string> kSchedules = {"constant", "linear"};
  return kSchedules;
}

class TurnCost final : public RewardTerm {
 public:
  explicit TurnCost(ObjectReader& r) {
    cost_ = nonnegative_or(r, "cost", 0.01);
    schedule_ = enum_or(r, "schedule", schedules(), "constant");
    if (auto f = r.optional("free_turns")) free_turns_ = static_cast<int>(f->as_int_in(0, 1000000));
  }

  double compute(const Measurement& m, const RewardContext& /*ctx*/) const override {
    if (m.turn < free_turns_) return 0.0;
    const double steps = schedule_ == "linear" ? static_cast<double>(m.turn - free_turns_ + 1) : 1.0;
    return -cost_ * steps;
  }

  json params() const override { return {{"cost", cost_}, {"schedule", schedule_}, {"free_turns", free_turns_}}; }

 private:
  double cost_ = 0.01;
  std::string schedule_;
  int free_turns_ = 0;
};

}  // namespace

std::unique_ptr<RewardTerm> make_turn_cost(ObjectReader& params) { return std::make_unique<TurnCost>(params); }

}  // namespace kforge::reward::internal
