// The device pool on the CPU backend (kforge/env/device_pool.h): two slots
// share the work; a slot made to fail by real faults (its judge SIGKILLed
// over and over, its tools made unusable) is taken out and its work retried
// on the other, every result arriving exactly once; the last slot is never
// taken out; timed references are served from the baseline cache.
#include "kforge/env/device_pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "candidates.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "test_support.h"

namespace kforge::env {
namespace {

namespace cand = testing::candidates;
namespace fs = std::filesystem;

EvalRequest verify_request(const std::string& source, int64_t n = 256) {
  EvalRequest req;
  req.task = testing::elementwise_chain_task(n);
  req.artifact = testing::artifact_for(testing::compile_candidate(source));
  req.verify = true;
  req.options = testing::quick_options();
  return req;
}

ExecutorConfig two_slots() {
  ExecutorConfig c;
  c.backend = BackendKind::kCpu;
  c.cpu_slots = 2;
  c.max_system_errors = 2;
  return c;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path make_temp_dir(const char* prefix) {
  std::string pattern = (fs::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
  return pattern;
}

int completed_total(const json& status) {
  int n = 0;
  for (const auto& d : status["devices"]) n += d["completed"].get<int>();
  return n;
}

// SIGKILLs every judge the given lane starts, until stopped.
class JudgeKiller {
 public:
  JudgeKiller(DevicePool* pool, size_t lane) {
    thread_ = std::thread([this, pool, lane] {
      while (!stop_) {
        const int pid = pool->lanes()[lane].judge_pid;
        if (pid > 0 && ::kill(pid, SIGKILL) == 0) ++kills_;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~JudgeKiller() {
    stop_ = true;
    thread_.join();
  }
  int kills() const { return kills_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> kills_{0};
  std::thread thread_;
};

TEST(DevicePoolTest, TwoCpuSlotsShareTheWork) {
  auto pool = make_device_pool(two_slots());
  ASSERT_FALSE(pool->device_name().empty());
  const std::vector<LaneStatus> lanes = pool->lanes();
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_GT(lanes[0].judge_pid, 0);
  EXPECT_GT(lanes[1].judge_pid, 0);
  EXPECT_NE(lanes[0].judge_pid, lanes[1].judge_pid);
  // Slots are pinned one per core when the process may use two cores.
  if (std::thread::hardware_concurrency() >= 2 && lanes[0].cpu >= 0) {
    for (const auto& lane : lanes) {
      const std::string status = read_file("/proc/" + std::to_string(lane.judge_pid) + "/status");
      EXPECT_NE(status.find("Cpus_allowed_list:\t" + std::to_string(lane.cpu) + "\n"), std::string::npos)
          << "judge " << lane.judge_pid << " is not pinned to core " << lane.cpu;
    }
    EXPECT_NE(lanes[0].cpu, lanes[1].cpu);
  }

  std::vector<std::future<EvalReport>> pending;
  for (int i = 0; i < 8; ++i) {
    pending.push_back(pool->submit(verify_request(i % 4 == 3 ? cand::kChainNoRelu : cand::kChainCorrect)));
  }
  for (int i = 0; i < 8; ++i) {
    const EvalReport r = pending[static_cast<size_t>(i)].get();
    EXPECT_EQ(r.outcome, i % 4 == 3 ? Outcome::kWrong : Outcome::kCorrect) << i << ": " << r.summary;
  }
  const json status = pool->status();
  ASSERT_EQ(status["devices"].size(), 2u);
  EXPECT_GT(status["devices"][0]["completed"].get<int>(), 0) << status.dump();
  EXPECT_GT(status["devices"][1]["completed"].get<int>(), 0) << status.dump();
  EXPECT_EQ(completed_total(status), 8);
  EXPECT_EQ(status["retries"], 0);

  const json health = pool->health();
  ASSERT_EQ(health["lanes"].size(), 2u) << health.dump();
  for (const auto& lane : health["lanes"]) {
    EXPECT_FALSE(lane.contains("error")) << lane.dump();
    EXPECT_EQ(lane["memfds"], 0);
  }
}

TEST(DevicePoolTest, ASlotWhoseJudgeKeepsDyingIsTakenOutAndItsWorkRetried) {
  auto pool = make_device_pool(two_slots());
  ASSERT_FALSE(pool->device_name().empty());
  std::vector<std::future<EvalReport>> pending;
  int kills = 0;
  {
    JudgeKiller killer(pool.get(), 1);
    for (int i = 0; i < 12; ++i) pending.push_back(pool->submit(verify_request(cand::kChainCorrect)));
    for (auto& f : pending) {
      const EvalReport r = f.get();
      // A judge lost under a request is the lane's fault, never the
      // candidate's: retried on the other slot, it is judged there.
      EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
    }
    kills = killer.kills();
  }
  EXPECT_GE(kills, 1);
  const json status = pool->status();
  EXPECT_TRUE(status["devices"][0]["in_service"].get<bool>()) << status.dump();
  EXPECT_FALSE(status["devices"][1]["in_service"].get<bool>()) << status.dump();
  EXPECT_NE(status["devices"][1].value("out_reason", "").find("system errors in a row"), std::string::npos)
      << status.dump();
  EXPECT_GE(status["retries"].get<int>(), 1) << status.dump();
  EXPECT_EQ(completed_total(status), 12) << "every request completes exactly once: " << status.dump();
  EXPECT_EQ(pool->devices_in_service(), 1);

  // The pool carries on with the remaining slot, and says which one is out.
  const EvalReport after = pool->submit(verify_request(cand::kChainNoRelu)).get();
  EXPECT_EQ(after.outcome, Outcome::kWrong) << after.summary;
  const json health = pool->health();
  ASSERT_EQ(health["lanes"].size(), 2u);
  EXPECT_NE(health["lanes"][1].value("error", "").find("out of service"), std::string::npos) << health.dump();
}

TEST(DevicePoolTest, ASlotThatCannotStartItsJudgeIsTakenOut) {
  // Tools of our own, so that they can be broken while the pool runs.
  const fs::path tools = make_temp_dir("kforge-pool-tools");
  const fs::path bin = fs::path(KFORGE_BINARY_DIR) / "bin";
  fs::copy_file(bin / "kforge-judge", tools / "kforge-judge");
  fs::copy_file(bin / "kforge-runner", tools / "kforge-runner");
  ExecutorConfig config = two_slots();
  config.tools_dir = tools;
  {
    auto pool = make_device_pool(config);
    ASSERT_FALSE(pool->device_name().empty());
    EXPECT_EQ(pool->submit(verify_request(cand::kChainCorrect)).get().outcome, Outcome::kCorrect);
    // A judge binary that no longer starts: running judges are unaffected,
    // a new one cannot come up.
    fs::rename(tools / "kforge-judge", tools / "kforge-judge.real");
    {
      std::ofstream script(tools / "kforge-judge");
      script << "#!/bin/sh\necho 'kforge-judge: this installation is broken' >&2\nexit 1\n";
    }
    ::chmod((tools / "kforge-judge").c_str(), 0755);
    const int victim = pool->lanes()[1].judge_pid;
    ASSERT_GT(victim, 0);
    ASSERT_EQ(::kill(victim, SIGKILL), 0);

    std::vector<std::future<EvalReport>> pending;
    for (int i = 0; i < 8; ++i) pending.push_back(pool->submit(verify_request(cand::kChainCorrect)));
    for (auto& f : pending) {
      const EvalReport r = f.get();
      EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
    }
    const json status = pool->status();
    EXPECT_TRUE(status["devices"][0]["in_service"].get<bool>()) << status.dump();
    EXPECT_FALSE(status["devices"][1]["in_service"].get<bool>()) << status.dump();
    EXPECT_EQ(completed_total(status), 9) << status.dump();
  }
  kforge::remove_tree(tools);
}

TEST(DevicePoolTest, TheLastDeviceInServiceIsNeverTakenOut) {
  ExecutorConfig config;
  config.backend = BackendKind::kCpu;
  config.max_system_errors = 1;
  auto pool = make_device_pool(config);
  ASSERT_FALSE(pool->device_name().empty());
  int previous = 0;
  for (int round = 0; round < 2; ++round) {
    EvalRequest req = verify_request(cand::kHang);
    req.options.call_timeout_ms = 60000;
    std::future<EvalReport> pending = pool->submit(req);
    // The judge of this round (a new one after the first), then into the
    // hanging call. Wherever the judge is in the request when it dies, the
    // request fails with a system error and nothing is retried (there is
    // nowhere to go).
    int judge = 0;
    for (int i = 0; i < 3000 && (judge <= 0 || judge == previous); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      judge = pool->lanes()[0].judge_pid;
    }
    ASSERT_GT(judge, 0);
    previous = judge;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_EQ(::kill(judge, SIGKILL), 0);
    const EvalReport r = pending.get();
    EXPECT_EQ(r.outcome, Outcome::kNotRun) << r.summary;
    EXPECT_NE(r.summary.find("system error"), std::string::npos) << r.summary;
  }
  EXPECT_EQ(pool->devices_in_service(), 1);
  EXPECT_EQ(pool->submit(verify_request(cand::kChainCorrect)).get().outcome, Outcome::kCorrect);
  EXPECT_EQ(pool->status()["devices"][0]["system_errors_in_a_row"], 0);
}

TEST(DevicePoolTest, TimedReferencesComeFromTheBaselineCache) {
  const fs::path cache = make_temp_dir("kforge-baselines");
  ExecutorConfig config;
  config.backend = BackendKind::kCpu;
  config.baseline_cache_dir = cache;
  {
    auto pool = make_device_pool(config);
    ReferenceRequest req;
    req.task = testing::elementwise_chain_task(4096);
    req.check = false;
    req.time = true;
    req.options = testing::quick_options();
    const ReferenceReport first = pool->submit_reference(req).get();
    ASSERT_TRUE(first.ok()) << first.problem;
    ASSERT_TRUE(first.timing.has_value());
    EXPECT_FALSE((*first.timing)["cache"]["hit"].get<bool>());
    const ReferenceReport second = pool->submit_reference(req).get();
    ASSERT_TRUE(second.ok()) << second.problem;
    EXPECT_TRUE((*second.timing)["cache"]["hit"].get<bool>());
    EXPECT_EQ((*second.timing)["median_ms"], (*first.timing)["median_ms"]);
    EXPECT_EQ(pool->health()["reference_requests"], 1) << "the second one never reached the judge";

    // Other timing options are another baseline.
    req.options.min_samples = 6;
    const ReferenceReport other = pool->submit_reference(req).get();
    ASSERT_TRUE(other.ok()) << other.problem;
    EXPECT_FALSE((*other.timing)["cache"]["hit"].get<bool>());
    EXPECT_EQ(pool->health()["reference_requests"], 2);
  }
  {
    // A new pool (a new process, in real use) finds it on disk.
    auto pool = make_device_pool(config);
    ReferenceRequest req;
    req.task = testing::elementwise_chain_task(4096);
    req.check = false;
    req.time = true;
    req.options = testing::quick_options();
    const ReferenceReport again = pool->submit_reference(req).get();
    ASSERT_TRUE(again.ok()) << again.problem;
    EXPECT_TRUE((*again.timing)["cache"]["hit"].get<bool>());
  }
  // A damaged entry is a miss, never an error.
  for (const auto& e : fs::directory_iterator(cache)) std::ofstream(e.path()) << "{not json";
  {
    auto pool = make_device_pool(config);
    ReferenceRequest req;
    req.task = testing::elementwise_chain_task(4096);
    req.check = false;
    req.time = true;
    req.options = testing::quick_options();
    const ReferenceReport fresh = pool->submit_reference(req).get();
    ASSERT_TRUE(fresh.ok()) << fresh.problem;
    EXPECT_FALSE((*fresh.timing)["cache"]["hit"].get<bool>());
  }
  kforge::remove_tree(cache);
}

// The runners' hardware queues: the config's when set, else the operator's
// $KFORGE_RUNNER_CUDA_CONNECTIONS, else one queue; a bad variable is every
// CUDA request's clear system error, naming it.
TEST(DevicePoolTest, RunnerCudaConnectionsComeFromTheConfigThenTheEnvironment) {
  ::unsetenv("KFORGE_RUNNER_CUDA_CONNECTIONS");
  ExecutorConfig config;
  EXPECT_EQ(resolved_runner_cuda_connections(config), 1);
  ::setenv("KFORGE_RUNNER_CUDA_CONNECTIONS", "8", 1);
  EXPECT_EQ(resolved_runner_cuda_connections(config), 8);
  ::setenv("KFORGE_RUNNER_CUDA_CONNECTIONS", "0", 1);
  EXPECT_EQ(resolved_runner_cuda_connections(config), 0) << "the driver's own default, by the operator's word";
  config.runner_cuda_connections = 4;
  EXPECT_EQ(resolved_runner_cuda_connections(config), 4) << "the config wins";
  config.runner_cuda_connections = 0;
  for (const char* bad : {"33", "8x", "-1", "100000000000", "x"}) {
    ::setenv("KFORGE_RUNNER_CUDA_CONNECTIONS", bad, 1);
    try {
      resolved_runner_cuda_connections(config);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("KFORGE_RUNNER_CUDA_CONNECTIONS is \"" + std::string(bad) +
                                           "\": give a number of hardware queues from 1 to 32"),
                std::string::npos)
          << e.what();
    }
  }
  config.backend = BackendKind::kCuda;
  auto pool = make_device_pool(config);
  const EvalReport r = pool->submit(verify_request(cand::kChainCorrect)).get();
  EXPECT_EQ(r.outcome, Outcome::kNotRun);
  EXPECT_NE(r.summary.find("KFORGE_RUNNER_CUDA_CONNECTIONS is"), std::string::npos) << r.summary;
  ::unsetenv("KFORGE_RUNNER_CUDA_CONNECTIONS");
}

TEST(DevicePoolTest, AllDevicesFollowsCudaVisibleDevices) {
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string keep = saved ? saved : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "3,5,GPU-1234", 1);
  EXPECT_EQ(visible_gpu_indices(), (std::vector<int>{0, 1, 2}));
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_TRUE(visible_gpu_indices().empty());
  ::setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
  EXPECT_TRUE(visible_gpu_indices().empty());
  if (saved) {
    ::setenv("CUDA_VISIBLE_DEVICES", keep.c_str(), 1);
  } else {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }

  // With none visible, every request says so instead of hanging.
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  ExecutorConfig config;
  config.backend = BackendKind::kCuda;
  config.all_devices = true;
  auto pool = make_device_pool(config);
  const EvalReport r = pool->submit(verify_request(cand::kChainCorrect)).get();
  EXPECT_EQ(r.outcome, Outcome::kNotRun);
  EXPECT_NE(r.summary.find("found no GPU"), std::string::npos) << r.summary;
  if (saved) {
    ::setenv("CUDA_VISIBLE_DEVICES", keep.c_str(), 1);
  } else {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

}  // namespace
}  // namespace kforge::env
