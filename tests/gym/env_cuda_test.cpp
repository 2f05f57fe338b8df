// The Env on the CUDA backend (label gpu: built with KFORGE_GPU_TESTS, run by
// `ctest --preset gpu` on a machine with an NVIDIA GPU).
#include <gtest/gtest.h>

#include <algorithm>

#include "gym_test_util.h"
#include "kforge/env/env.h"

namespace kforge::env {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

EnvConfig cuda_config() {
  EnvConfig c = testing::fast_config();
  c.backend = BackendKind::kCuda;
  c.default_mode = SolutionMode::kCuda;
  c.prompt.skills.clear();  // the CUDA guide
  return c;
}

TEST(EnvCudaTest, PromptOffersCudaModesAndAnalysisTools) {
  Env env(cuda_config());
  const ResetResult r = env.reset(testing::test_task());
  EXPECT_TRUE(has(r.observation.text, "CUDA C++")) << r.observation.text;
  EXPECT_TRUE(has(r.observation.text, "wgmma")) << "configs/skills/cuda.md";
  std::vector<std::string> tools;
  for (const auto& t : r.observation.data["tools"]) tools.push_back(t["function"]["name"]);
  EXPECT_NE(std::find(tools.begin(), tools.end(), "resource_usage"), tools.end());
}

TEST(EnvCudaTest, CorrectKernelEarnsAPositiveReward) {
  Env env(cuda_config());
  env.reset(testing::test_task());
  Action compile;
  compile.type = ActionType::kCompile;
  compile.solution = load_solution(testing::data_dir() / "correct.cu", SolutionMode::kCuda);
  const StepResult c = env.step(compile);
  EXPECT_EQ(c.info.measurement.compiled, true) << c.observation.text;
  EXPECT_TRUE(has(c.observation.text, "registers")) << c.observation.text;

  const StepResult a = env.step_tool_call({{"name", "resource_usage"}, {"arguments", "{}"}});
  EXPECT_EQ(a.info.action, "analyze");
  EXPECT_FALSE(a.observation.data["analysis"]["result"]["text"].get<std::string>().empty());

  const StepResult s = env.step_tool_call({{"name", "submit"}, {"arguments", "{}"}});
  EXPECT_TRUE(s.terminated);
  EXPECT_EQ(outcome_name(s.info.measurement.outcome), "correct") << s.observation.text;
  EXPECT_GT(s.reward, 0.0);
}

TEST(EnvCudaTest, ADeviceTheJudgeDoesNotSeeFailsAtStart) {
  EnvConfig c = cuda_config();
  c.device = 99;
  std::string msg;
  try {
    Env env(c);
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_TRUE(has(msg, "field /device: CUDA device 99 does not exist; the judge sees ")) << msg;
  EXPECT_TRUE(has(msg, "set device in the config")) << msg;
}

}  // namespace
}  // namespace kforge::env
