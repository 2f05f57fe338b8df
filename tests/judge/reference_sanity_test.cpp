// The in-evaluation backstop for tasks whose reference is not finite
// (judge/reference_sanity.h): the task's fault, never the candidate's.
#include "judge/reference_sanity.h"

#include <gtest/gtest.h>

#include <limits>

namespace kforge::judge {
namespace {

ShapeCase case_with_outputs(std::vector<std::string> names) {
  ShapeCase c;
  c.task.id = "tests/log_of_normal";
  for (auto& n : names) c.outputs.push_back({n, {4}, DType::kFloat32});
  return c;
}

TEST(ReferenceSanity, FiniteReferencesPass) {
  ShapeCase c = case_with_outputs({"y", "idx"});
  EXPECT_EQ(non_finite_reference({at::ones({4}), at::zeros({4}, at::kLong)}, c), "");
}

TEST(ReferenceSanity, NamesTheOutputAndCounts) {
  ShapeCase c = case_with_outputs({"y", "z"});
  at::Tensor z = at::ones({4});
  z[1] = std::numeric_limits<float>::quiet_NaN();
  z[2] = std::numeric_limits<float>::infinity();
  z[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(non_finite_reference({at::ones({4}), z}, c), "the reference output z has 2 NaN and 1 infinite values of 4");
  EXPECT_NE(non_finite_reference({at::ones({4}).to(at::kHalf) / 0}, c), "");
}

TEST(ReferenceSanity, TheVerdictIsASystemErrorNamingTheTask) {
  ShapeCase c = case_with_outputs({"y"});
  Verdict v =
      invalid_task_verdict(c, "the reference output y has 4 NaN and 0 infinite values of 4", "(seed 2, base shape)");
  EXPECT_EQ(v.outcome, Outcome::kNotRun);
  EXPECT_EQ(v.summary.rfind("system error: invalid task tests/log_of_normal: the reference output y has 4 NaN", 0), 0u)
      << v.summary;
  EXPECT_NE(v.summary.find("(seed 2, base shape)"), std::string::npos);
  EXPECT_TRUE(v.violations.empty());
}

}  // namespace
}  // namespace kforge::judge
