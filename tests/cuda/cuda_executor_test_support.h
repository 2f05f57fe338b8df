// What the CUDA executor's GPU tests share (cuda_executor_test.cpp,
// cuda_executor_nvrtc_torch_ext_test.cpp, trace_in_timing_runner_test.cpp):
// the affine candidate for
// testing::affine_task (mode cuda) and a fixture whose one Executor on the
// cuda backend serves the whole suite, with helpers that compile a candidate
// in each mode and evaluate it. Test-only (label gpu).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cuda_test_support.h"
#include "kforge/env/executor.h"

namespace kforge::env {

// y = relu(x * w + b) for affine_task, on the given stream.
inline constexpr const char* kAffineBody = R"(
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
__global__ void affine_relu(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i] * w[i % cols] + b[i % cols]; y[i] = v > 0.f ? v : 0.f; }
}
static int launch(const kf_tensor* in, kf_tensor* out, cudaStream_t s) {
  long n = kf_numel(&in[0]), cols = in[0].shape[1];
  affine_relu<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (const float*)in[1].data,
                                                          (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaPeekAtLastError() == cudaSuccess ? 0 : 2;
}
)";

// The report's timing and profile as JSON, for failure messages.
inline std::string timing_text(const EvalReport& r) { return r.timing ? to_json(*r.timing).dump(1) : "no timing"; }
inline std::string profile_text(const EvalReport& r) { return r.profile ? to_json(*r.profile).dump(2) : "no profile"; }

inline std::string affine_candidate(const std::string& forward_body) {
  return std::string(kAffineBody) +
         "extern \"C\" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {\n" +
         forward_body + "\n}\n";
}

inline const std::string kAffineCorrect = affine_candidate("return launch(in, out, (cudaStream_t)stream);");
// Correct work on the given stream, plus a no-op kernel on the legacy default
// stream: over by the time kf_forward returns, so only a trace sees it.
inline const std::string kForeignStream = std::string(R"(
__global__ void elsewhere() {}
)") + affine_candidate("elsewhere<<<1, 1>>>(); return launch(in, out, (cudaStream_t)stream);");

class CudaExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ExecutorConfig config;
    config.backend = BackendKind::kCuda;
    executor_ = make_executor(config).release();
  }
  static void TearDownTestSuite() {
    delete executor_;
    executor_ = nullptr;
  }

  static EvalRequest request(const std::string& source, const TaskSpec& task, bool time, bool profile,
                             const EvalOptions& options) {
    EvalRequest req;
    req.task = task;
    req.artifact = testing::compile_cuda(source, task);
    req.verify = true;
    req.time = time;
    req.profile = profile;
    req.options = options;
    return req;
  }
  static EvalReport evaluate(const std::string& source, const TaskSpec& task, bool time = false, bool profile = false,
                             EvalOptions options = testing::gpu_quick_options()) {
    return executor_->submit(request(source, task, time, profile, options)).get();
  }
  static EvalReport evaluate_artifact(const env::Artifact& artifact, const TaskSpec& task, bool time, bool profile,
                                      const EvalOptions& options) {
    EvalRequest req;
    req.task = task;
    req.artifact = artifact;
    req.verify = true;
    req.time = time;
    req.profile = profile;
    req.options = options;
    return executor_->submit(req).get();
  }
  static EvalReport evaluate_nvrtc(const std::string& source, const json& launch, const TaskSpec& task,
                                   bool time = false, bool profile = false,
                                   EvalOptions options = testing::gpu_quick_options()) {
    return evaluate_artifact(testing::compile_nvrtc(source, launch, task), task, time, profile, options);
  }
  static EvalReport evaluate_torch_ext(const std::string& source, const TaskSpec& task, bool time = false,
                                       bool profile = false, EvalOptions options = testing::gpu_quick_options()) {
    return evaluate_artifact(testing::compile_torch_ext(source, task), task, time, profile, options);
  }
  static bool has_violation(const EvalReport& r, const std::string& check) {
    return std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation& v) { return v.check == check; });
  }
  static void expect_correct_next(const std::string& after) {
    EvalReport r = evaluate(kAffineCorrect, testing::affine_task(512, 256), /*time=*/true);
    EXPECT_EQ(r.outcome, Outcome::kCorrect) << "after " << after << ": " << r.summary;
  }

  static inline Executor* executor_ = nullptr;
};

}  // namespace kforge::env
