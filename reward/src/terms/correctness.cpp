// A reward for passing verification alone, independent of timing: lets a
// config pay for correct verify steps, or add a correctness bonus to a pure
// speed term such as log_speedup.
#include "kforge/reward/reward.h"
#include "terms/builtin.h"
#include "terms/params.h"

namespace kforge::reward::internal {
namespace {

class Correctness final : public RewardTerm {
 public:
  explicit Correctness(ObjectReader& r) {
    correct_ = number_or(r, "correct", 1.0);
    failed_ = number_or(r, "failed", 0.0);
  }

  double compute(const Measurement& m, const RewardContext& /*ctx*/) const override {
    switch (judge(m)) {
      case Verdict::kPassed:
        return correct_;
      case Verdict::kFailed:
        return failed_;
      case Verdict::kNotJudged:
        break;
    }
    return 0.0;
  }

  json params() const override { return {{"correct", correct_}, {"failed", failed_}}; }

 private:
  double correct_ = 1.0;
  double failed_ = 0.0;
};

}  // namespace

std::unique_ptr<RewardTerm> make_correctness(ObjectReader& params) { return std::make_unique<Correctness>(params); }

}  // namespace kforge::reward::internal
