// Candidates of modes nvrtc and torch_ext on the CUDA backend end to end on a
// GPU (label gpu), beside cuda_executor_test.cpp. nvrtc (CUBIN + launch plan,
// launched by the runner): correct and timed, every shape variant of the
// bundled example, wrong, a plan that fails for the bound shapes, a fault,
// more than 48 KiB of dynamic shared memory, graph mode and a profile.
// torch_ext (KernelBench load_inline sources): the bundled example, scratch
// tensors eagerly and in graph mode, an output of the wrong shape.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cuda_executor_test_support.h"
#include "cuda_test_support.h"
#include "kforge/core/solution.h"
#include "nvrtc_candidates.h"

namespace kforge::env {
namespace {

using testing::affine_task;
using testing::example_task;
using testing::gpu_quick_options;
using testing::kNvrtcAffine;
using testing::kNvrtcAffineNoRelu;
using testing::kNvrtcAffinePlan;
using testing::kNvrtcBounded;
using testing::kNvrtcBoundedPlan;
using testing::kNvrtcDivByZeroPlan;
using testing::kNvrtcScribble;
using testing::kNvrtcScribblePlan;
using testing::kNvrtcSharedStage;
using testing::kNvrtcSharedStagePlan;

// torch_ext candidates for affine_task (y = relu(x * w + b)), written as
// KernelBench's load_inline sources are: stream-less launches, tensors made
// by torch::empty_like, the output returned.
const char* kTorchExtTwoPass = R"(#include <torch/extension.h>
__global__ void affine(const float* x, const float* w, const float* b, float* t, int64_t n, int64_t cols) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) t[i] = x[i] * w[i % cols] + b[i % cols];
}
__global__ void relu(const float* t, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(t[i], 0.0f);
}
torch::Tensor affine_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto t = torch::empty_like(x);  // scratch: freed in stream order when t goes
  auto y = torch::empty({x.size(0), x.size(1)}, x.options());
  const int64_t n = x.numel();
  const unsigned blocks = (unsigned)((n + 255) / 256);
  affine<<<blocks, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), t.data_ptr<float>(), n,
                          x.size(-1));
  relu<<<blocks, 256, 0>>>(t.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
)";

const char* kTorchExtWrongShape = R"(#include <torch/extension.h>
torch::Tensor affine_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  return torch::zeros({x.size(0)}, x.options());
}
)";

std::string read_example_file(const std::string& task, const std::string& file) {
  std::ifstream in(std::filesystem::path(KFORGE_SOURCE_DIR) / "examples" / task / "cuda" / file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(CudaExecutorTest, NvrtcCandidateIsJudgedAndTimed) {
  EvalReport r = evaluate_nvrtc(kNvrtcAffine, kNvrtcAffinePlan, affine_task(512, 256), /*time=*/true);
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary << "\n" << r.candidate_output;
  ASSERT_TRUE(r.timing.has_value()) << r.summary;
  const TimingSummary& t = *r.timing;
  EXPECT_EQ(testing::device_clock_problem(t), "") << timing_text(r);
  EXPECT_GT(t.candidate.median_ms, 0) << timing_text(r);
  EXPECT_GT(t.speedup.value_or(0.0), 0) << timing_text(r);
  EXPECT_TRUE(t.sandbox["seccomp"].get<bool>()) << t.sandbox.dump();
}

// examples/affine_relu6/cuda/nvrtc_fast.yaml: every shape variant runs the
// plan evaluated for its own shapes.
TEST_F(CudaExecutorTest, NvrtcExampleIsCorrectOnEveryVariant) {
  const TaskSpec task = example_task("affine_relu6");
  ASSERT_FALSE(task.shape_variants.empty());
  const Solution s =
      load_solution(std::filesystem::path(KFORGE_SOURCE_DIR) / "examples" / "affine_relu6" / "cuda" / "nvrtc_fast.yaml",
                    SolutionMode::kCuda);
  ASSERT_EQ(s.mode, SolutionMode::kNvrtc);
  EvalReport r = evaluate_nvrtc(s.source, s.launch, task, /*time=*/true);
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary << "\n" << r.candidate_output;
  EXPECT_EQ(r.verification.size(), (task.shape_variants.size() + 1) * gpu_quick_options().seeds)
      << r.verification.dump();
  // The same kernel as cuda/fast.cu, which beats eager PyTorch's three passes.
  EXPECT_GT(r.timing ? r.timing->speedup.value_or(0.0) : 0.0, 1.0) << r.summary;
}

TEST_F(CudaExecutorTest, NvrtcWrongResultIsWrong) {
  EvalReport r = evaluate_nvrtc(kNvrtcAffineNoRelu, kNvrtcAffinePlan, affine_task(512, 256));
  EXPECT_EQ(r.outcome, Outcome::kWrong) << r.summary << "\n" << r.candidate_output;
}

TEST_F(CudaExecutorTest, NvrtcPlanFailingForTheShapesIsARuntimeErrorNamingTheField) {
  EvalReport r = evaluate_nvrtc(kNvrtcAffine, kNvrtcDivByZeroPlan, affine_task(512, 256));
  EXPECT_EQ(r.outcome, Outcome::kRuntimeError) << r.summary << "\n" << r.candidate_output;
  EXPECT_NE(r.summary.find("kernels[0] (affine_relu<256>): grid.x = "), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("division by zero"), std::string::npos) << r.summary;
  expect_correct_next("an nvrtc plan that failed to evaluate");
}

TEST_F(CudaExecutorTest, NvrtcFaultIsARuntimeErrorAndTheNextEvaluationSucceeds) {
  EvalOptions o = gpu_quick_options();
  o.call_timeout_ms = 2000;
  EvalReport r = evaluate_nvrtc(kNvrtcScribble, kNvrtcScribblePlan, affine_task(512, 256), false, false, o);
  EXPECT_EQ(r.outcome, Outcome::kRuntimeError) << r.summary << "\n" << r.candidate_output;
  EXPECT_NE(r.summary.find("cudaErrorIllegalAddress"), std::string::npos) << r.summary;
  expect_correct_next("an nvrtc illegal address");
  EvalReport again = evaluate_nvrtc(kNvrtcAffine, kNvrtcAffinePlan, affine_task(512, 256));
  EXPECT_EQ(again.outcome, Outcome::kCorrect) << again.summary;
  json h = executor_->health();
  EXPECT_EQ(h["device"].value("arenas_live", -1), 0) << h.dump();
}

TEST_F(CudaExecutorTest, NvrtcKernelGetsMoreThan48KiBOfDynamicSharedMemory) {
  EvalReport r = evaluate_nvrtc(kNvrtcSharedStage, kNvrtcSharedStagePlan, affine_task(512, 256));
  EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary << "\n" << r.candidate_output;
}

TEST_F(CudaExecutorTest, NvrtcBlockLargerThanTheKernelAllowsIsARuntimeError) {
  EvalReport r = evaluate_nvrtc(kNvrtcBounded, kNvrtcBoundedPlan, affine_task(512, 256));
  EXPECT_EQ(r.outcome, Outcome::kRuntimeError) << r.summary;
  EXPECT_NE(r.summary.find("kernels[0] (bounded)"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("at most 128"), std::string::npos) << r.summary;
}

TEST_F(CudaExecutorTest, NvrtcGraphModeReplaysTheLaunches) {
  EvalOptions o = gpu_quick_options();
  o.cuda_graph = true;
  EvalReport r = evaluate_nvrtc(kNvrtcAffine, kNvrtcAffinePlan, affine_task(512, 256), true, false, o);
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  ASSERT_TRUE(r.timing && r.timing->cuda_graph.is_object()) << timing_text(r);
  EXPECT_TRUE(r.timing->cuda_graph["used"].get<bool>()) << r.timing->cuda_graph.dump();
}

TEST_F(CudaExecutorTest, NvrtcProfileAttributesThePlansKernel) {
  EvalReport r = evaluate_nvrtc(kNvrtcAffine, kNvrtcAffinePlan, affine_task(1024, 1024), true, true);
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  ASSERT_TRUE(r.profile && r.profile->attribution.is_object()) << profile_text(r);
  const json& k = r.profile->attribution["kernels"];
  ASSERT_EQ(k.size(), 1u) << profile_text(r);
  EXPECT_TRUE(k[0]["own"].get<bool>()) << profile_text(r);
  EXPECT_FALSE(has_violation(r, "foreign_stream"));
  EXPECT_FALSE(has_violation(r, "work_after_return"));
}

// examples/affine_relu6/cuda/torch_ext_fast.py, a KernelBench load_inline
// file: correct on every variant, timed on the device clock, and its
// stream-less launch is on the harness's stream (no foreign_stream).
TEST_F(CudaExecutorTest, TorchExtExampleIsCorrectTimedAndOnTheHarnessStream) {
  const TaskSpec task = example_task("affine_relu6");
  EvalReport r = evaluate_torch_ext(read_example_file("affine_relu6", "torch_ext_fast.py"), task, true, true);
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary << "\n" << r.candidate_output;
  EXPECT_EQ(r.verification.size(), (task.shape_variants.size() + 1) * gpu_quick_options().seeds);
  ASSERT_TRUE(r.timing.has_value()) << r.summary;
  EXPECT_EQ(testing::device_clock_problem(*r.timing), "") << timing_text(r);
  EXPECT_GT(r.timing->speedup.value_or(0.0), 0.0) << timing_text(r);
  EXPECT_FALSE(has_violation(r, "foreign_stream")) << profile_text(r);
  ASSERT_TRUE(r.profile && r.profile->attribution.is_object()) << profile_text(r);
  bool own = false;
  for (const auto& k : r.profile->attribution["kernels"]) {
    own = own || k.value("name", "").find("affine_relu6_kernel") != std::string::npos;
  }
  EXPECT_TRUE(own) << r.profile->attribution.dump(2);
  std::printf("[torch_ext] example: speedup %.2fx over eager (candidate %.4f ms, reference %.4f ms)\n",
              r.timing->speedup.value_or(0.0), r.timing->candidate.median_ms, r.timing->reference.median_ms);
}

// Scratch tensors come from the stream-ordered pool, so graph mode captures
// the whole call, allocations included.
TEST_F(CudaExecutorTest, TorchExtScratchTensorsWorkEagerlyAndInGraphMode) {
  EvalReport eager = evaluate_torch_ext(kTorchExtTwoPass, affine_task(512, 256), true);
  ASSERT_EQ(eager.outcome, Outcome::kCorrect) << eager.summary << "\n" << eager.candidate_output;
  EvalOptions o = gpu_quick_options();
  o.cuda_graph = true;
  EvalReport graph = evaluate_torch_ext(kTorchExtTwoPass, affine_task(512, 256), true, false, o);
  ASSERT_EQ(graph.outcome, Outcome::kCorrect) << graph.summary << "\n" << graph.candidate_output;
  ASSERT_TRUE(graph.timing && graph.timing->cuda_graph.is_object()) << timing_text(graph);
  EXPECT_TRUE(graph.timing->cuda_graph["used"].get<bool>()) << graph.timing->cuda_graph.dump();
}

TEST_F(CudaExecutorTest, TorchExtWrongOutputShapeIsARuntimeErrorSayingWhich) {
  EvalReport r = evaluate_torch_ext(kTorchExtWrongShape, affine_task(512, 256));
  EXPECT_EQ(r.outcome, Outcome::kRuntimeError) << r.summary;
  EXPECT_NE((r.summary + r.candidate_output).find("output 0 has shape [512]; the task expects [512, 256]"),
            std::string::npos)
      << r.summary << "\n"
      << r.candidate_output;
  expect_correct_next("a torch_ext entry that returned the wrong shape");
}

}  // namespace
}  // namespace kforge::env
