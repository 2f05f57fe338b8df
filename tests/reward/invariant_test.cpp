// The invariant of docs/rewards.md, checked for every registered term type
// (including any added later) rather than term by term: speed fields can only
// change a term's value on a passed step with usable timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kforge/reward/term.h"
#include "test_util.h"

namespace kforge::reward {
namespace {

using testing::failed;
using testing::from_yaml;
using testing::timed_correct;
using testing::with_violation;

// Every field a speed-based term could be tempted by, set to a prize value.
Measurement with_huge_speed(Measurement m) {
  m.timed = true;
  m.candidate_ms = 1e-6;
  m.eager_ms = 1.0;
  m.compile_ms = 1.0;
  m.speedup_eager = 1e6;
  m.speedup_compile = 1e6;
  m.own_kernel_fraction = 1.0;
  m.energy_j = 0.0;
  return m;
}

Measurement without_speed(Measurement m) {
  m.timed = false;
  m.candidate_ms.reset();
  m.eager_ms.reset();
  m.compile_ms.reset();
  m.speedup_eager.reset();
  m.speedup_compile.reset();
  m.own_kernel_fraction.reset();
  m.energy_j.reset();
  return m;
}

RewardContext generous_context() {
  RewardContext ctx;
  ctx.exemplar_speedups = {0.5};  // an easy exemplar to beat
  return ctx;
}

std::vector<Measurement> steps_without_speed_reward() {
  std::vector<Measurement> out;
  for (Outcome o : {Outcome::kCompileError, Outcome::kRejected, Outcome::kRuntimeError, Outcome::kCrash,
                    Outcome::kTimeout, Outcome::kWrong, Outcome::kViolation, Outcome::kNotRun}) {
    out.push_back(failed(o));
  }
  // Correct outputs, but a hack check fired: the classic reward hack.
  out.push_back(with_violation(timed_correct(1.0), "foreign_stream"));
  out.push_back(with_violation(with_violation(timed_correct(1.0), "constant_output"), "roofline"));
  // A compile-only step.
  Measurement compile_only;
  compile_only.action = "compile";
  compile_only.compiled = true;
  out.push_back(compile_only);
  return out;
}

TEST(RewardInvariantTest, RegistryHasTheBuiltInTerms) {
  const std::vector<std::string> types = TermRegistry::global().types();
  for (const char* t : {"tiered", "log_speedup", "linear_capped", "contrastive", "violation_penalty", "failure_penalty",
                        "turn_cost", "energy", "correctness"}) {
    EXPECT_TRUE(TermRegistry::global().contains(t)) << t;
  }
  EXPECT_TRUE(std::is_sorted(types.begin(), types.end()));
}

TEST(RewardInvariantTest, NoTermPaysForSpeedOnAFailedOrViolatingStep) {
  const RewardContext ctx = generous_context();
  for (const std::string& type : TermRegistry::global().types()) {
    RewardFunction f = from_yaml("name: t\nterms:\n  - {type: " + type + "}\n");
    for (const Measurement& base : steps_without_speed_reward()) {
      const double plain = f.compute(without_speed(base), ctx).total;
      const double tempted = f.compute(with_huge_speed(base), ctx).total;
      EXPECT_EQ(plain, tempted) << type << " on outcome " << outcome_name(base.outcome) << " with "
                                << base.violations.size() << " violations";
    }
  }
}

TEST(RewardInvariantTest, NoTermPaysForSpeedThatWasNotTimedOrIsUnusable) {
  const RewardContext ctx = generous_context();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const std::string& type : TermRegistry::global().types()) {
    RewardFunction f = from_yaml("name: t\nterms:\n  - {type: " + type + "}\n");
    const double plain = f.compute(without_speed(timed_correct(1.0)), ctx).total;

    Measurement untimed = with_huge_speed(timed_correct(1.0));
    untimed.timed = false;
    EXPECT_EQ(f.compute(untimed, ctx).total, plain) << type << " untimed";

    for (double bad : {nan, inf, -inf, 0.0, -7.0}) {
      Measurement m = with_huge_speed(timed_correct(1.0));
      m.speedup_eager = bad;
      EXPECT_EQ(f.compute(m, ctx).total, plain) << type << " speedup_eager=" << bad;
    }
  }
}

TEST(RewardInvariantTest, ValuesAreFiniteForExtremeInputs) {
  RewardContext ctx;
  ctx.exemplar_speedups = {std::numeric_limits<double>::max(), 1e-300};
  for (const std::string& type : TermRegistry::global().types()) {
    RewardFunction f = from_yaml("name: t\nterms:\n  - {type: " + type + "}\n");
    for (double s : {1e-300, 1e300, std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min()}) {
      Measurement m = timed_correct(s, s);
      m.turn = 1000000;
      m.energy_j = 1e300;
      EXPECT_TRUE(std::isfinite(f.compute(m, ctx).total)) << type << " speedup " << s;
    }
  }
}

}  // namespace
}  // namespace kforge::reward
