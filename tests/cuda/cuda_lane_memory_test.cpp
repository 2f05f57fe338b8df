// Lanes that share a GPU never spoil each other's memory (label gpu;
// docs/execution.md, "Device memory per lane"): each lane has its share of
// the card (judge/lane_memory_budget.h), its runners hold its candidate to it
// (runner/device_allowance.h, runner/cuda_allocation_guard.h), and a task too
// large for a lane is refused at the check with the key that changes it.
//
// The lanes here get explicit shares of a few GiB, so that a candidate that
// takes all it can takes only that: these tests do not fill the device and
// run beside other GPU tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/device_pool.h"

namespace kforge::env {
namespace {

namespace fs = std::filesystem;
using testing::affine_task;
using testing::compile_cuda;
using testing::compile_torch_ext;
using testing::example_source;
using testing::example_task;
using testing::gpu_quick_options;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// y = relu(x * w + b) for affine_task, on the given stream.
constexpr const char* kAffineBody = R"(
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

std::string affine_candidate(const std::string& forward_body) {
  return std::string(kAffineBody) +
         "extern \"C\" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {\n" +
         forward_body + "\n}\n";
}

// Takes device memory 256 MiB at a time until the runtime refuses, keeps all
// of it, then does the work correctly: the memory is what is wrong with it.
const std::string kHungry = affine_candidate(R"(
  cudaStream_t s = (cudaStream_t)stream;
  for (int i = 0; i < 4096; ++i) {
    void* p = 0;
    if (cudaMallocAsync(&p, (size_t)256 << 20, s) != cudaSuccess) break;
  }
  return launch(in, out, s);)");

// The same through torch_ext's tensors (the shim's stream-ordered pool).
constexpr const char* kHungryTorchExt = R"(#include <torch/extension.h>
#include <vector>
torch::Tensor affine_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  static std::vector<torch::Tensor>* hoard = new std::vector<torch::Tensor>();
  for (int i = 0; i < 4096; ++i) hoard->push_back(torch::empty({int64_t{1} << 26}, x.options()));
  return torch::zeros({x.size(0), x.size(1)}, x.options());
}
)";

// 64,000 bytes of local memory per thread: the driver backs it for every
// thread the GPU holds (132 SMs x 2048 threads: 16.1 GiB), more than a lane
// of a few GiB may have.
const std::string kBigStack = std::string(R"(
__global__ void big_stack(float* out, int k) {
  volatile float buf[16000];
  buf[k] = 1.f;
  out[0] = buf[(k * 7) % 16000];
}
)") + affine_candidate("big_stack<<<1024, 256, 0, (cudaStream_t)stream>>>((float*)out[0].data, (int)ni); "
                       "return cudaPeekAtLastError() == cudaSuccess ? launch(in, out, (cudaStream_t)stream) : 2;");

const std::string kAffineCorrect = affine_candidate("return launch(in, out, (cudaStream_t)stream);");

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

class CudaLaneMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge-cuda-lane-memory-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    gate_dir_ = pattern;
  }
  void TearDown() override { kforge::remove_tree(gate_dir_); }

  ExecutorConfig config(int lanes, uint64_t lane_bytes) const {
    ExecutorConfig c;
    c.backend = BackendKind::kCuda;
    c.lanes_per_device = lanes;
    c.lane_device_memory_bytes = lane_bytes;
    c.gate_dir = gate_dir_;
    return c;
  }

  static EvalRequest request(const Artifact& artifact, const TaskSpec& task, bool time) {
    EvalRequest req;
    req.task = task;
    req.artifact = artifact;
    req.verify = true;
    req.time = time;
    req.options = gpu_quick_options();
    return req;
  }

  static void expect_out_of_memory(const EvalReport& r, const std::string& what) {
    EXPECT_EQ(r.outcome, Outcome::kRuntimeError) << r.summary << "\n" << r.candidate_output;
    EXPECT_TRUE(has(r.summary, what)) << r.summary;
    EXPECT_TRUE(has(r.summary, "(out of memory: the allocation limit was reached)")) << r.summary;
    EXPECT_TRUE(has(r.summary, "placement.lane_device_memory_mib")) << r.summary;
  }

  fs::path gate_dir_;
};

// Two lanes; one candidate takes all the device memory it can while the other
// lane judges an honest kernel: the honest one is correct and timed, the
// hungry one gets its own out-of-memory verdict, and no runner of either lane
// fails to start (the system error these lanes gave before they had shares).
TEST_F(CudaLaneMemory, AHungryCandidateGetsItsOwnOutOfMemoryWhileTheOtherLaneJudgesAnHonestOne) {
  auto pool = make_device_pool(config(2, 8 * kGiB));
  ASSERT_FALSE(pool->device_name().empty()) << pool->start_report().error;
  const TaskSpec example = example_task("affine_relu6");
  const EvalRequest honest = request(compile_cuda(example_source("affine_relu6", "fast"), example), example, true);
  const TaskSpec small = affine_task(512, 256);
  const EvalRequest hungry = request(compile_cuda(kHungry, small), small, false);

  std::vector<double> alone, beside;
  for (int i = 0; i < 3; ++i) {
    const EvalReport r = pool->submit(honest).get();
    ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
    ASSERT_TRUE(r.timing && r.timing->speedup) << r.summary;
    alone.push_back(*r.timing->speedup);
  }
  std::vector<std::future<EvalReport>> hungry_reports, honest_reports;
  for (int i = 0; i < 4; ++i) {
    hungry_reports.push_back(pool->submit(hungry));
    honest_reports.push_back(pool->submit(honest));
  }
  for (auto& f : hungry_reports) {
    expect_out_of_memory(f.get(), "cudaMallocAsync of 256 MiB refused with cudaErrorMemoryAllocation (out of memory)");
  }
  for (auto& f : honest_reports) {
    const EvalReport r = f.get();
    ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
    ASSERT_TRUE(r.timing && r.timing->speedup) << r.summary;
    EXPECT_EQ(testing::device_clock_problem(*r.timing), "") << r.summary;
    beside.push_back(*r.timing->speedup);
  }
  // Timing holds the GPU alone (the GPU gate), so the speedups should agree;
  // printed for the run's log, not asserted (no verdict may depend on load).
  std::printf("[lane-memory] honest speedup alone %.3f, beside a hungry lane %.3f (medians of %zu and %zu)\n",
              median(alone), median(beside), alone.size(), beside.size());
  const json health = pool->health();
  ASSERT_EQ(health["lanes"].size(), 2u) << health.dump();
  for (const auto& lane : health["lanes"]) {
    ASSERT_TRUE(lane.contains("device_memory")) << lane.dump();
    EXPECT_EQ(lane["device_memory"]["lane_bytes"], 8 * kGiB) << lane.dump();
  }
  EXPECT_EQ(pool->restarts(), 0) << "no judge or runner of either lane failed";
}

TEST_F(CudaLaneMemory, TorchExtTensorsCountAgainstTheLane) {
  auto pool = make_device_pool(config(1, 6 * kGiB));
  ASSERT_FALSE(pool->device_name().empty()) << pool->start_report().error;
  const TaskSpec task = affine_task(512, 256);
  expect_out_of_memory(pool->submit(request(compile_torch_ext(kHungryTorchExt, task), task, false)).get(),
                       "cudaMallocAsync of 256 MiB refused with cudaErrorMemoryAllocation (out of memory)");
  EXPECT_EQ(pool->submit(request(compile_cuda(kAffineCorrect, task), task, true)).get().outcome, Outcome::kCorrect);
}

TEST_F(CudaLaneMemory, AKernelWhoseLocalMemoryDoesNotFitTheLaneIsOutOfMemory) {
  auto pool = make_device_pool(config(1, 6 * kGiB));
  ASSERT_FALSE(pool->device_name().empty()) << pool->start_report().error;
  const TaskSpec task = affine_task(512, 256);
  expect_out_of_memory(pool->submit(request(compile_cuda(kBigStack, task), task, false)).get(),
                       "bytes of local memory per thread");
  EXPECT_EQ(pool->submit(request(compile_cuda(kAffineCorrect, task), task, true)).get().outcome, Outcome::kCorrect);
}

// 8192 x 65536 floats (2 GiB per tensor): checking the reference holds
// 12 GiB, judging a candidate 22 GiB (while it is timed: the arena, the
// timing's pool of 3 input sets and the round's, the reference's node
// outputs, the comparison) and the candidate's intermediates, more than a
// lane of 6 GiB has.
TEST_F(CudaLaneMemory, ATaskThatCannotFitALaneIsRefusedAtTheCheckWithTheKey) {
  auto pool = make_device_pool(config(2, 6 * kGiB));
  ASSERT_FALSE(pool->device_name().empty()) << pool->start_report().error;
  const TaskSpec big = affine_task(8192, 65536);
  const ReferenceReport check = pool->check_task(big, gpu_quick_options()).get();
  ASSERT_EQ(check.status, ReferenceStatus::kInvalid) << check.problem;
  EXPECT_EQ(check.problem.rfind("the task is too large for a judge on the cuda backend: checking its reference needs "
                                "about 12.0 GiB of device memory (the base shape), and a lane on this ",
                                0),
            0u)
      << check.problem;
  EXPECT_TRUE(has(check.problem, "for tasks (its budget of 6.0 GiB (placement.lane_device_memory_mib)"))
      << check.problem;
  EXPECT_TRUE(has(check.problem, "give each lane more with placement.lane_device_memory_mib")) << check.problem;
  const EvalReport r = pool->submit(request(compile_cuda(kAffineCorrect, big), big, false)).get();
  EXPECT_EQ(r.outcome, Outcome::kNotRun) << r.summary;
  EXPECT_EQ(r.summary.rfind("task cannot be judged: the task is too large for a judge on the cuda backend: judging a "
                            "candidate needs about 30.1 GiB of device memory (the base shape: 22.0 GiB for the "
                            "judge's tensors and 2 x 4.1 GiB for the candidate's own intermediates",
                            0),
            0u)
      << r.summary;
}

TEST_F(CudaLaneMemory, LanesThatDoNotFitTheCardAreTheDevicesStartUpError) {
  auto pool = make_device_pool(config(2, uint64_t{1} << 40));
  const Executor::StartReport start = pool->start_report();
  EXPECT_TRUE(start.device_name.empty());
  EXPECT_TRUE(has(start.error,
                  "judge cannot use its device: placement.lane_device_memory_mib: 2 lanes of 1048576 "
                  "MiB add up to 2097152 MiB, more than "))
      << start.error;
  EXPECT_TRUE(has(start.error, "give each lane at most ")) << start.error;
}

}  // namespace
}  // namespace kforge::env
