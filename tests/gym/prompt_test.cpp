#include "kforge/env/prompt.h"

#include <gtest/gtest.h>

#include "gym_test_util.h"
#include "kforge/core/kernelbench_render.h"

namespace kforge::env {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class PromptTest : public ::testing::Test {
 protected:
  PromptTest() : tools_({SolutionMode::kCpp}, SolutionMode::kCpp) {
    task_ = testing::test_task();
    config_ = testing::fast_config();
    in_.task = &task_;
    in_.config = &config_;
    in_.tools = &tools_;
    in_.abi_header = read_text_file(std::filesystem::path(KFORGE_SOURCE_DIR) / "core/include/kforge/kernel_abi.h");
    in_.skills = "### A guide\nFuse everything.\n";
  }

  TaskSpec task_;
  EnvConfig config_;
  Toolset tools_;
  PromptInputs in_;
};

TEST_F(PromptTest, UserMessageHasEveryPart) {
  const Prompt p = build_prompt(in_);
  EXPECT_TRUE(has(p.user, render_kernelbench(task_))) << "the KernelBench rendering, verbatim";
  EXPECT_TRUE(has(p.user, in_.abi_header)) << "kernel_abi.h, verbatim";
  EXPECT_TRUE(has(p.user, "| inputs[0] | x | input | [64, 32] | float32 (KF_FLOAT32) | float |")) << p.user;
  EXPECT_TRUE(has(p.user, "| inputs[1] | w | param | [32] |")) << p.user;
  EXPECT_TRUE(has(p.user, "| outputs[0] | y | output | [64, 32] |")) << p.user;
  EXPECT_TRUE(has(p.user, "variant 0: x [17, 32] -> y [17, 32]")) << p.user;
  EXPECT_TRUE(has(p.user, "atol 1e-05")) << p.user;
  for (const auto& name : tools_.names()) EXPECT_TRUE(has(p.user, "`" + name + "`")) << name;
  EXPECT_TRUE(has(p.user, "You have 4 turns")) << p.user;
  EXPECT_TRUE(has(p.user, "Fuse everything.")) << "the skills guide";
  EXPECT_TRUE(has(p.system, "exactly one tool call"));
}

// torch_ext: the policy writes KernelBench's load_inline format, so the
// prompt asks for that (and says what the torch shim has), not for kf_forward.
TEST_F(PromptTest, TorchExtAsksForALoadInlineFile) {
  config_.default_mode = SolutionMode::kTorchExt;
  const Prompt p = build_prompt(in_);
  EXPECT_TRUE(has(p.user, "load_inline(cuda_sources=..., functions=[\"<entry>\"])")) << p.user;
  EXPECT_TRUE(has(p.user, "no PyTorch operators")) << p.user;
  EXPECT_TRUE(has(p.user, "| inputs[0] | x | input | [64, 32] |")) << "the argument order";
  EXPECT_FALSE(has(p.user, in_.abi_header)) << "kernel_abi.h is not what a torch_ext solution uses";
}

TEST_F(PromptTest, MessagesAndAbiTableAreStructured) {
  const Prompt p = build_prompt(in_);
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0]["role"], "system");
  EXPECT_EQ(p.messages[1]["role"], "user");
  EXPECT_EQ(p.messages[1]["content"], p.user);
  EXPECT_EQ(p.abi["inputs"].size(), 3u);
  EXPECT_EQ(p.abi["outputs"][0]["shape"], (json{64, 32}));
  EXPECT_EQ(p.abi["shape_variants"][0]["outputs"][0], (json{17, 32}));

  const Observation obs = prompt_observation(p, in_);
  EXPECT_EQ(obs.text, p.user);
  EXPECT_EQ(obs.data["messages"], p.messages);
  EXPECT_EQ(obs.data["tools"], tools_.definitions());
  EXPECT_EQ(obs.data["budgets"]["max_turns"], 4);
}

TEST_F(PromptTest, ExemplarsAndCustomSystemMessage) {
  Exemplar e;
  e.solution = testing::candidate("correct");
  e.speedup_eager = 1.75;
  e.note = "turn 3";
  in_.exemplars = {e};
  in_.system = "Be brief.";
  const Prompt p = build_prompt(in_);
  EXPECT_TRUE(has(p.user, "### Solution 1: 1.75x (turn 3)")) << p.user;
  EXPECT_TRUE(has(p.user, e.solution.source));
  EXPECT_EQ(p.system, "Be brief.");
}

TEST_F(PromptTest, TruncationPolicyIsStated) {
  config_.reward.on_truncation = TruncationReward::kFail;
  EXPECT_TRUE(has(build_prompt(in_).user, "counts as failed"));
  config_.reward.on_truncation = TruncationReward::kAutoSubmit;
  EXPECT_TRUE(has(build_prompt(in_).user, "evaluated as your submission"));
}

// prompt.compact, for short contexts: the guide and the tools' prose go; the
// task, the ABI, the budgets and the truncation rule stay.
TEST_F(PromptTest, CompactPromptKeepsWhatASolutionNeeds) {
  const std::string full = build_prompt(in_).user;
  config_.prompt.compact = true;
  const std::string compact = build_prompt(in_).user;
  EXPECT_LT(compact.size(), full.size());
  EXPECT_FALSE(has(compact, "Fuse everything.")) << compact;
  EXPECT_FALSE(has(compact, "## Tools")) << compact;
  EXPECT_TRUE(has(compact, render_kernelbench(task_)));
  EXPECT_TRUE(has(compact, in_.abi_header));
  EXPECT_TRUE(has(compact, "| inputs[0] | x | input | [64, 32] |")) << compact;
  EXPECT_TRUE(has(compact, "You have 4 turns")) << compact;
  EXPECT_TRUE(has(compact, "evaluated as your submission")) << compact;
}

TEST_F(PromptTest, TaskThatDoesNotTypeCheckIsAnInputError) {
  task_.nodes[0].in = {"x", "missing"};
  EXPECT_THROW(build_prompt(in_), InputError);
}

}  // namespace
}  // namespace kforge::env
