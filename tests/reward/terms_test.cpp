// Each built-in term on hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kforge/reward/term.h"
#include "test_util.h"

namespace kforge::reward {
namespace {

using testing::failed;
using testing::input_error_of;
using testing::term_value;
using testing::timed_correct;
using testing::with_violation;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<Outcome> kFailures = {Outcome::kCompileError, Outcome::kRejected, Outcome::kRuntimeError,
                                        Outcome::kCrash,        Outcome::kTimeout,  Outcome::kWrong,
                                        Outcome::kViolation};

// ---- judge / speed_facts ----

TEST(RewardJudgeTest, VerdictsFollowOutcomeActionAndViolations) {
  EXPECT_EQ(judge(timed_correct(2.0)), Verdict::kPassed);
  EXPECT_EQ(judge(with_violation(timed_correct(2.0), "foreign_stream")), Verdict::kFailed);
  for (Outcome o : kFailures) EXPECT_EQ(judge(failed(o)), Verdict::kFailed) << outcome_name(o);

  Measurement compile_only;
  compile_only.action = "compile";
  compile_only.compiled = true;
  EXPECT_EQ(judge(compile_only), Verdict::kNotJudged);
  compile_only.action = "analyze";
  EXPECT_EQ(judge(compile_only), Verdict::kNotJudged);
  // A step that was asked to judge and produced no verdict does not get the
  // benefit of the doubt.
  for (const char* action : {"verify", "profile", "submit"}) {
    Measurement m;
    m.action = action;
    m.outcome = Outcome::kNotRun;
    EXPECT_EQ(judge(m), Verdict::kFailed) << action;
  }
  EXPECT_EQ(verdict_name(Verdict::kNotJudged), "not_judged");
}

TEST(RewardJudgeTest, SpeedFactsOnlyForPassedTimedUsableSteps) {
  ASSERT_TRUE(speed_facts(timed_correct(2.0, 1.5)));
  EXPECT_DOUBLE_EQ(speed_facts(timed_correct(2.0, 1.5))->speedup_eager, 2.0);
  EXPECT_FALSE(speed_facts(failed(Outcome::kWrong)));
  EXPECT_FALSE(speed_facts(with_violation(timed_correct(50.0), "input_mutation")));
  Measurement untimed = timed_correct(2.0);
  untimed.timed = false;
  EXPECT_FALSE(speed_facts(untimed));
  for (double bad : {kNan, kInf, -kInf, 0.0, -3.0}) EXPECT_FALSE(speed_facts(timed_correct(bad))) << bad;

  Measurement m = timed_correct(2.0, kNan);
  m.own_kernel_fraction = 1.5;
  m.energy_j = -1.0;
  auto facts = speed_facts(m);
  ASSERT_TRUE(facts);
  EXPECT_FALSE(facts->speedup_compile);
  EXPECT_FALSE(facts->own_kernel_fraction);
  EXPECT_FALSE(facts->energy_j);
  EXPECT_EQ(usable_speedups({1.0, kNan, -1.0, 0.0, kInf, 2.5}), (std::vector<double>{1.0, 2.5}));
}

// ---- tiered ----

TEST(RewardTieredTest, EveryFailureIsMinusOne) {
  for (Outcome o : kFailures) EXPECT_EQ(term_value("{type: tiered}", failed(o)), -1.0) << outcome_name(o);
}

TEST(RewardTieredTest, ExactlyTheMarginIsNotFaster) {
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(1.05, 1.05)), 1.0);
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(1.0500001, 1.05)), 2.0);
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(1.0500001, 1.0500001)), 3.0);
}

TEST(RewardTieredTest, TiersByBaseline) {
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(0.5, 0.4)), 1.0);  // correct, slower
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(1.3, 0.9)), 2.0);  // beats eager only
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(1.3, 1.2)), 3.0);  // beats both
  // Beating torch.compile but not eager is not a tier of its own.
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(1.0, 1.5)), 1.0);
}

TEST(RewardTieredTest, MissingCompileBaselineIsAnOption) {
  // Default: an unmeasured baseline is never beaten.
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(2.0)), 2.0);
  EXPECT_EQ(term_value("{type: tiered, missing_compile: cap_at_tier_2}", timed_correct(2.0)), 2.0);
  EXPECT_EQ(term_value("{type: tiered, missing_compile: judge_on_eager}", timed_correct(2.0)), 3.0);
  EXPECT_EQ(term_value("{type: tiered, missing_compile: judge_on_eager}", timed_correct(1.01)), 1.0);
  // An unusable compile speedup counts as missing.
  EXPECT_EQ(term_value("{type: tiered}", timed_correct(2.0, kNan)), 2.0);
  EXPECT_EQ(term_value("{type: tiered, missing_compile: judge_on_eager}", timed_correct(2.0, -1.0)), 3.0);
  // A known compile baseline is always used, whatever the option.
  EXPECT_EQ(term_value("{type: tiered, missing_compile: judge_on_eager}", timed_correct(2.0, 1.0)), 2.0);
}

TEST(RewardTieredTest, ViolationWithHugeSpeedupGetsFailureValue) {
  EXPECT_EQ(term_value("{type: tiered}", with_violation(timed_correct(1000.0, 1000.0), "foreign_stream")), -1.0);
}

// docs/architecture.md#rewards: a correct kernel gets the correctness tier ("1 otherwise")
// even when its timing could not be used; it is never paid as a fast one.
TEST(RewardTieredTest, UnusableOrMissingTimingOnATimedStepGetsTheCorrectnessTier) {
  for (double bad : {kNan, kInf, -kInf, 0.0, -2.0}) {
    EXPECT_EQ(term_value("{type: tiered}", timed_correct(bad, 2.0)), 1.0) << bad;
  }
  Measurement untimed = timed_correct(3.0, 3.0);
  untimed.timed = false;
  EXPECT_EQ(term_value("{type: tiered}", untimed), 1.0);
  untimed.action = "profile";
  EXPECT_EQ(term_value("{type: tiered, values: {correct: 0.25}}", untimed), 0.25);
  // A verify step never asks for timing: nothing to pay from a speed term.
  untimed.action = "verify";
  EXPECT_EQ(term_value("{type: tiered}", untimed), 0.0);
  Measurement compile_only;
  compile_only.action = "compile";
  compile_only.compiled = true;
  EXPECT_EQ(term_value("{type: tiered}", compile_only), 0.0);
  Measurement submit_not_run;
  submit_not_run.action = "submit";
  EXPECT_EQ(term_value("{type: tiered}", submit_not_run), -1.0);
}

// Other speed terms have no correctness level of their own: an untimed
// correct submit earns them nothing (add a `correctness` term for that).
TEST(RewardTieredTest, OnlyTieredHasAnUntimedCorrectValue) {
  Measurement untimed = timed_correct(3.0, 3.0);
  untimed.timed = false;
  for (const char* term : {"{type: log_speedup}", "{type: linear_capped}", "{type: contrastive}"}) {
    EXPECT_EQ(term_value(term, untimed), 0.0) << term;
  }
}

TEST(RewardTieredTest, MarginAndValuesAreConfigurable) {
  const std::string cfg =
      "{type: tiered, margin: 0.2, values: {failed: -2, correct: 0.5, faster_than_eager: 1, faster_than_both: 4}}";
  EXPECT_EQ(term_value(cfg, timed_correct(1.15, 1.15)), 0.5);
  EXPECT_EQ(term_value(cfg, timed_correct(1.25, 1.1)), 1.0);
  EXPECT_EQ(term_value(cfg, timed_correct(1.25, 1.25)), 4.0);
  EXPECT_EQ(term_value(cfg, failed(Outcome::kCrash)), -2.0);
}

// ---- log_speedup ----

TEST(RewardLogSpeedupTest, ClippedScaledLog) {
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup}", timed_correct(std::exp(1.0))), 1.0);
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup}", timed_correct(2.0)), std::log(2.0));
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup}", timed_correct(1.0)), 0.0);
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup}", timed_correct(0.5)), std::log(0.5));
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup}", timed_correct(100.0)), 2.0);  // hi
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup}", timed_correct(0.01)), -1.0);  // lo
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup, scale: 2, lo: -3, hi: 3}", timed_correct(1.5)), 2 * std::log(1.5));
}

TEST(RewardLogSpeedupTest, FailuresGetPenaltyAndBadTimingGetsNothing) {
  EXPECT_EQ(term_value("{type: log_speedup}", failed(Outcome::kWrong)), -1.5);
  EXPECT_EQ(term_value("{type: log_speedup, penalty: -3}", failed(Outcome::kTimeout)), -3.0);
  EXPECT_EQ(term_value("{type: log_speedup}", with_violation(timed_correct(1e6), "roofline")), -1.5);
  EXPECT_EQ(term_value("{type: log_speedup}", timed_correct(kNan)), 0.0);
  EXPECT_EQ(term_value("{type: log_speedup}", timed_correct(-4.0)), 0.0);
  EXPECT_EQ(term_value("{type: log_speedup}", timed_correct(kInf)), 0.0);
}

TEST(RewardLogSpeedupTest, CrossedClipBoundsAreRejected) {
  std::string err = input_error_of([] { term_value("{type: log_speedup, lo: 1, hi: 0.5}", timed_correct(2.0)); });
  EXPECT_NE(err.find("/terms/0/hi"), std::string::npos) << err;
  EXPECT_NE(err.find("greater than lo"), std::string::npos) << err;
  err = input_error_of([] { term_value("{type: log_speedup, lo: 5}", timed_correct(2.0)); });
  EXPECT_NE(err.find("/terms/0/lo"), std::string::npos) << err;
}

// ---- linear_capped ----

TEST(RewardLinearCappedTest, HalfCorrectHalfCappedSpeedup) {
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped}", timed_correct(2.0)), 1.5);
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped}", timed_correct(0.4)), 0.7);
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped}", timed_correct(3.0)), 2.0);
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped}", timed_correct(50.0)), 2.0);  // cap 3
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped, cap: 10}", timed_correct(50.0)), 5.5);
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped, correct_weight: 1, speed_weight: 0.25}", timed_correct(2.0)), 1.5);
}

TEST(RewardLinearCappedTest, OwnKernelFractionOnlyWhenAskedAndUsable) {
  Measurement m = timed_correct(2.0);
  m.own_kernel_fraction = 0.8;
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped}", m), 1.5);  // weight 0 by default
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped, own_kernel_weight: 0.25}", m), 1.7);
  for (double bad : {1.5, -0.1, kNan}) {
    m.own_kernel_fraction = bad;
    EXPECT_DOUBLE_EQ(term_value("{type: linear_capped, own_kernel_weight: 0.25}", m), 1.5) << bad;
  }
}

TEST(RewardLinearCappedTest, FailuresAndViolationsGetPenalty) {
  Measurement cheat = with_violation(timed_correct(100.0), "decoy_kernel");
  cheat.own_kernel_fraction = 1.0;
  EXPECT_EQ(term_value("{type: linear_capped, own_kernel_weight: 1}", cheat), 0.0);
  EXPECT_EQ(term_value("{type: linear_capped, penalty: -0.5}", cheat), -0.5);
  EXPECT_EQ(term_value("{type: linear_capped}", failed(Outcome::kCompileError)), 0.0);
}

// ---- contrastive ----

TEST(RewardContrastiveTest, ImprovementOverBestExemplar) {
  RewardContext ctx;
  ctx.exemplar_speedups = {1.2, 2.0, 0.7};
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(4.0), ctx), std::log(2.0));
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(2.0), ctx), 0.0);
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(1.5), ctx), std::log(0.75));
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(100.0), ctx), 1.0);  // hi
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(0.1), ctx), -1.0);   // lo
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive, scale: 0.5}", timed_correct(4.0), ctx), 0.5 * std::log(2.0));
}

TEST(RewardContrastiveTest, UnusableExemplarsAreIgnored) {
  RewardContext ctx;
  ctx.exemplar_speedups = {kInf, 1.6, kNan, -5.0, 0.0};
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(3.2), ctx), std::log(2.0));
}

TEST(RewardContrastiveTest, NoExemplarsComparesWithEagerOrPaysNothing) {
  RewardContext none;
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(2.0), none), std::log(2.0));
  EXPECT_EQ(term_value("{type: contrastive, no_exemplars: zero}", timed_correct(2.0), none), 0.0);
  RewardContext only_bad;
  only_bad.exemplar_speedups = {kNan, -1.0};
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", timed_correct(2.0), only_bad), std::log(2.0));
  EXPECT_EQ(term_value("{type: contrastive, no_exemplars: zero}", timed_correct(2.0), only_bad), 0.0);
}

TEST(RewardContrastiveTest, FailuresGetPenalty) {
  RewardContext ctx;
  ctx.exemplar_speedups = {1.0};
  EXPECT_EQ(term_value("{type: contrastive}", failed(Outcome::kWrong), ctx), -1.5);
  EXPECT_EQ(term_value("{type: contrastive}", with_violation(timed_correct(9.0), "stale_memory"), ctx), -1.5);
  EXPECT_EQ(term_value("{type: contrastive}", timed_correct(kNan), ctx), 0.0);
}

// ---- violation_penalty ----

TEST(RewardViolationPenaltyTest, OnePenaltyPerDistinctCheckByDefault) {
  Measurement m = with_violation(with_violation(timed_correct(5.0), "foreign_stream"), "input_mutation");
  EXPECT_EQ(term_value("{type: violation_penalty}", m), -2.0);
  m = with_violation(with_violation(timed_correct(5.0), "foreign_stream"), "foreign_stream");
  EXPECT_EQ(term_value("{type: violation_penalty}", m), -1.0);
  EXPECT_EQ(term_value("{type: violation_penalty, count: every_violation}", m), -2.0);
  EXPECT_EQ(term_value("{type: violation_penalty}", timed_correct(5.0)), 0.0);
  EXPECT_EQ(term_value("{type: violation_penalty}", failed(Outcome::kWrong)), 0.0);
}

TEST(RewardViolationPenaltyTest, PerCheckPenaltiesAndUnnamedViolation) {
  Measurement m = with_violation(with_violation(timed_correct(5.0), "network_escape"), "foreign_stream");
  EXPECT_EQ(term_value("{type: violation_penalty, penalty: -0.5, per_check: {network_escape: -5}}", m), -5.5);
  // The outcome alone counts as one violation.
  EXPECT_EQ(term_value("{type: violation_penalty, penalty: -0.75}", failed(Outcome::kViolation)), -0.75);
}

TEST(RewardViolationPenaltyTest, PositivePenaltyIsRejected) {
  std::string err = input_error_of([] { term_value("{type: violation_penalty, penalty: 1}", timed_correct(1.0)); });
  EXPECT_NE(err.find("/terms/0/penalty"), std::string::npos) << err;
  EXPECT_NE(err.find("<= 0"), std::string::npos) << err;
  err = input_error_of([] { term_value("{type: violation_penalty, per_check: {x: 2}}", timed_correct(1.0)); });
  EXPECT_NE(err.find("/terms/0/per_check/x"), std::string::npos) << err;
}

// ---- failure_penalty ----

TEST(RewardFailurePenaltyTest, DefaultsOrderFailureKinds) {
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kCompileError)), -1.0);
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kRejected)), -1.0);
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kRuntimeError)), -0.75);
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kCrash)), -0.75);
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kTimeout)), -0.75);
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kWrong)), -0.5);
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kViolation)), 0.0);
  EXPECT_EQ(term_value("{type: failure_penalty}", failed(Outcome::kNotRun)), -1.0);  // a submit
  EXPECT_EQ(term_value("{type: failure_penalty}", timed_correct(2.0)), 0.0);
  Measurement compile_only;
  compile_only.action = "compile";
  EXPECT_EQ(term_value("{type: failure_penalty}", compile_only), 0.0);
}

TEST(RewardFailurePenaltyTest, ValuesAreConfigurable) {
  const std::string cfg = "{type: failure_penalty, compile_error: -0.2, crash: -2, timeout: 0}";
  EXPECT_EQ(term_value(cfg, failed(Outcome::kCompileError)), -0.2);
  EXPECT_EQ(term_value(cfg, failed(Outcome::kCrash)), -2.0);
  EXPECT_EQ(term_value(cfg, failed(Outcome::kTimeout)), 0.0);
  EXPECT_EQ(term_value(cfg, failed(Outcome::kWrong)), -0.5);
  std::string err = input_error_of([] { term_value("{type: failure_penalty, craash: -1}", timed_correct(1.0)); });
  EXPECT_NE(err.find("did you mean \"crash\""), std::string::npos) << err;
}

// ---- turn_cost ----

TEST(RewardTurnCostTest, ConstantLinearAndFreeTurns) {
  Measurement m = timed_correct(1.0);
  m.turn = 5;
  EXPECT_DOUBLE_EQ(term_value("{type: turn_cost}", m), -0.01);
  EXPECT_DOUBLE_EQ(term_value("{type: turn_cost, cost: 0.1, schedule: linear}", m), -0.6);
  EXPECT_DOUBLE_EQ(term_value("{type: turn_cost, cost: 0.1, schedule: linear, free_turns: 4}", m), -0.2);
  m.turn = 1;
  EXPECT_EQ(term_value("{type: turn_cost, free_turns: 2}", m), 0.0);
  m.turn = 2;
  EXPECT_DOUBLE_EQ(term_value("{type: turn_cost, free_turns: 2}", m), -0.01);
  // Charged whatever the step's outcome.
  Measurement f = failed(Outcome::kCrash);
  f.turn = 0;
  EXPECT_DOUBLE_EQ(term_value("{type: turn_cost, cost: 0.5}", f), -0.5);
}

// ---- energy ----

TEST(RewardEnergyTest, CostPerJouleOnlyForPassedTimedSteps) {
  Measurement m = timed_correct(1.5);
  m.energy_j = 0.5;
  EXPECT_DOUBLE_EQ(term_value("{type: energy, per_joule: -0.2}", m), -0.1);
  EXPECT_DOUBLE_EQ(term_value("{type: energy}", m), -0.5);
  Measurement cheat = with_violation(m, "foreign_stream");
  EXPECT_EQ(term_value("{type: energy}", cheat), 0.0);
  m.energy_j = kNan;
  EXPECT_EQ(term_value("{type: energy}", m), 0.0);
  m.energy_j.reset();
  EXPECT_EQ(term_value("{type: energy}", m), 0.0);
  std::string err = input_error_of([] { term_value("{type: energy, per_joule: 0.5}", timed_correct(1.0)); });
  EXPECT_NE(err.find("<= 0"), std::string::npos) << err;
}

// ---- correctness ----

TEST(RewardCorrectnessTest, PaysForPassingWithOrWithoutTiming) {
  Measurement verified = timed_correct(1.0);
  verified.timed = false;
  verified.speedup_eager.reset();
  EXPECT_EQ(term_value("{type: correctness}", verified), 1.0);
  EXPECT_EQ(term_value("{type: correctness, correct: 2, failed: -1}", failed(Outcome::kWrong)), -1.0);
  EXPECT_EQ(term_value("{type: correctness, failed: -1}", with_violation(verified, "x")), -1.0);
  Measurement compile_only;
  compile_only.action = "compile";
  EXPECT_EQ(term_value("{type: correctness, failed: -1}", compile_only), 0.0);
}

}  // namespace
}  // namespace kforge::reward
