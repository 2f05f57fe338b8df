// Statistics of timing samples and the stopping rule.
#include "judge/sample_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kforge::judge {
namespace {

TEST(SampleStats, OrderStatisticsInterpolate) {
  SampleSummary s = summarize({4, 1, 3, 2});
  EXPECT_EQ(s.samples, 4u);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.p25, 1.75);
  EXPECT_DOUBLE_EQ(s.p75, 3.25);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_NEAR(s.stddev, std::sqrt(5.0 / 3.0), 1e-12);
}

TEST(SampleStats, RseIsRobustToOutliers) {
  std::vector<double> steady(100, 1.0);
  for (size_t i = 0; i < steady.size(); ++i) steady[i] += 0.01 * static_cast<double>(i % 10);
  SampleSummary clean = summarize(steady);
  steady[3] = 50;  // one preempted sample
  steady[7] = 80;
  SampleSummary noisy = summarize(steady);
  EXPECT_GT(noisy.stddev, 10 * clean.stddev);
  EXPECT_NEAR(noisy.rse, clean.rse, clean.rse * 0.5);
  // 1.2533 * (IQR / 1.349) / sqrt(n) / median
  double expected = 1.2533 * ((clean.p75 - clean.p25) / 1.349) / 10.0 / clean.median;
  EXPECT_NEAR(clean.rse, expected, 1e-12);
}

TEST(SampleStats, TooFewSamplesHaveNoPrecision) {
  EXPECT_TRUE(std::isinf(summarize({1, 2, 3}).rse));
  EXPECT_TRUE(std::isinf(summarize({}).rse));
  EXPECT_EQ(summarize({}).samples, 0u);
}

TEST(StoppingRule, RespectsMinimumSamplesFirst) {
  StoppingRule rule{10, 100, 0.01, 1000};
  SampleSummary precise = summarize(std::vector<double>(5, 1.0));
  EXPECT_EQ(rule.check(precise, precise, 1e9), StopReason::kContinue);
}

TEST(StoppingRule, ConvergesWhenBothSidesArePrecise) {
  StoppingRule rule{10, 100, 0.01, 1000};
  SampleSummary flat = summarize(std::vector<double>(20, 1.0));
  std::vector<double> spread;
  for (int i = 0; i < 20; ++i) spread.push_back(1.0 + (i % 2));
  SampleSummary noisy = summarize(spread);
  EXPECT_EQ(rule.check(flat, flat, 0), StopReason::kConverged);
  EXPECT_EQ(rule.check(flat, noisy, 0), StopReason::kContinue);
  EXPECT_EQ(rule.check(noisy, flat, 999), StopReason::kContinue);
  EXPECT_EQ(rule.check(noisy, flat, 1000), StopReason::kTimeCap);
}

TEST(StoppingRule, SampleCapCountsTheSmallerSide) {
  StoppingRule rule{2, 30, 0.0001, 1e9};
  std::vector<double> spread;
  for (int i = 0; i < 40; ++i) spread.push_back(1.0 + (i % 3));
  SampleSummary many = summarize(spread);
  SampleSummary fewer = summarize(std::vector<double>(spread.begin(), spread.begin() + 29));
  EXPECT_EQ(rule.check(many, fewer, 0), StopReason::kContinue);
  EXPECT_EQ(rule.check(many, many, 0), StopReason::kSampleCap);
  EXPECT_EQ(stop_reason_name(StopReason::kSampleCap), "sample_cap");
  EXPECT_EQ(stop_reason_name(StopReason::kConverged), "converged");
}

}  // namespace
}  // namespace kforge::judge
