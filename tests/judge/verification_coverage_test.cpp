// Shape variants against hard-coding (docs/architecture.md#tasks,
// #verification): verification plans one case per shape (the base shape, then
// every variant of the task), and the production settings verify each with at
// least 5 seeds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "judge/case_plan.h"
#include "kforge/env/eval.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

TEST(VerificationCoverage, EveryShapeVariantIsACase) {
  CasePlan plan = plan_cases(testing::elementwise_chain_task(4096, {1000, 8192}), 4096);
  ASSERT_EQ(plan.cases.size(), 3u);
  EXPECT_EQ(plan.cases[0].variant, -1);
  EXPECT_EQ(plan.cases[1].variant, 0);
  EXPECT_EQ(plan.cases[1].outputs[0].shape, std::vector<int64_t>{1000});
  EXPECT_EQ(plan.cases[2].variant, 1);
  EXPECT_EQ(plan.cases[2].outputs[0].shape, std::vector<int64_t>{8192});
}

TEST(VerificationCoverage, ProductionSettingsUseAtLeastFiveSeeds) {
  EXPECT_GE(env::EvalOptions{}.seeds, 5);
  EXPECT_TRUE(env::EvalOptions{}.check_determinism);
  // The shipped environment configs keep it (tests may lower it for speed).
  const std::regex seeds_line(R"(^\s*seeds:\s*(\d+))");
  for (const auto& entry : std::filesystem::directory_iterator(std::string(KFORGE_SOURCE_DIR) + "/configs/env")) {
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_search(line, m, seeds_line)) {
        EXPECT_GE(std::stoi(m[1]), 5) << entry.path();
      }
    }
  }
}

}  // namespace
}  // namespace kforge::judge
