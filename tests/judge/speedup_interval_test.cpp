// The speedup's confidence interval (paired_ratio_interval) and the decision
// stopping rule: injected timing laws with a known ratio, many deterministic
// draws; the interval must cover the ratio at the rate it states, no more and
// no less, whatever the law, the drift and the number of rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "injected_timing.h"
#include "judge/sample_stats.h"
#include "kforge/reward/reward.h"

namespace kforge::judge {
namespace {

using testing::Draws;
using testing::Noise;
using testing::paired_rounds;

TEST(SpeedupInterval, SignTestRanksAreTheExactBinomialOnes) {
  // [x_(k), x_(n+1-k)] covers the median with 1 - 2 P(Bin(n, 1/2) <= k - 1).
  EXPECT_EQ(sign_test_rank(10, 0.95).first, 2u);
  EXPECT_DOUBLE_EQ(sign_test_rank(10, 0.95).second, 1.0 - 2.0 * 11.0 / 1024.0);
  EXPECT_EQ(sign_test_rank(20, 0.95).first, 6u);
  EXPECT_NEAR(sign_test_rank(20, 0.95).second, 1.0 - 2.0 * 21700.0 / 1048576.0, 1e-12);
  EXPECT_EQ(sign_test_rank(6, 0.95).first, 1u);
  EXPECT_DOUBLE_EQ(sign_test_rank(6, 0.95).second, 1.0 - 2.0 / 64.0);
  // Too few rounds for 95 %: [min, max] and its own, lower, coverage.
  EXPECT_EQ(sign_test_rank(5, 0.95).first, 1u);
  EXPECT_DOUBLE_EQ(sign_test_rank(5, 0.95).second, 1.0 - 2.0 / 32.0);
  for (size_t n : {30u, 100u, 1000u, 4999u, 5001u, 20000u}) {
    const auto [k, coverage] = sign_test_rank(n, 0.95);
    EXPECT_GE(coverage, 0.95 - 1e-3) << n;
    EXPECT_LT(coverage, 0.95 + 2.0 / std::sqrt(static_cast<double>(n))) << n;
    // One rank further in would fall short: k is the largest that holds.
    EXPECT_LT(sign_test_rank(n, coverage + 1e-9).first, k + 1) << n;
  }
  // The normal approximation meets the exact sum where they hand over.
  EXPECT_NEAR(sign_test_rank(5000, 0.95).second, sign_test_rank(5001, 0.95).second, 2e-3);
}

// Over many draws of `rounds` rounds from one law, the fraction of intervals
// that contain the true ratio must be the confidence they state, within four
// binomial standard errors either way: narrower intervals (wrong rank, a
// bound on the wrong side, an unpaired estimate) and needlessly wide ones
// both fail.
void expect_coverage(double ratio, Noise kind, size_t rounds, double drift, uint64_t seed) {
  constexpr int kDraws = 2000;
  Draws d(seed);
  int covered = 0;
  double stated = 0;
  for (int i = 0; i < kDraws; ++i) {
    const auto r = paired_rounds(ratio, kind, rounds, d, drift);
    const RatioInterval interval = paired_ratio_interval(r.reference, r.candidate);
    ASSERT_TRUE(interval.valid());
    EXPECT_LE(interval.lo, interval.median);
    EXPECT_LE(interval.median, interval.hi);
    covered += interval.lo <= ratio && ratio <= interval.hi;
    stated += interval.confidence;
  }
  const double rate = static_cast<double>(covered) / kDraws;
  stated /= kDraws;
  const double tolerance = 4.0 * std::sqrt(stated * (1.0 - stated) / kDraws);
  EXPECT_NEAR(rate, stated, tolerance) << "law " << static_cast<int>(kind) << ", " << rounds << " rounds, drift "
                                       << drift << ": covered " << covered << " of " << kDraws;
}

TEST(SpeedupInterval, CoversTheTrueRatioAtItsStatedRate) {
  uint64_t seed = 1;
  for (Noise kind : {Noise::kLogNormal, Noise::kPreempted, Noise::kHeavyTail}) {
    for (size_t rounds : {6u, 10u, 25u, 120u}) {
      for (double ratio : {0.5, 1.0, 1.8}) expect_coverage(ratio, kind, rounds, 0.0, seed++);
    }
  }
}

// Load that comes and goes slows both sides of a round alike; the paired
// ratios cancel it, so the coverage holds under strong drift.
TEST(SpeedupInterval, PairingCancelsDriftCommonToARound) {
  uint64_t seed = 100;
  for (Noise kind : {Noise::kLogNormal, Noise::kPreempted}) expect_coverage(1.3, kind, 20, 0.5, seed++);
}

// A steady reference against a noisy candidate (median 1): the ratio of the
// medians is still covered at the stated rate.
TEST(SpeedupInterval, CoversWhenOnlyOneSideIsNoisy) {
  Draws d(7);
  int covered = 0;
  double stated = 0;
  constexpr int kDraws = 2000;
  for (int i = 0; i < kDraws; ++i) {
    std::vector<double> ref(15, 2.0), cand;
    for (int k = 0; k < 15; ++k) cand.push_back(testing::noise(Noise::kLogNormal, d));
    const RatioInterval interval = paired_ratio_interval(ref, cand);
    covered += interval.lo <= 2.0 && 2.0 <= interval.hi;
    stated += interval.confidence;
  }
  stated /= kDraws;
  EXPECT_NEAR(static_cast<double>(covered) / kDraws, stated, 4.0 * std::sqrt(stated * (1 - stated) / kDraws));
}

TEST(SpeedupInterval, NarrowsWithRoundsAndWithQuieterNoise) {
  Draws d(3);
  auto width = [&](Noise kind, size_t rounds) {
    double sum = 0;
    for (int i = 0; i < 200; ++i) {
      const auto r = paired_rounds(1.5, kind, rounds, d);
      sum += paired_ratio_interval(r.reference, r.candidate).log_half_width();
    }
    return sum / 200;
  };
  EXPECT_LT(width(Noise::kLogNormal, 400), width(Noise::kLogNormal, 25) / 3.0);
  EXPECT_LT(width(Noise::kLogNormal, 50), width(Noise::kHeavyTail, 50) / 2.0);
}

TEST(SpeedupInterval, IsInvalidWithoutUsableRounds) {
  EXPECT_FALSE(paired_ratio_interval({}, {}).valid());
  EXPECT_FALSE(paired_ratio_interval({1.0}, {1.0}).valid());
  // A bound on a candidate time of 0 (faster than the harness resolves) has
  // no finite ratio: no interval rather than an infinite one.
  EXPECT_FALSE(paired_ratio_interval({1, 1, 1, 1, 1, 1}, {0.5, 0.5, 0.5, 0.5, 0.5, 0}).valid());
  // One such round among many only moves the upper tail past the bound.
  std::vector<double> ref(30, 1.0), cand(30, 0.5);
  cand[4] = 0;
  const RatioInterval i = paired_ratio_interval(ref, cand);
  ASSERT_TRUE(i.valid());
  EXPECT_DOUBLE_EQ(i.lo, 2.0);
  EXPECT_DOUBLE_EQ(i.hi, 2.0);
  // Only the rounds both sides have count.
  EXPECT_EQ(paired_ratio_interval({1, 2, 3, 4, 5, 6, 7}, {1, 2, 3}).rounds, 3u);
}

TEST(DecisionRule, StopsOnceNoEdgeIsInsideTheInterval) {
  DecisionTarget tiers{{1.05}, 0.0};
  RatioInterval clear;
  clear.rounds = 10;
  clear.lo = 1.2;
  clear.hi = 1.6;
  RatioInterval straddling = clear;
  straddling.lo = 1.0;
  EXPECT_TRUE(tiers.decided(clear));
  EXPECT_FALSE(tiers.decided(straddling));
  DecisionTarget fine{{}, 0.1};  // half-width ln(1.6/1.2)/2 = 0.144
  EXPECT_FALSE(fine.decided(clear));
  EXPECT_TRUE(DecisionTarget({{}, 0.15}).decided(clear));
  EXPECT_FALSE(DecisionTarget{}.asked());
  EXPECT_FALSE(tiers.decided(RatioInterval{}));  // no interval decides nothing
}

TEST(DecisionRule, ReplacesThePrecisionTargetOnlyWhenAsked) {
  // A clear 2x speedup with 10 % noise: the RSE target of 0.1 % is far off,
  // but the tier (edge 1.05) is decided at the minimum of samples.
  Draws d(11);
  const auto r = paired_rounds(2.0, Noise::kLogNormal, 10, d);
  StoppingRule plain{10, 1000, 0.001, 1e9};
  EXPECT_EQ(plain.check_paired(r.reference, r.candidate, 0), StopReason::kContinue);
  StoppingRule deciding = plain;
  deciding.decision.edges = {1.05};
  EXPECT_EQ(deciding.check_paired(r.reference, r.candidate, 0), StopReason::kDecided);
  EXPECT_EQ(stop_reason_name(StopReason::kDecided), "decided");
  // A close call (true ratio on the edge) samples on to the caps.
  const auto close = paired_rounds(1.05, Noise::kLogNormal, 10, d);
  EXPECT_EQ(deciding.check_paired(close.reference, close.candidate, 0), StopReason::kContinue);
  EXPECT_EQ(deciding.check_paired(close.reference, close.candidate, 1e9), StopReason::kTimeCap);
  // min_samples still holds first.
  const std::vector<double> few_r(r.reference.begin(), r.reference.begin() + 9);
  const std::vector<double> few_c(r.candidate.begin(), r.candidate.begin() + 9);
  EXPECT_EQ(deciding.check_paired(few_r, few_c, 1e9), StopReason::kContinue);
}

// ---- ties judged as ties, end to end ----------------------------------------

// A submit step measured from injected paired rounds, as the environment
// builds it from the judge's timing: the ratio of medians with its interval.
Measurement measured(const testing::PairedRounds& r) {
  Measurement m;
  m.action = "submit";
  m.compiled = true;
  m.outcome = Outcome::kCorrect;
  m.timed = true;
  m.speedup_eager = summarize(r.reference).median / summarize(r.candidate).median;
  const RatioInterval i = paired_ratio_interval(r.reference, r.candidate);
  if (i.valid()) {
    m.speedup_eager_lo = i.lo;
    m.speedup_eager_hi = i.hi;
    m.speedup_confidence = i.confidence;
  }
  return m;
}

// GRPO groups of 8 candidates timed for 20 rounds each (10 % log-normal noise
// per call, as a busy CPU): identical kernels are pooled into one tie class
// (and so get one advantage) in at least 85 % of groups, where the test's
// level alone would allow 95 % (simulated: 91 %; the rest is the noise of each
// interval's width); exact ties never pool them. Kernels 1.5x apart are never
// pooled together.
TEST(SpeedupTies, IdenticalCandidatesAreTiedAndDifferentOnesAreNot) {
  const reward::RewardFunction ties = reward::RewardFunction::from_document(Document::from_yaml_text(
      "name: t\nterms: [{type: log_speedup}]\ngroup_normalization: {mode: mean_std, ties: statistical}\n", "<t>"));
  const reward::RewardFunction exact = reward::RewardFunction::from_document(Document::from_yaml_text(
      "name: t\nterms: [{type: log_speedup}]\ngroup_normalization: {mode: mean_std}\n", "<t>"));
  Draws d(2024);
  constexpr int kGroups = 300;
  int pooled = 0, exact_pooled = 0, mixed = 0;
  for (int g = 0; g < kGroups; ++g) {
    std::vector<reward::GroupMember> same, apart;
    for (int k = 0; k < 8; ++k) {
      const Measurement a = measured(paired_rounds(1.8, Noise::kLogNormal, 20, d));
      same.push_back({ties.compute(a).total, reward::speed_evidence(a)});
      const Measurement b = measured(paired_rounds(k < 4 ? 1.2 : 1.8, Noise::kLogNormal, 20, d));
      apart.push_back({ties.compute(b).total, reward::speed_evidence(b)});
    }
    const std::vector<double> adv = ties.normalize_group(same);
    pooled += std::all_of(adv.begin(), adv.end(), [](double a) { return a == 0.0; });
    std::vector<double> totals;
    for (const auto& m : same) totals.push_back(m.total);
    const std::vector<double> exact_adv = exact.normalize_group(totals);
    exact_pooled += std::all_of(exact_adv.begin(), exact_adv.end(), [](double a) { return a == 0.0; });
    // Pooled totals of the two levels: every fast one above every slow one.
    const std::vector<double> p = ties.pool_ties(apart);
    mixed += *std::min_element(p.begin() + 4, p.end()) <= *std::max_element(p.begin(), p.begin() + 4);
  }
  EXPECT_GE(pooled, kGroups * 85 / 100) << pooled << " of " << kGroups;
  EXPECT_EQ(exact_pooled, 0);
  EXPECT_EQ(mixed, 0);
}

}  // namespace
}  // namespace kforge::judge
