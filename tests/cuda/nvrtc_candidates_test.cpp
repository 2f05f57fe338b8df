// The GPU tests' nvrtc candidates (nvrtc_candidates.h), checked where there is
// no GPU (label cpu): each compiles through the same CompileService path the
// GPU tests use, and its plan evaluates for affine_task(512, 256) as the
// runner will evaluate it, except the one meant to fail, which fails with the
// message the GPU test expects.
#include "nvrtc_candidates.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kforge/env/cuda/launch_plan.h"

namespace kforge::testing {
namespace {

struct Candidate {
  const char* name;
  std::string source;
  const json* plan;
};

// What the runner does on bind: the plan parsed from the artifact, evaluated
// for the bound shapes. "" when it evaluates, else the LaunchError.
std::string evaluate_for(const env::Artifact& artifact, const TaskSpec& task) {
  const env::LaunchPlan plan = env::parse_launch_plan(artifact.launch, env::launch_tensor_names(task));
  for (const auto& k : plan.kernels) EXPECT_FALSE(k.lowered_name.empty()) << k.name;
  const env::ShapeMap shapes = {{"x", task.inputs[0].shape},
                                {"w", task.params[0].shape},
                                {"b", task.params[1].shape},
                                {"y", task.inputs[0].shape}};
  try {
    env::evaluate_launch_plan(plan, shapes);
  } catch (const env::LaunchError& e) {
    return e.what();
  }
  return "";
}

TEST(NvrtcGpuCandidates, CompileAndTheirPlansEvaluateForTheTask) {
  const TaskSpec task = affine_task(512, 256);
  const std::vector<Candidate> good = {{"affine", kNvrtcAffine, &kNvrtcAffinePlan},
                                       {"no_relu", kNvrtcAffineNoRelu, &kNvrtcAffinePlan},
                                       {"scribble", kNvrtcScribble, &kNvrtcScribblePlan},
                                       {"shared_stage", kNvrtcSharedStage, &kNvrtcSharedStagePlan},
                                       {"bounded", kNvrtcBounded, &kNvrtcBoundedPlan}};
  for (const Candidate& c : good) {
    SCOPED_TRACE(c.name);
    const env::Artifact artifact = compile_nvrtc(c.source, *c.plan, task);
    EXPECT_EQ(evaluate_for(artifact, task), "");
  }
  const std::string error = evaluate_for(compile_nvrtc(kNvrtcAffine, kNvrtcDivByZeroPlan, task), task);
  EXPECT_EQ(error.rfind("kernels[0] (affine_relu<256>): grid.x = ", 0), 0u) << error;
  EXPECT_NE(error.find("division by zero"), std::string::npos) << error;
}

TEST(NvrtcGpuCandidates, TheSharedMemoryCandidateNeedsTheOptIn) {
  const TaskSpec task = affine_task(512, 256);
  const env::Artifact artifact = compile_nvrtc(kNvrtcSharedStage, kNvrtcSharedStagePlan, task);
  const env::LaunchPlan plan = env::parse_launch_plan(artifact.launch, env::launch_tensor_names(task));
  const std::vector<env::KernelLaunch> launches =
      env::evaluate_launch_plan(plan, {{"x", {512, 256}}, {"w", {256}}, {"b", {256}}, {"y", {512, 256}}});
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_GT(launches[0].shared_mem_bytes, 48u << 10);
  EXPECT_EQ(launches[0].lowered_name, "affine_relu_staged");
}

}  // namespace
}  // namespace kforge::testing
