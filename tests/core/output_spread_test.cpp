// The near-constant statistic shared by the judge, task validation and the
// synthesis filters.
#include "kforge/core/output_spread.h"

#include <gtest/gtest.h>

#include <limits>

namespace kforge::ref {
namespace {

TEST(OutputSpreadTest, VaryingOutputIsNotNearConstant) {
  const at::Tensor t = at::arange(0, 1000, at::kFloat);
  const OutputSpread s = measure_spread(t);
  EXPECT_EQ(s.numel, 1000);
  EXPECT_TRUE(s.all_finite());
  EXPECT_NEAR(s.std, 288.67, 0.01);
  EXPECT_FALSE(is_near_constant(s, DType::kFloat32));
}

TEST(OutputSpreadTest, ConstantAndRoundingNoiseAreNearConstant) {
  EXPECT_TRUE(is_near_constant(measure_spread(at::full({64, 64}, 3.0, at::kFloat)), DType::kFloat32));
  // A spread of a few ulps around 1.0 is rounding noise in float32...
  at::Tensor noisy = at::ones({4096}, at::kFloat) + at::randn({4096}, at::kFloat) * 1e-7;
  EXPECT_TRUE(is_near_constant(measure_spread(noisy), DType::kFloat32));
  // ...but information in float64.
  EXPECT_FALSE(is_near_constant(measure_spread(noisy.to(at::kDouble)), DType::kFloat64));
}

TEST(OutputSpreadTest, NonFiniteElementsAreCountedAndLeftOut) {
  at::Tensor t = at::arange(0, 10, at::kFloat);
  t[3] = std::numeric_limits<float>::quiet_NaN();
  t[7] = std::numeric_limits<float>::infinity();
  const OutputSpread s = measure_spread(t);
  EXPECT_EQ(s.finite, 8);
  EXPECT_FALSE(s.all_finite());
  EXPECT_FALSE(is_near_constant(s, DType::kFloat32));
  const at::Tensor all_nan = at::full({16}, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(measure_spread(all_nan).finite, 0);
  EXPECT_TRUE(is_near_constant(measure_spread(all_nan), DType::kFloat32));
}

}  // namespace
}  // namespace kforge::ref
