// The device pool on a GPU (label gpu; docs/execution.md, "Lanes and the
// device pool"): several lanes on one GPU behind the GPU gate. The test
// process takes the gate itself, through the judges' own lock files, to see
// that a verification waits while the GPU is held exclusively, that
// timing waits while it is shared and that a judge queued for the gate is not
// timed out at start-up; lanes evaluate concurrently and correctly, also
// with their spare profiler runners started beside timing;
// a GPU that does not exist is taken out of the pool and its work goes to the
// one that does.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_support.h"
#include "judge/gpu_gate.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/device_pool.h"

namespace kforge::env {
namespace {

namespace fs = std::filesystem;
using testing::compile_cuda;
using testing::example_source;
using testing::example_task;
using testing::gpu_quick_options;

class CudaPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kforge-cuda-pool-gate-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    gate_dir_ = pattern;
  }
  void TearDown() override { kforge::remove_tree(gate_dir_); }

  ExecutorConfig config(int lanes) const {
    ExecutorConfig c;
    c.backend = BackendKind::kCuda;
    c.lanes_per_device = lanes;
    c.gate_dir = gate_dir_;
    return c;
  }

  // The key the judges used: the stem of the .gpu lock file they created.
  std::string gate_key() const {
    for (const auto& e : fs::directory_iterator(gate_dir_)) {
      if (e.path().extension() == ".gpu") return e.path().stem().string();
    }
    ADD_FAILURE() << "no lock file in " << gate_dir_;
    return "";
  }

  EvalRequest request(bool time) const {
    EvalRequest req;
    req.task = example_task("affine_relu6");
    req.artifact = compile_cuda(example_source("affine_relu6", "fast"), req.task);
    req.verify = true;
    req.time = time;
    req.options = gpu_quick_options();
    return req;
  }

  fs::path gate_dir_;
};

TEST_F(CudaPoolTest, AVerificationWaitsWhileTheGpuIsHeldExclusively) {
  auto pool = make_device_pool(config(2));
  ASSERT_FALSE(pool->device_name().empty());
  const EvalRequest req = request(false);
  // Settle every spare first: a lane holds a share while its spares start.
  ASSERT_EQ(pool->submit(req).get().outcome, Outcome::kCorrect);
  ASSERT_EQ(pool->submit(req).get().outcome, Outcome::kCorrect);

  judge::GpuGate mine(gate_dir_, gate_key());
  mine.exclusive();
  std::future<EvalReport> pending = pool->submit(req);
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(3)), std::future_status::timeout)
      << "a verification ran while the GPU was held exclusively";
  mine.release();
  const EvalReport r = pending.get();
  EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  EXPECT_GT(r.phase_ms.value("gate_wait", 0.0), 1000.0) << r.phase_ms.dump();
}

TEST_F(CudaPoolTest, TimingWaitsWhileAnyoneSharesTheGpu) {
  auto pool = make_device_pool(config(2));
  ASSERT_FALSE(pool->device_name().empty());
  const EvalRequest req = request(true);
  ASSERT_EQ(pool->submit(req).get().outcome, Outcome::kCorrect);

  judge::GpuGate mine(gate_dir_, gate_key());
  mine.shared();
  const auto held = std::chrono::steady_clock::now();
  std::future<EvalReport> pending = pool->submit(req);
  // Verification may proceed beside a reader; timing may not.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the candidate was timed while another process shared the GPU";
  mine.release();
  const double held_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - held).count();
  const EvalReport r = pending.get();
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  EXPECT_TRUE(r.timing.has_value());
  // It waited for the share to go (less its own verification, which overlapped).
  EXPECT_GT(r.phase_ms.value("gate_wait", 0.0), held_ms - r.phase_ms.value("verify", 0.0) - 1000.0)
      << r.phase_ms.dump();
}

// A judge that starts while another process holds the GPU queues for the
// gate before it creates its context (judge_loop.cpp, open_device), and says
// so; that wait is other candidates' timing, not its start-up: with a 4 s
// start-up limit and the gate held for 8 s, it starts and judges.
TEST_F(CudaPoolTest, AJudgeQueuedForTheGateIsNotTimedOutAtStartUp) {
  const EvalRequest req = request(false);
  {
    auto first = make_device_pool(config(1));  // creates the lock files
    ASSERT_FALSE(first->device_name().empty());
  }
  judge::GpuGate mine(gate_dir_, gate_key());
  mine.exclusive();
  ExecutorConfig c = config(1);
  c.judge_startup_timeout_ms = 4000;
  std::future<EvalReport> starting = std::async(std::launch::async, [&] {
    auto pool = make_device_pool(c);
    return pool->submit(req).get();
  });
  EXPECT_EQ(starting.wait_for(std::chrono::seconds(8)), std::future_status::timeout)
      << "the request ended while the GPU was held exclusively (the judge timed out at start-up?)";
  mine.release();
  const EvalReport r = starting.get();
  EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
}

// A request queued for the gate behind another process for longer than the
// executor waits for a report (eval_timeout_ms per lane + 30 s grace) is not
// killed as hung: the judge tells the executor every 2 s that it is queued,
// and the executor moves the deadline by it (judge_loop.cpp, QueueNotices).
// On the H200, with six GPU test binaries at a time, a judge was killed so.
TEST_F(CudaPoolTest, ARequestQueuedBehindAnotherProcessIsNotKilledAsHung) {
  auto pool = make_device_pool(config(1));
  ASSERT_FALSE(pool->device_name().empty());
  EvalRequest req = request(false);
  req.options.eval_timeout_ms = 5000;
  ASSERT_EQ(pool->submit(req).get().outcome, Outcome::kCorrect);  // its spare settled too

  judge::GpuGate mine(gate_dir_, gate_key());
  mine.exclusive();
  std::future<EvalReport> pending = pool->submit(req);
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(40)), std::future_status::timeout)
      << "the request ended while the GPU was held exclusively (killed as hung?)";
  mine.release();
  const EvalReport r = pending.get();
  EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  EXPECT_GT(r.phase_ms.value("gate_wait", 0.0), 35000.0) << r.phase_ms.dump();
}

TEST_F(CudaPoolTest, FourLanesEvaluateCandidatesAtOnce) {
  auto pool = make_device_pool(config(4));
  ASSERT_FALSE(pool->device_name().empty());
  std::set<int> pids;
  for (const auto& lane : pool->lanes()) pids.insert(lane.judge_pid);
  EXPECT_EQ(pids.size(), 4u);
  EXPECT_EQ(pids.count(0), 0u);
  const EvalRequest timed = request(true);
  std::vector<std::future<EvalReport>> pending;
  for (int i = 0; i < 12; ++i) pending.push_back(pool->submit(timed));
  for (auto& f : pending) {
    const EvalReport r = f.get();
    EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
    EXPECT_TRUE(r.phase_ms.contains("gate_wait")) << r.phase_ms.dump();
    ASSERT_TRUE(r.timing && r.timing->speedup) << r.summary;
    EXPECT_GT(*r.timing->speedup, 0.0);
  }
  const json health = pool->health();
  ASSERT_EQ(health["lanes"].size(), 4u);
  for (const auto& lane : health["lanes"]) EXPECT_FALSE(lane.contains("error")) << lane.dump();
}

// By default (judge_loop.h) a spare profiler runner starts like a timing
// runner, neither waited for before a timing nor holding the gate; with
// executor.profiler_spares 2 each judge keeps two. Profiled submits back to
// back on two lanes (each profile after a lane's first runs in a spare that
// started while others were judged) are each attributed to the candidate's
// own kernel, and the judges say which start-up and how many spares they use.
TEST_F(CudaPoolTest, ProfilerSparesStartedBesideTimingServeTheNextProfiles) {
  ExecutorConfig c = config(2);
  c.profiler_spares = 2;
  auto pool = make_device_pool(c);
  ASSERT_FALSE(pool->device_name().empty());
  const json health = pool->health();
  ASSERT_EQ(health["lanes"].size(), 2u) << health.dump();
  for (const auto& lane : health["lanes"]) {
    EXPECT_EQ(lane.value("profiler_start", ""), "beside_timing") << lane.dump();
    EXPECT_EQ(lane.value("profiler_spares", 0), 2) << lane.dump();
  }

  EvalRequest req = request(true);
  req.profile = true;
  req.options.hardware_metrics = false;  // attribution; counters are CudaExecutorTest's
  std::vector<std::future<EvalReport>> pending;
  for (int i = 0; i < 6; ++i) pending.push_back(pool->submit(req));
  for (auto& f : pending) {
    const EvalReport r = f.get();
    ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
    ASSERT_TRUE(r.profile.has_value()) << r.summary;
    const std::string dump = to_json(*r.profile).dump();
    ASSERT_TRUE(r.profile->attribution.is_object()) << dump;
    const json& kernels = r.profile->attribution["kernels"];
    ASSERT_EQ(kernels.size(), 1u) << dump;
    EXPECT_TRUE(kernels[0]["own"].get<bool>()) << dump;
  }
}

TEST_F(CudaPoolTest, AGpuThatDoesNotExistIsTakenOutAndItsWorkGoesToTheOther) {
  ExecutorConfig c = config(1);
  c.devices = {0, 63};
  auto pool = make_device_pool(c);
  ASSERT_FALSE(pool->device_name().empty());
  std::vector<std::future<EvalReport>> pending;
  const EvalRequest req = request(false);
  for (int i = 0; i < 4; ++i) pending.push_back(pool->submit(req));
  for (auto& f : pending) EXPECT_EQ(f.get().outcome, Outcome::kCorrect);
  const json status = pool->status();
  EXPECT_TRUE(status["devices"][0]["in_service"].get<bool>()) << status.dump();
  EXPECT_FALSE(status["devices"][1]["in_service"].get<bool>()) << status.dump();
  EXPECT_NE(status["devices"][1].value("out_reason", "").find("does not exist"), std::string::npos) << status.dump();
  EXPECT_EQ(pool->devices_in_service(), 1);
}

}  // namespace
}  // namespace kforge::env
