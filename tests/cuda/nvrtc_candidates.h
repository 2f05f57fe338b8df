// The nvrtc candidates of the GPU tests (cuda_executor_test), all for
// affine_task: device code and launch plans. Shared with
// nvrtc_candidates_test (label cpu), which compiles each one with NVRTC and
// evaluates its plan for the task's shapes, so that a typo fails on every
// machine rather than in the GPU run.
#pragma once

#include <string>

#include "kforge/core/document.h"

namespace kforge::testing {

// nvrtc: y = relu(x * w + b) for affine_task, device code only; the plans
// below launch it. A template, so the runner finds it by its lowered name.
inline constexpr const char* kNvrtcAffine = R"(
template <int Threads>
__global__ void affine_relu(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  long i = blockIdx.x * (long)Threads + threadIdx.x;
  if (i < n) { float v = x[i] * w[i % cols] + b[i % cols]; y[i] = v > 0.f ? v : 0.f; }
}
)";
inline const json kNvrtcAffinePlan = json::parse(R"J({"name": "affine_relu<256>", "grid": ["cdiv(numel(x), 256)"],
    "block": [256], "args": ["x", "w", "b", "y", "i64(numel(x))", "i64(dim(x, -1))"]})J");
// Forgets the ReLU: wrong wherever x * w + b < 0.
inline constexpr const char* kNvrtcAffineNoRelu = R"(
template <int Threads>
__global__ void affine_relu(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  long i = blockIdx.x * (long)Threads + threadIdx.x;
  if (i < n) y[i] = x[i] * w[i % cols] + b[i % cols];
}
)";
// Divides by zero for 256 columns (affine_task(512, 256)): the plan compiles,
// and its evaluation for the bound shapes fails.
inline const json kNvrtcDivByZeroPlan = json::parse(R"J({"name": "affine_relu<256>",
    "grid": ["cdiv(numel(x), dim(x, 1) - 256)"], "block": [256],
    "args": ["x", "w", "b", "y", "i64(numel(x))", "i64(dim(x, -1))"]})J");
// Writes through the address 0x100 (passed as a u64 scalar) before the correct work.
inline const std::string kNvrtcScribble = std::string(kNvrtcAffine) + R"(
__global__ void scribble(float* p) { p[threadIdx.x] = 1.f; }
)";
inline const json kNvrtcScribblePlan = json::parse(R"J({"kernels": [
    {"name": "scribble", "grid": [1], "block": [32], "args": ["u64(256)"]},
    {"name": "affine_relu<256>", "grid": ["cdiv(numel(x), 256)"], "block": [256],
     "args": ["x", "w", "b", "y", "i64(numel(x))", "i64(dim(x, -1))"]}]})J");
// Stages x through 64 KiB of dynamic shared memory and touches its last
// float: the launch needs the kernel's limit raised above the 48 KiB default.
inline constexpr const char* kNvrtcSharedStage = R"(
extern "C" __global__ void affine_relu_staged(const float* x, const float* w, const float* b, float* y, long n,
                                              long cols, int stage_floats) {
  extern __shared__ float stage[];
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  stage[threadIdx.x] = i < n ? x[i] : 0.f;
  if (threadIdx.x == 0) stage[stage_floats - 1] = 0.f;
  __syncthreads();
  if (i < n) { float v = stage[threadIdx.x] * w[i % cols] + b[i % cols] + stage[stage_floats - 1]; y[i] = v > 0.f ? v : 0.f; }
}
)";
inline const json kNvrtcSharedStagePlan =
    json::parse(R"J({"name": "affine_relu_staged", "grid": ["cdiv(numel(x), 256)"],
    "block": [256], "shared_mem": 65536,
    "args": ["x", "w", "b", "y", "i64(numel(x))", "i64(dim(x, -1))", "i32(65536 / 4)"]})J");
// __launch_bounds__(128) launched with 256 threads per block.
inline constexpr const char* kNvrtcBounded = R"(
extern "C" __global__ void __launch_bounds__(128) bounded(float* y) { y[threadIdx.x] = 0.f; }
)";
inline const json kNvrtcBoundedPlan =
    json::parse(R"J({"name": "bounded", "grid": [1], "block": [256], "args": ["y"]})J");

}  // namespace kforge::testing
