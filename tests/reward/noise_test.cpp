// Rewards that know their own noise: the demonstrated speedup estimate of
// every speed term, statistical ties in group normalization, what a reward
// needs of the timing, and that configs without the new options reward
// exactly as before whatever interval a measurement carries.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "kforge/reward/reward.h"
#include "test_util.h"

namespace kforge::reward {
namespace {

using testing::failed;
using testing::from_yaml;
using testing::input_error_of;
using testing::term_value;
using testing::timed_correct;

Measurement with_interval(double s, double lo, double hi, std::optional<double> compile = std::nullopt) {
  Measurement m = timed_correct(s, compile);
  m.speedup_eager_lo = lo;
  m.speedup_eager_hi = hi;
  m.speedup_confidence = 0.96;
  return m;
}

// ---- existing configs: exactly today's reward ----

// Every preset as shipped before the noise options, and every speed term at
// its defaults, pays the same for a measurement with an interval as for the
// same measurement without one: the interval is ignored unless asked for.
TEST(NoiseAwareRewardTest, ExistingConfigsIgnoreTheInterval) {
  RewardContext ctx;
  ctx.exemplar_speedups = {1.3};
  for (const char* preset : {"default", "tiered", "log_speedup", "linear_capped", "contrastive"}) {
    const RewardFunction f = RewardFunction::load(preset);
    for (double s : {0.3, 0.97, 1.03, 1.06, 1.3, 2.0, 9.0}) {
      for (double width : {0.01, 0.2, 0.8}) {
        const Measurement plain = timed_correct(s, s * 0.8);
        const Measurement noisy = with_interval(s, s * (1 - width), s * (1 + width), s * 0.8);
        EXPECT_EQ(f.compute(noisy, ctx).to_json(), f.compute(plain, ctx).to_json()) << preset << " " << s;
      }
    }
    // Group normalization with speed evidence is today's on totals.
    const std::vector<double> totals = {1.0, 2.0, 2.0, 3.5};
    std::vector<GroupMember> members;
    for (double t : totals) members.push_back({t, SpeedEvidence{0.1, 0.0, 0.2}});
    EXPECT_EQ(f.normalize_group(members), f.normalize_group(totals)) << preset;
  }
  // The values of today's formulas, pinned.
  EXPECT_DOUBLE_EQ(term_value("{type: log_speedup}", with_interval(1.5, 1.2, 1.8)), std::log(1.5));
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped}", with_interval(1.5, 1.2, 1.8)), 0.5 + 0.75);
  EXPECT_EQ(term_value("{type: tiered}", with_interval(1.08, 0.9, 1.3)), 2.0);
  EXPECT_DOUBLE_EQ(term_value("{type: contrastive}", with_interval(1.5, 1.2, 1.8)), std::log(1.5));
}

// ---- the demonstrated estimate ----

TEST(NoiseAwareRewardTest, LogSpeedupPaysWhatTheIntervalDemonstrates) {
  const std::string term = "{type: log_speedup, speedup_estimate: demonstrated}";
  // Interval holds 1x: no speedup shown, nothing paid (a "lazy" edit).
  EXPECT_EQ(term_value(term, with_interval(1.04, 0.97, 1.11)), 0.0);
  // Clearly faster: the lower bound; clearly slower: the upper bound.
  EXPECT_DOUBLE_EQ(term_value(term, with_interval(1.5, 1.4, 1.6)), std::log(1.4));
  EXPECT_DOUBLE_EQ(term_value(term, with_interval(0.8, 0.7, 0.9)), std::log(0.9));
  // Never more than the point estimate: an interval above its point (it is
  // about the per-round ratios) is widened to hold it.
  EXPECT_DOUBLE_EQ(term_value(term, with_interval(1.10, 1.12, 1.3)), std::log(1.10));
  // No interval: the point.
  EXPECT_DOUBLE_EQ(term_value(term, timed_correct(1.5)), std::log(1.5));
  // The gate still applies.
  EXPECT_EQ(term_value(term, failed(Outcome::kWrong)), -1.5);
}

TEST(NoiseAwareRewardTest, LinearCappedAndContrastiveUseTheirPivots) {
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped, speedup_estimate: demonstrated}", with_interval(2.0, 1.8, 2.2)),
                   0.5 + 0.5 * 1.8);
  EXPECT_DOUBLE_EQ(term_value("{type: linear_capped, speedup_estimate: demonstrated}", with_interval(1.02, 0.9, 1.1)),
                   1.0);
  RewardContext ctx;
  ctx.exemplar_speedups = {1.5};
  const std::string c = "{type: contrastive, speedup_estimate: demonstrated}";
  // Indistinguishable from the best exemplar: a tie, 0.
  EXPECT_EQ(term_value(c, with_interval(1.6, 1.45, 1.75), ctx), 0.0);
  EXPECT_DOUBLE_EQ(term_value(c, with_interval(2.0, 1.8, 2.2), ctx), std::log(1.8 / 1.5));
  EXPECT_DOUBLE_EQ(term_value(c, with_interval(1.0, 0.9, 1.1), ctx), std::log(1.1 / 1.5));
}

TEST(NoiseAwareRewardTest, TieredCountsOnlyADemonstratedMargin) {
  const std::string t = "{type: tiered, speedup_estimate: demonstrated}";
  // 8 % faster by the point, but the interval reaches below 1.05: tier 1.
  EXPECT_EQ(term_value(t, with_interval(1.08, 1.02, 1.15)), 1.0);
  EXPECT_EQ(term_value(t, with_interval(1.2, 1.1, 1.3)), 2.0);
  // The compile speedup's interval is the eager one scaled (x 0.55 here):
  // [0.99, 1.21] holds 1.05, so torch.compile is not shown beaten.
  EXPECT_EQ(term_value(t, with_interval(2.0, 1.8, 2.2, 1.1)), 2.0);
  EXPECT_EQ(term_value("{type: tiered}", with_interval(2.0, 1.8, 2.2, 1.1)), 3.0);
  EXPECT_EQ(term_value(t, with_interval(2.0, 1.95, 2.05, 1.1)), 3.0);  // [1.07, 1.13]
}

TEST(NoiseAwareRewardTest, EstimateIsValidatedAndDescribed) {
  const std::string err =
      input_error_of([] { from_yaml("name: x\nterms:\n  - {type: log_speedup, speedup_estimate: lower}\n"); });
  EXPECT_NE(err.find("speedup_estimate"), std::string::npos) << err;
  const json d = from_yaml("name: x\nterms:\n  - {type: tiered, speedup_estimate: demonstrated}\n").describe();
  EXPECT_EQ(d.at("terms").at(0).at("speedup_estimate"), "demonstrated");
  EXPECT_EQ(from_yaml("name: x\nterms:\n  - {type: log_speedup}\n").describe().at("terms").at(0).at("speedup_estimate"),
            "point");
  EXPECT_EQ(from_yaml("name: x\nterms: [{type: tiered}]\n").describe().at("group_normalization").at("ties"), "exact");
}

// ---- ties ----

TEST(NoiseAwareRewardTest, TiesAreDifferencesWithinTheCombinedHalfWidths) {
  const SpeedEvidence a{std::log(1.50), std::log(1.40), std::log(1.60)};
  const SpeedEvidence b{std::log(1.55), std::log(1.45), std::log(1.66)};
  const SpeedEvidence far{std::log(2.20), std::log(2.10), std::log(2.30)};
  EXPECT_TRUE(statistically_tied(a, b));
  EXPECT_TRUE(statistically_tied(b, a));
  EXPECT_FALSE(statistically_tied(a, far));
  // Overlapping intervals are not enough: standard errors 0.034 and 0.032
  // (half-widths over 1.96) give 1.96 * 0.047 = 0.092 < ln(1.66 / 1.50).
  const SpeedEvidence near{std::log(1.66), std::log(1.56), std::log(1.77)};
  EXPECT_FALSE(statistically_tied(a, near));
}

std::vector<GroupMember> group(const std::vector<std::pair<double, double>>& speedup_and_half_width) {
  std::vector<GroupMember> out;
  for (const auto& [s, h] : speedup_and_half_width) {
    GroupMember m;
    m.total = std::log(s);
    m.speed = SpeedEvidence{std::log(s), std::log(s) - h, std::log(s) + h};
    out.push_back(m);
  }
  return out;
}

// Cochran's Q against chi-square: two members reduce to the z test; a set
// is tied or not as a whole.
TEST(NoiseAwareRewardTest, TheTieTestIsHomogeneityOfTheWholeSet) {
  auto at = [](double s, double se) {
    return SpeedEvidence{std::log(s), std::log(s) - 1.96 * se, std::log(s) + 1.96 * se, 0.95};
  };
  EXPECT_NEAR(at(1.0, 0.1).standard_error(), 0.1, 1e-4);
  // Two: |diff| <= 1.96 * sqrt(2) * 0.1 = 0.277.
  EXPECT_TRUE(statistically_tied(at(1.0, 0.1), at(std::exp(0.27), 0.1)));
  EXPECT_FALSE(statistically_tied(at(1.0, 0.1), at(std::exp(0.285), 0.1)));
  // The coverage sets the standard error: the same width at 99 % is a
  // smaller one.
  SpeedEvidence wide99 = at(std::exp(0.27), 0.1);
  wide99.confidence = 0.99;
  EXPECT_FALSE(statistically_tied(at(1.0, 0.1), wide99));
  // Three at -0.2, 0, 0.2 (se 0.1): Q = 8 > 5.99 (chi-square, 2 dof), though
  // each neighbouring pair alone is tied (Q = 2 <= 3.84).
  EXPECT_TRUE(statistically_tied(at(std::exp(-0.2), 0.1), at(1.0, 0.1)));
  EXPECT_FALSE(statistically_tied({at(std::exp(-0.2), 0.1), at(1.0, 0.1), at(std::exp(0.2), 0.1)}));
  EXPECT_TRUE(statistically_tied({at(std::exp(-0.1), 0.1), at(1.0, 0.1), at(std::exp(0.1), 0.1)}));  // Q = 2
}

TEST(NoiseAwareRewardTest, StatisticalTiesShareOneRewardAndOneAdvantage) {
  const RewardFunction f =
      from_yaml("name: g\nterms: [{type: log_speedup}]\ngroup_normalization: {mode: mean_std, ties: statistical}\n");
  // Identical kernels, timed with noise: one class, no advantage at all
  // (exact ties would have turned the noise into advantages of +-1).
  const auto same = group({{1.80, 0.08}, {1.92, 0.08}, {1.71, 0.09}, {1.85, 0.07}});
  for (double a : f.normalize_group(same)) EXPECT_EQ(a, 0.0);  // exactly, not 1e-11
  const RewardFunction exact =
      from_yaml("name: g\nterms: [{type: log_speedup}]\ngroup_normalization: {mode: mean_std}\n");
  EXPECT_GT(std::abs(exact.normalize_group(same)[1]), 0.9);

  // Two clear levels: within each the same advantage, between them the order.
  const auto two = group({{1.0, 0.05}, {2.0, 0.05}, {1.03, 0.05}, {1.95, 0.05}, {2.04, 0.06}});
  const std::vector<double> pooled = f.pool_ties(two);
  EXPECT_DOUBLE_EQ(pooled[0], pooled[2]);
  EXPECT_DOUBLE_EQ(pooled[1], pooled[3]);
  EXPECT_DOUBLE_EQ(pooled[1], pooled[4]);
  EXPECT_DOUBLE_EQ(pooled[0], (std::log(1.0) + std::log(1.03)) / 2);
  const std::vector<double> adv = f.normalize_group(two);
  EXPECT_LT(adv[0], 0.0);
  EXPECT_GT(adv[1], 0.0);
  EXPECT_EQ(adv[0], adv[2]);

  // A chain of small steps does not pool a clear difference: each step is
  // within the noise of the one before, but 1.0 and 1.4 are not.
  const auto chain = group({{1.0, 0.06}, {1.08, 0.06}, {1.16, 0.06}, {1.25, 0.06}, {1.35, 0.06}, {1.45, 0.06}});
  const std::vector<double> c = f.pool_ties(chain);
  EXPECT_GT(c[5], c[0]);

  // Members without evidence (failed, untimed) keep their totals.
  auto mixed = same;
  mixed.push_back({-1.5, std::nullopt});
  const std::vector<double> m = f.pool_ties(mixed);
  EXPECT_EQ(m.back(), -1.5);
  EXPECT_DOUBLE_EQ(m[0], m[1]);
}

TEST(NoiseAwareRewardTest, SpeedEvidenceNeedsAPassedTimedStepWithAnInterval) {
  EXPECT_TRUE(speed_evidence(with_interval(1.5, 1.4, 1.6)).has_value());
  EXPECT_DOUBLE_EQ(speed_evidence(with_interval(1.5, 1.4, 1.6))->log_lo, std::log(1.4));
  EXPECT_FALSE(speed_evidence(timed_correct(1.5)).has_value());
  EXPECT_FALSE(speed_evidence(failed(Outcome::kWrong)).has_value());
  Measurement crossed = with_interval(1.5, 1.6, 1.4);
  EXPECT_FALSE(speed_evidence(crossed).has_value());
}

// ---- what the reward needs of the timing ----

TEST(NoiseAwareRewardTest, TimingNeedComesFromTheTerms) {
  const TimingNeed tiered =
      from_yaml("name: x\nterms: [{type: tiered, margin: 0.1}, {type: turn_cost}]\n").timing_need();
  EXPECT_EQ(tiered.eager_edges, std::vector<double>{1.1});
  EXPECT_EQ(tiered.compile_edges, std::vector<double>{1.1});
  EXPECT_EQ(tiered.log_resolution, 0.0);
  const TimingNeed mixed = from_yaml(
                               "name: x\nterms: [{type: log_speedup, scale: 2, decision_resolution: 0.1}, "
                               "{type: linear_capped, decision_resolution: 0.3}]\n")
                               .timing_need();
  EXPECT_TRUE(mixed.eager_edges.empty());
  // log_speedup: 0.1 / 2; linear_capped: 0.3 / (0.5 * 3) = 0.2.
  EXPECT_DOUBLE_EQ(mixed.log_resolution, 0.05);
  // A term of weight 0 pays nothing and needs nothing.
  EXPECT_TRUE(from_yaml("name: x\nterms: [{type: tiered, weight: 0}]\n").timing_need().eager_edges.empty());
}

}  // namespace
}  // namespace kforge::reward
