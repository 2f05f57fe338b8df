// allclose statistics and per-dtype tolerances of the judge.
#include "judge/output_comparison.h"

#include <gtest/gtest.h>

#include <limits>

#include "judge/tolerance.h"

namespace kforge::judge {
namespace {

TEST(OutputComparison, CountsMismatchesAndFindsTheFirst) {
  at::Tensor expected = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor got = expected.clone();
  got[1][2] = 100;
  got[2][3] = 11.05f;  // within atol + rtol * 11
  ComparisonStats s = compare_output(got, expected, {1e-2, 1e-2});
  EXPECT_EQ(s.numel, 12);
  EXPECT_EQ(s.mismatches, 1);
  EXPECT_FALSE(s.passed());
  ASSERT_TRUE(s.first_mismatch.has_value());
  EXPECT_EQ(s.first_mismatch->index, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(s.first_mismatch->got, 100);
  EXPECT_DOUBLE_EQ(s.first_mismatch->expected, 6);
  EXPECT_DOUBLE_EQ(s.max_abs_err, 94);
  EXPECT_NEAR(s.max_rel_err, 94.0 / 6.0, 1e-9);
  EXPECT_EQ(s.nan_count, 0);
}

TEST(OutputComparison, NanNeverMatches) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor expected = at::ones({4}, at::kFloat);
  at::Tensor poisoned = at::full({4}, nan, at::kFloat);
  ComparisonStats s = compare_output(poisoned, expected, {1e9, 1e9});
  EXPECT_EQ(s.mismatches, 4);
  EXPECT_EQ(s.nan_count, 4);
  // NaN in both is still a mismatch.
  EXPECT_EQ(compare_output(poisoned, poisoned, {1e9, 1e9}).mismatches, 4);
  // Equal infinities agree.
  at::Tensor inf = at::full({2}, std::numeric_limits<double>::infinity(), at::kFloat);
  EXPECT_TRUE(compare_output(inf, inf, {0, 0}).passed());
}

TEST(OutputComparison, IntegersAndBoolsAreExact) {
  at::Tensor a = at::arange(5, at::kLong);
  at::Tensor b = a.clone();
  b[4] = 5;
  EXPECT_EQ(compare_output(b, a, {0, 0}).mismatches, 1);
  at::Tensor t = at::ones({3}, at::kBool);
  at::Tensor poisoned = t.clone();
  poisoned.view(at::kByte).fill_(0xA5);  // a byte the candidate never wrote
  EXPECT_EQ(compare_output(poisoned, t, {0, 0}).mismatches, 3);
  EXPECT_TRUE(compare_output(t.clone(), t, {0, 0}).passed());
}

TEST(OutputComparison, MixedPrecisionAgainstAFloat64Reference) {
  at::Tensor exact = at::full({8}, 1.0 / 3.0, at::kDouble);
  at::Tensor f32 = exact.to(at::kFloat);
  ComparisonStats s = compare_output(f32, exact, {1e-6, 1e-6});
  EXPECT_TRUE(s.passed());
  EXPECT_GT(s.max_abs_err, 0);
  EXPECT_LT(s.max_abs_err, 1e-7);
}

// Every figure at once on the edge cases the comparison must keep apart:
// equal infinities (their difference is NaN, and they agree), an expected 0
// (no relative error), a difference just inside atol + rtol * |expected|, a
// boolean candidate against a floating reference (compared as numbers).
TEST(OutputComparison, EdgeCasesGiveExactFigures) {
  const float inf = std::numeric_limits<float>::infinity();
  at::Tensor expected = at::tensor({1.0F, inf, 0.0F, 2.0F, 2.0F, -inf}, at::kFloat);
  at::Tensor got = at::tensor({1.0F, inf, 0.5F, 2.02F, 3.0F, -inf}, at::kFloat);
  ComparisonStats s = compare_output(got, expected, {1e-2, 1e-2});
  EXPECT_EQ(s.numel, 6);
  EXPECT_EQ(s.mismatches, 2);  // 0.5 against 0, 3 against 2
  ASSERT_TRUE(s.first_mismatch.has_value());
  EXPECT_EQ(s.first_mismatch->index, (std::vector<int64_t>{2}));
  EXPECT_DOUBLE_EQ(s.first_mismatch->got, 0.5);
  EXPECT_DOUBLE_EQ(s.first_mismatch->expected, 0);
  EXPECT_EQ(s.nan_count, 0);
  EXPECT_DOUBLE_EQ(s.max_abs_err, 1.0);
  EXPECT_DOUBLE_EQ(s.max_rel_err, 0.5);

  at::Tensor flags = at::tensor({1.0F, 0.0F, 1.0F}, at::kFloat);
  at::Tensor bools = at::ones({3}, at::kBool);
  ComparisonStats mixed = compare_output(bools, flags, {0, 0});
  EXPECT_EQ(mixed.mismatches, 1);
  EXPECT_DOUBLE_EQ(mixed.max_abs_err, 1.0);
  EXPECT_EQ(mixed.nan_count, 0);

  // The run difference: NaN in both runs and equal infinities agree, a NaN
  // in one run only is the largest difference there is.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor first = at::tensor({1.0, nan, static_cast<double>(inf), 2.0}, at::kDouble);
  at::Tensor second = at::tensor({1.0, nan, static_cast<double>(inf), 5.0}, at::kDouble);
  EXPECT_DOUBLE_EQ(max_abs_difference(first, second), 3.0);
  second[0] = nan;
  EXPECT_EQ(max_abs_difference(first, second), std::numeric_limits<double>::infinity());
  EXPECT_EQ(first[0].item<double>(), 1.0);  // inputs untouched
}

// Against a finite reference the comparison leaves out the equality pass;
// every figure must be the one the general comparison gives, whatever the
// candidate wrote (NaN, infinities, equal values, values on the bound) and
// with tolerances of 0.
TEST(OutputComparison, AFiniteReferenceGivesTheGeneralFigures) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  at::manual_seed(5);
  at::Tensor expected = at::randn({4096});
  expected.index_put_({at::indexing::Slice(0, 64)}, 0.0F);
  at::Tensor got = expected + at::randn({4096}) * 0.01;
  got.index_put_({at::indexing::Slice(100, 200)}, expected.index({at::indexing::Slice(100, 200)}));  // equal
  for (int64_t i : {300, 301, 302}) got[i] = nan;
  got[400] = inf;
  got[401] = -inf;
  got[10] = 0.01F;  // an expected 0 exactly at atol
  for (Tolerance tol : {Tolerance{1e-2, 1e-2}, Tolerance{0, 0}, Tolerance{0.05, 0}, Tolerance{0, 0.05}}) {
    const ComparisonStats general = compare_output(got, expected, tol);
    const ComparisonStats finite = compare_output(got, expected, tol, nullptr, ExpectedValues::kFinite);
    EXPECT_EQ(finite.mismatches, general.mismatches) << tol.atol << " " << tol.rtol;
    EXPECT_GT(finite.mismatches, 0);
    EXPECT_EQ(finite.nan_count, 3);
    EXPECT_EQ(finite.nan_count, general.nan_count);
    EXPECT_TRUE(std::isnan(finite.max_abs_err) && std::isnan(general.max_abs_err));
    EXPECT_EQ(finite.max_rel_err, general.max_rel_err);
    ASSERT_TRUE(finite.first_mismatch && general.first_mismatch);
    EXPECT_EQ(finite.first_mismatch->index, general.first_mismatch->index);
  }
  // Without NaN the largest error is a number, the same on both paths.
  const at::Tensor no_nan = got.nan_to_num(0.0);
  const ComparisonStats general = compare_output(no_nan, expected, {1e-2, 1e-2});
  const ComparisonStats finite = compare_output(no_nan, expected, {1e-2, 1e-2}, nullptr, ExpectedValues::kFinite);
  EXPECT_EQ(finite.max_abs_err, general.max_abs_err);
  EXPECT_EQ(finite.mismatches, general.mismatches);
  // An output equal to the reference passes with tolerances of 0.
  EXPECT_TRUE(compare_output(expected.clone(), expected, {0, 0}, nullptr, ExpectedValues::kFinite).passed());
}

TEST(OutputComparison, RunDifferenceAndBitwiseEquality) {
  at::Tensor a = at::randn({16});
  at::Tensor b = a.clone();
  EXPECT_EQ(max_abs_difference(a, b), 0);
  EXPECT_TRUE(bitwise_equal(a, b));
  b[3] = b[3] + 0.5;
  EXPECT_NEAR(max_abs_difference(a, b), 0.5, 1e-6);
  EXPECT_FALSE(bitwise_equal(a, b));
}

TEST(Tolerance, DefaultsPerDtypeAndTaskOverride) {
  EXPECT_DOUBLE_EQ(default_tolerance(DType::kFloat32).atol, 1e-2);
  EXPECT_DOUBLE_EQ(default_tolerance(DType::kFloat16).rtol, 2e-2);
  EXPECT_DOUBLE_EQ(default_tolerance(DType::kBFloat16).atol, 2e-2);
  EXPECT_DOUBLE_EQ(default_tolerance(DType::kFloat64).atol, 1e-6);
  TaskSpec task;
  EXPECT_DOUBLE_EQ(tolerance_for(task, DType::kInt32).atol, 0);
  task.tolerance = Tolerance{1e-3, 5e-3};
  EXPECT_DOUBLE_EQ(tolerance_for(task, DType::kFloat32).rtol, 5e-3);
  EXPECT_DOUBLE_EQ(tolerance_for(task, DType::kInt64).rtol, 0);  // ints stay exact
}

}  // namespace
}  // namespace kforge::judge
