// A lane's share of its GPU's memory (judge/lane_memory_budget.h) and the
// task check against it (judge/task_fit.h): the arithmetic on a card's totals,
// the placements refused with their key and fix, and tasks refused at reset
// with what they need, what a lane has and which key changes it. The figures
// are the device's totals, never a measurement, so they are checked here
// exactly; the GPU tests (tests/cuda/cuda_lane_memory_test.cpp) check that lanes
// holding to them do not disturb each other.
#include "judge/lane_memory_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "judge/judge_device.h"
#include "judge/task_fit.h"
#include "kforge/core/error.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
const std::string kH100 = "NVIDIA H100 80GB HBM3";

std::string refusal(const LaneMemoryConfig& config, uint64_t device_bytes, int contexts) {
  try {
    plan_lane_memory(config, kH100, device_bytes, 100 * kMiB, contexts);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LaneMemoryBudget, AnEvenShareIsTheCardLessTheReserveAmongItsLanes) {
  const int contexts = lane_contexts(/*spares=*/2, /*profiler_spares=*/1);
  EXPECT_EQ(contexts, 6) << "judge, 2 spares, the candidate's runner, a profiler runner and its spare";
  EXPECT_EQ(lane_contexts(2, 3), 8) << "... and three profiler spares";
  EXPECT_EQ(lane_contexts(3, 0), 5) << "a lane that never profiles";
  const LaneMemoryBudget b = plan_lane_memory({0, 2 * kGiB, 4}, kH100, 80 * kGiB, 100 * kMiB, contexts);
  EXPECT_TRUE(b.even_share);
  EXPECT_EQ(b.lane_bytes, (80 * kGiB - 2 * kGiB) / 4);
  EXPECT_EQ(b.harness_bytes(), 6 * kContextBytes + 100 * kMiB);
  EXPECT_EQ(b.task_bytes(), b.lane_bytes - b.harness_bytes());
  // The candidate's share: what the judge's tensors leave, in each of the
  // two runners that load it at once.
  EXPECT_EQ(b.candidate_bytes(kGiB), (b.task_bytes() - kGiB) / kCandidateCopies);
  EXPECT_EQ(b.candidate_bytes(b.task_bytes()), 0u);
  EXPECT_EQ(b.candidate_bytes(b.task_bytes() + 1), 0u);
  const std::string text = b.describe();
  EXPECT_NE(text.find("its budget of 19.5 GiB (an even share: " + kH100 +
                      "'s 80.0 GiB less a 2.0 GiB reserve, "
                      "among 4 lanes) less 3.1 GiB for the CUDA contexts of its judge and 5 runners"),
            std::string::npos)
      << text;
  EXPECT_EQ(b.to_json()["task_bytes"], b.task_bytes());
  // The lanes of the pool never add up to more than the card less its reserve.
  EXPECT_LE(4 * b.lane_bytes, 80 * kGiB - 2 * kGiB);
}

TEST(LaneMemoryBudget, AConfiguredShareIsTakenAsItIs) {
  const LaneMemoryBudget b = plan_lane_memory({16 * kGiB, 2 * kGiB, 4}, kH100, 80 * kGiB, 100 * kMiB, 6);
  EXPECT_FALSE(b.even_share);
  EXPECT_EQ(b.lane_bytes, 16 * kGiB);
  EXPECT_NE(b.describe().find("(placement.lane_device_memory_mib)"), std::string::npos) << b.describe();
  // Exactly the even share is allowed too.
  const uint64_t even = (80 * kGiB - 2 * kGiB) / 4;
  EXPECT_EQ(plan_lane_memory({even, 2 * kGiB, 4}, kH100, 80 * kGiB, 100 * kMiB, 6).lane_bytes, even);
}

TEST(LaneMemoryBudget, LanesThatWouldNotFitTheCardAreRefusedWithTheKeyAndTheFix) {
  const std::string msg = refusal({24 * kGiB, 2 * kGiB, 4}, 80 * kGiB, 6);
  EXPECT_EQ(msg, "placement.lane_device_memory_mib: 4 lanes of 24576 MiB add up to 98304 MiB, more than " + kH100 +
                     "'s 81920 MiB less its 2048 MiB reserve (placement.device_memory_reserve_mib): give each lane at "
                     "most 19968 MiB, or fewer placement.lanes_per_device");
}

TEST(LaneMemoryBudget, ALaneWithNothingLeftForTasksIsRefusedWithTheKeyAndTheFix) {
  // 16 lanes of an 8 GiB card: 384 MiB each, less than six contexts.
  std::string msg = refusal({0, 2 * kGiB, 16}, 8 * kGiB, 6);
  EXPECT_EQ(msg.rfind("placement.lanes_per_device: a lane's budget of 384 MiB leaves less than 256 MiB for tasks "
                      "after the CUDA contexts of its judge and 5 runners (6 x 512 MiB) and its L2 flush buffer "
                      "(100 MiB): give each lane at least 3428 MiB",
                      0),
            0u)
      << msg;
  msg = refusal({3 * kGiB, 2 * kGiB, 1}, 80 * kGiB, 6);
  EXPECT_EQ(msg.rfind("placement.lane_device_memory_mib: a lane's budget of 3072 MiB leaves less than 256 MiB", 0), 0u)
      << msg;
  msg = refusal({0, 80 * kGiB, 1}, 80 * kGiB, 6);
  EXPECT_EQ(msg.rfind("placement.device_memory_reserve_mib: the reserve of 81920 MiB leaves nothing", 0), 0u) << msg;
}

// A task of two float32 inputs of rows x n elements and their sum.
TaskSpec add_task(int64_t n, int64_t rows = 1) {
  const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(n) + "]";
  return testing::task_from_json(R"({"id": "t/add", "inputs": [
      {"name": "a", "shape": )" + shape +
                                 R"(, "dtype": "float32"},
      {"name": "b", "shape": )" + shape +
                                 R"(, "dtype": "float32"}],
    "nodes": [{"op": "add", "in": ["a", "b"], "out": "y"}], "outputs": ["y"]})");
}

// What the judge holds to judge a candidate on add_task(n) (task_fit.cpp):
// the arena (inputs and output) and the larger of verification (the pristine
// inputs, the reference's inputs and node output, the comparison's
// temporaries: 2f + 3f + 2f) and timing (3 pooled input sets, the round's
// inputs and node output, the comparison: 6f + 3f + 2f).
uint64_t judge_bytes_of_add(int64_t n) {
  const uint64_t f = 4 * static_cast<uint64_t>(n);
  return 3 * f + std::max(2 * f + 3 * f + 2 * f, 6 * f + 3 * f + 2 * f);
}

class LaneTaskFit : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = make_judge_device("cpu", 0);
    // A lane of an 80 GB card shared by 4 lanes; the arithmetic does not
    // depend on the backend the device runs.
    lane_ = plan_lane_memory({0, 2 * kGiB, 4}, kH100, 80 * kGiB, 100 * kMiB, 6);
    device_->set_lane_memory(lane_);
  }
  std::unique_ptr<JudgeDevice> device_;
  LaneMemoryBudget lane_;
};

TEST_F(LaneTaskFit, ATaskThatFitsGivesTheCandidateWhatTheJudgeLeaves) {
  const int64_t n = int64_t{1} << 26;  // 256 MiB per tensor
  const TaskFit fit = check_task_fit(add_task(n), JudgeWork::kEvaluation, env::EvalOptions{}, *device_);
  ASSERT_TRUE(fit.fits()) << fit.problem;
  EXPECT_EQ(fit.limit_bytes, lane_.task_bytes());
  EXPECT_EQ(fit.judge_bytes, judge_bytes_of_add(n));
  EXPECT_EQ(fit.candidate_floor_bytes, 64 * kMiB) << "no intermediates: a library workspace only";
  EXPECT_EQ(fit.need_bytes, fit.judge_bytes + kCandidateCopies * 64 * kMiB);
  // The judge's reference cache (1 GiB by default) is the judge's share too.
  EXPECT_EQ(fit.reference_cache_bytes, kGiB);
  EXPECT_EQ(fit.candidate_bytes, (lane_.task_bytes() - fit.judge_bytes - kGiB) / kCandidateCopies);
  // The reference alone leaves no candidate share to give.
  EXPECT_EQ(check_task_fit(add_task(n), JudgeWork::kReferenceCheck, env::EvalOptions{}, *device_).candidate_bytes, 0u);
}

TEST_F(LaneTaskFit, ATaskTooLargeForALaneSaysWhatItNeedsWhatALaneHasAndTheKey) {
  const int64_t n = int64_t{1} << 29;  // 2 GiB per tensor: 28 GiB for the judge
  const TaskFit fit = check_task_fit(add_task(n), JudgeWork::kEvaluation, env::EvalOptions{}, *device_);
  ASSERT_FALSE(fit.fits());
  EXPECT_EQ(fit.candidate_bytes, 0u);
  EXPECT_EQ(fit.problem,
            "the task is too large for a judge on the cuda backend: judging a candidate needs about 28.1 GiB of "
            "device memory (the base shape: 28.0 GiB for the judge's tensors and 2 x 64 MiB for the candidate's own "
            "intermediates and workspace, in its runner and its profiler runner), and a lane on this " +
                kH100 + " has 16.4 GiB for tasks (" + lane_.describe() +
                "): shrink its shapes, or give each lane more with placement.lane_device_memory_mib (or fewer "
                "placement.lanes_per_device)");
  // Reset's check asks about the reference alone too, against the same share.
  const TaskFit check = check_task_fit(add_task(n), JudgeWork::kReferenceCheck, env::EvalOptions{}, *device_);
  EXPECT_TRUE(check.fits()) << "the reference alone needs 4 tensors and a float64 copy: " << check.problem;
  // 4 GiB per tensor: 20 GiB for the check alone.
  const TaskFit bigger = check_task_fit(add_task(int64_t{1} << 15, int64_t{1} << 15), JudgeWork::kReferenceCheck,
                                        env::EvalOptions{}, *device_);
  ASSERT_FALSE(bigger.fits());
  EXPECT_NE(bigger.problem.find("checking its reference needs about 20.0 GiB of device memory (the base shape)"),
            std::string::npos)
      << bigger.problem;
  EXPECT_NE(bigger.problem.find("placement.lane_device_memory_mib"), std::string::npos) << bigger.problem;
}

TEST_F(LaneTaskFit, IntermediatesAreTheCandidatesFloorInEachOfItsRunners) {
  // y = (a + b) * b: the sum is an intermediate an op-by-op candidate keeps.
  const int64_t n = int64_t{1} << 26;
  const TaskSpec task = testing::task_from_json(R"({"id": "t/chain", "inputs": [
      {"name": "a", "shape": [)" + std::to_string(n) +
                                                R"(], "dtype": "float32"},
      {"name": "b", "shape": [)" + std::to_string(n) +
                                                R"(], "dtype": "float32"}],
    "nodes": [{"op": "add", "in": ["a", "b"], "out": "s"}, {"op": "mul", "in": ["s", "b"], "out": "y"}],
    "outputs": ["y"]})");
  const TaskFit fit = check_task_fit(task, JudgeWork::kEvaluation, env::EvalOptions{}, *device_);
  ASSERT_TRUE(fit.fits()) << fit.problem;
  EXPECT_EQ(fit.candidate_floor_bytes, 4 * static_cast<uint64_t>(n) + 64 * kMiB);
  EXPECT_EQ(fit.need_bytes, fit.judge_bytes + kCandidateCopies * fit.candidate_floor_bytes);
}

// The reference cache (reference_cache.h) keeps at most half of what the
// task leaves of the limit, so that it never makes a task not fit and never
// takes what a candidate's floor needs; 0 turns it off.
TEST_F(LaneTaskFit, TheReferenceCacheKeepsAtMostHalfOfWhatTheTaskLeaves) {
  env::EvalOptions o;
  o.reference_cache_bytes = 64 * kGiB;
  const TaskFit roomy = check_task_fit(add_task(int64_t{1} << 26), JudgeWork::kEvaluation, o, *device_);
  ASSERT_TRUE(roomy.fits()) << roomy.problem;
  EXPECT_EQ(roomy.reference_cache_bytes, (roomy.limit_bytes - roomy.need_bytes) / 2);
  EXPECT_GE(roomy.candidate_bytes, roomy.candidate_floor_bytes);
  EXPECT_EQ(roomy.candidate_bytes,
            (lane_.task_bytes() - roomy.judge_bytes - roomy.reference_cache_bytes) / kCandidateCopies);
  // A task that just fits leaves nothing to keep, and still fits (under the
  // request's own limit, without a lane, the need is the judge's tensors).
  o.judge_memory_limit_bytes = roomy.judge_bytes;
  const TaskFit tight = check_task_fit(add_task(int64_t{1} << 26), JudgeWork::kEvaluation, o, *device_);
  ASSERT_TRUE(tight.fits()) << tight.problem;
  EXPECT_EQ(tight.reference_cache_bytes, 0u);
  o.judge_memory_limit_bytes = 0;
  o.reference_cache_bytes = 0;
  EXPECT_EQ(check_task_fit(add_task(int64_t{1} << 26), JudgeWork::kEvaluation, o, *device_).reference_cache_bytes, 0u);
  // The reference's own work bounds it as well (a reset's check of a huge task).
  o.reference_cache_bytes = 64 * kGiB;
  const TaskFit check = check_task_fit(add_task(int64_t{1} << 26), JudgeWork::kReferenceCheck, o, *device_);
  EXPECT_EQ(check.reference_cache_bytes, (check.limit_bytes - check.need_bytes) / 2);
}

TEST_F(LaneTaskFit, TheRequestsOwnLimitWinsOverTheLane) {
  env::EvalOptions o;
  o.judge_memory_limit_bytes = kGiB;
  const TaskFit fit = check_task_fit(add_task(int64_t{1} << 26), JudgeWork::kEvaluation, o, *device_);
  ASSERT_FALSE(fit.fits());
  EXPECT_EQ(fit.limit_bytes, kGiB);
  EXPECT_NE(fit.problem.find("(judge_memory_limit_bytes)"), std::string::npos) << fit.problem;
  EXPECT_EQ(fit.problem.find("placement."), std::string::npos) << fit.problem;
}

}  // namespace
}  // namespace kforge::judge
