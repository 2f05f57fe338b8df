// The judge's `reference` request on the GPU (label gpu): the task's
// reference alone on the CUDA judge device, checked node by node and timed
// with the CUDA speedup denominator's protocol (device events, L2 flush).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "cuda_test_support.h"
#include "kforge/env/executor.h"
#include "kforge/env/reference_probe.h"

namespace kforge::env {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class CudaReferenceTest : public ::testing::Test {
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
  static ReferenceReport probe(const TaskSpec& task, bool time) {
    ReferenceRequest req;
    req.task = task;
    req.check = true;
    req.time = time;
    req.options = testing::gpu_quick_options();
    return executor_->submit_reference(std::move(req)).get();
  }
  static Executor* executor_;
};

Executor* CudaReferenceTest::executor_ = nullptr;

TEST_F(CudaReferenceTest, ExamplesPassTheCheckAndAreTimedOnDeviceEvents) {
  for (const std::string& name : testing::example_names()) {
    SCOPED_TRACE(name);
    const TaskSpec task = testing::example_task(name);
    const ReferenceReport r = probe(task, /*time=*/true);
    ASSERT_EQ(r.status, ReferenceStatus::kOk) << r.problem;
    EXPECT_TRUE(has(r.device, "NVIDIA")) << r.device;
    EXPECT_EQ(r.nodes.size(), task.shape_variants.size() + 1);
    ASSERT_TRUE(r.timing.has_value());
    const json& t = *r.timing;
    EXPECT_EQ(t["timer"], "device_events") << t.dump();
    EXPECT_GT(t["median_ms"].get<double>(), 0.0) << t.dump();
    EXPECT_GE(t["samples"].get<int>(), testing::gpu_quick_options().min_samples) << t.dump();
    const std::set<std::string> rules = {"converged", "time_cap", "sample_cap", "eval_timeout"};
    EXPECT_EQ(rules.count(t["stop_reason"].get<std::string>()), 1u) << t.dump();
    EXPECT_GE(t["cache_flush_bytes"].get<uint64_t>(), 2 * t["clocks"].value("l2_bytes", uint64_t{0})) << t.dump();
    EXPECT_TRUE(t["wall"].is_object()) << t.dump();
  }
}

TEST_F(CudaReferenceTest, NanReferenceIsRefusedNamingTheNode) {
  const TaskSpec task = load_task(std::filesystem::path(KFORGE_SOURCE_DIR) / "tests/gym/data/nan_reference.json");
  const ReferenceReport r = probe(task, /*time=*/true);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  EXPECT_EQ(r.problem.rfind("node 1 (log -> t1): ", 0), 0u) << r.problem;
  EXPECT_TRUE(has(r.problem, "elements are NaN on the base shape (x: [64, 64])")) << r.problem;
  EXPECT_FALSE(r.timing.has_value());
}

TEST_F(CudaReferenceTest, ATaskTooLargeForTheJudgeIsRefusedWithFiguresBeforeItRuns) {
  // Statically valid (each tensor within the limits), 160 GiB of inputs:
  // the check keeps them, the 19 node outputs and a float64 temporary of one
  // (41 tensors of 8 GiB).
  const ReferenceReport r = probe(testing::task_larger_than_the_gpu(), /*time=*/false);
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  // Against the lane's share of the card (judge/lane_memory_budget.h), with the key that changes it.
  EXPECT_EQ(r.problem.rfind("the task is too large for a judge on the cuda backend: checking its reference needs about "
                            "328.0 GiB of device memory (the base shape), and a lane on this ",
                            0),
            0u)
      << r.problem;
  EXPECT_TRUE(has(r.problem, "for tasks (its budget of ")) << r.problem;
  EXPECT_TRUE(has(r.problem, "placement.lane_device_memory_mib")) << r.problem;
  EXPECT_TRUE(r.nodes.empty()) << "refused before anything ran: " << r.nodes.dump();
  EXPECT_TRUE(probe(testing::affine_task(256, 256), /*time=*/false).ok());
}

TEST_F(CudaReferenceTest, AReferenceThatRunsOutOfMemoryAnywayIsInvalidAndTheJudgeCarriesOn) {
  // With the judge told it may use a petabyte, the estimate lets the task
  // through and the allocation itself fails: still the task's verdict.
  ReferenceRequest req;
  req.task = testing::task_larger_than_the_gpu();
  req.check = true;
  req.options.judge_memory_limit_bytes = uint64_t{1} << 50;
  const ReferenceReport r = executor_->submit_reference(req).get();
  ASSERT_EQ(r.status, ReferenceStatus::kInvalid) << r.problem;
  EXPECT_TRUE(has(r.problem, "the reference failed on the base shape")) << r.problem;
  EXPECT_TRUE(has(r.problem, "out of memory")) << r.problem;
  EXPECT_TRUE(probe(testing::affine_task(256, 256), /*time=*/false).ok());
}

}  // namespace
}  // namespace kforge::env
