// 200 misbehaving candidates in a row through one Executor: every one gets
// the right outcome, and afterwards nothing has leaked (descriptors of this
// process, child processes, the judge's memfds and scratch directories) and
// a correct candidate still verifies.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <future>

#include "candidates.h"
#include "kforge/env/executor.h"
#include "test_support.h"

namespace kforge::env {
namespace {

namespace cand = testing::candidates;

struct Fault {
  const char* source;
  Outcome outcome;
};

// Hangs are cut at this; everything else gets room to fail by itself on a
// loaded machine.
constexpr double kHangTimeoutMs = 250;
constexpr double kCallTimeoutMs = 5000;

TEST(ExecutorLeak, TwoHundredFaultsLeaveNothingBehind) {
  const std::vector<Fault> faults = {
      {cand::kSegfault, Outcome::kCrash},
      {cand::kAbort, Outcome::kCrash},
      {cand::kHang, Outcome::kTimeout},
      {cand::kExit3, Outcome::kCrash},
      {cand::kOutOfBoundsWrite, Outcome::kCrash},
      {cand::kReturnsSeven, Outcome::kRuntimeError},
      {cand::kUsesFopen, Outcome::kRejected},
      {cand::kChainNoRelu, Outcome::kWrong},
      {cand::kChainPointerCache, Outcome::kViolation},
      {cand::kUnboundedAllocation, Outcome::kRuntimeError},
  };
  std::vector<Artifact> artifacts;
  for (const auto& f : faults) artifacts.push_back(testing::artifact_for(testing::compile_candidate(f.source)));
  Artifact correct = testing::artifact_for(testing::compile_candidate(cand::kChainCorrect));

  std::string scratch_template = (std::filesystem::temp_directory_path() / "kforge-leak-XXXXXX").string();
  ASSERT_NE(::mkdtemp(scratch_template.data()), nullptr);
  std::filesystem::path scratch = scratch_template;

  EvalOptions options = testing::quick_options();
  options.memory_limit_bytes = 128ull << 20;
  TaskSpec task = testing::elementwise_chain_task(1024);
  auto request = [&](const Artifact& a, bool hang = false) {
    EvalRequest r;
    r.task = task;
    r.artifact = a;
    r.options = options;
    r.options.call_timeout_ms = hang ? kHangTimeoutMs : kCallTimeoutMs;
    return r;
  };

  {
    ExecutorConfig config;
    config.scratch_dir = scratch;
    auto executor = make_executor(config);
    ASSERT_EQ(executor->submit(request(correct)).get().outcome, Outcome::kCorrect);
    const int fds_before = testing::open_fd_count();
    const int judge = executor->judge_pid();

    constexpr int kTotal = 200, kBatch = 20;
    int mismatched = 0;
    for (int start = 0; start < kTotal; start += kBatch) {
      std::vector<std::pair<size_t, std::future<EvalReport>>> pending;
      for (int i = start; i < start + kBatch; ++i) {
        size_t k = static_cast<size_t>(i) % faults.size();
        pending.emplace_back(k, executor->submit(request(artifacts[k], faults[k].source == cand::kHang)));
      }
      for (auto& [k, future] : pending) {
        EvalReport r = future.get();
        if (r.outcome != faults[k].outcome) {
          ++mismatched;
          ADD_FAILURE() << "fault " << k << ": expected " << outcome_name(faults[k].outcome) << ", got " << r.summary;
        }
      }
    }
    EXPECT_EQ(mismatched, 0);
    EXPECT_EQ(executor->judge_pid(), judge) << "the judge itself should never have died";
    EXPECT_EQ(executor->restarts(), 100);  // segfault, abort, hang, exit and out-of-bounds killed their runners

    json health = executor->health();
    ASSERT_FALSE(health.contains("error")) << health.dump();
    EXPECT_EQ(health["memfds"], 0);
    EXPECT_EQ(health["scratch_entries"], 1);  // the spare runner's directory
    EXPECT_EQ(health["evaluations"], kTotal + 1);
    EXPECT_EQ(testing::open_fd_count(), fds_before);
    std::vector<pid_t> children = testing::children_of(::getpid());
    EXPECT_EQ(children, std::vector<pid_t>{judge});
    EXPECT_LE(testing::children_of(judge).size(), 1u);  // the spare runner only
    // The judge and its spare are the only processes working in our scratch dir.
    EXPECT_LE(testing::processes_mentioning(scratch.string()).size(), 2u);

    EvalReport after = executor->submit(request(correct)).get();
    EXPECT_EQ(after.outcome, Outcome::kCorrect) << after.summary;
  }
  // The Executor is gone: so are its processes, and the scratch dir is empty.
  EXPECT_TRUE(testing::processes_mentioning(scratch.string()).empty());
  EXPECT_TRUE(testing::children_of(::getpid()).empty());
  EXPECT_TRUE(std::filesystem::is_empty(scratch));
  std::filesystem::remove(scratch);  // empty by now
}

}  // namespace
}  // namespace kforge::env
