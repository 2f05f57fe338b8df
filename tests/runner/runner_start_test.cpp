// Runner start-up and the judge's spares (exec_common/runner_process.h,
// judge/runner_pool.h): a runner says `started` once its device is set up,
// and nothing is timed while a spare is still starting. Real runner
// processes; a slow start is a real `sleep` in front of the real runner.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "candidates.h"
#include "exec_common/build_identity.h"
#include "exec_common/runner_process.h"
#include "judge/cpu_judge_device.h"
#include "judge/evaluation.h"
#include "judge/runner_pool.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

namespace fs = std::filesystem;
using exec::Deadline;
using exec::RunnerProcess;
using Status = exec::RunnerReply::Status;

const fs::path kRunner = fs::path(KFORGE_BINARY_DIR) / "bin" / "kforge-runner";

fs::path scratch_root(const std::string& name) {
  return fs::temp_directory_path() / ("kforge-start-" + name + "-" + std::to_string(::getpid()));
}

// kforge-runner behind a `sleep`: a runner whose start-up takes `seconds`,
// as a CUDA runner's context and CUPTI set-up do.
fs::path slow_runner(const std::string& name, double seconds) {
  const fs::path dir = scratch_root(name);
  fs::create_directories(dir);
  const fs::path script = dir / "slow-runner.sh";
  std::ofstream(script) << "#!/bin/sh\nsleep " << seconds << "\nexec '" << kRunner.string() << "' \"$@\"\n";
  ::chmod(script.c_str(), 0755);
  return script;
}

RunnerProcess::Config config_for(const fs::path& executable, const std::string& name) {
  RunnerProcess::Config config;
  config.executable = executable;
  config.scratch_root = scratch_root(name);
  return config;
}

TEST(RunnerStartTest, ARunnerSaysStartedOnceItsDeviceIsSetUp) {
  auto runner = RunnerProcess::spawn(config_for(kRunner, "started"));
  // Only reading the message sets it: nothing was read yet.
  EXPECT_FALSE(runner->started());
  exec::RunnerReply r = runner->await_started(Deadline::after_ms(10000));
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_TRUE(runner->started());
  // Read once: the second wait returns at once, and the protocol carries on.
  EXPECT_TRUE(runner->await_started(Deadline::after_ms(1)).ok());
  EXPECT_TRUE(runner->alive());
}

// Its `started` names its protocol and build (exec_common/build_identity.h);
// a judge does not use a runner of another protocol. The runner claims one
// through the test-only variable, which changes nothing but the number.
TEST(RunnerStartTest, ARunnerOfAnotherProtocolIsRefusedWhenItSaysStarted) {
  ::setenv(exec::kTestOnlyRunnerProtocolVariable, "9", 1);
  auto runner = RunnerProcess::spawn(config_for(kRunner, "protocol"));
  ::unsetenv(exec::kTestOnlyRunnerProtocolVariable);
  exec::RunnerReply r = runner->await_started(Deadline::after_ms(10000));
  EXPECT_EQ(r.status, Status::kError);
  EXPECT_FALSE(r.candidate_ran);
  EXPECT_EQ(r.detail, "the runner " + kRunner.string() + " is another build: " + exec::build_id() +
                          ", speaking runner protocol 9, while this one is " + exec::build_id() +
                          ", speaking runner protocol " + std::to_string(exec::kRunnerProtocolVersion) +
                          ": build kforge-runner together with kforge-judge, or point executor.tools_dir "
                          "(KFORGE_TOOLS_DIR) at a directory with both from one build");
  EXPECT_FALSE(runner->started());
  EXPECT_FALSE(runner->alive()) << "killed and reaped";
}

TEST(RunnerStartTest, ARunnerThatCannotStartIsReportedAsCrashed) {
  exec::RunnerProcess::Config config = config_for(kRunner, "nope");
  config.backend = "nope";  // make_runner_device throws: usage exit before `started`
  auto runner = RunnerProcess::spawn(config);
  exec::RunnerReply r = runner->await_started(Deadline::after_ms(10000));
  EXPECT_EQ(r.status, Status::kCrashed);
  EXPECT_NE(r.detail.find("158"), std::string::npos) << r.detail;
  EXPECT_FALSE(runner->alive());
}

TEST(RunnerStartTest, SettleKillsASpareThatDoesNotStartByTheDeadline) {
  RunnerPool pool(config_for(slow_runner("late", 30), "late"), 1);
  const std::vector<pid_t> before = testing::children_of(::getpid());
  pool.refill();
  ASSERT_EQ(testing::children_of(::getpid()).size(), before.size() + 1);
  const double waited = pool.settle(Deadline::after_ms(300));
  EXPECT_GE(waited, 250);
  EXPECT_LT(waited, 10000);
  // Killed and reaped: it runs no more start-up work next to a measurement.
  EXPECT_EQ(testing::children_of(::getpid()).size(), before.size());
}

// Two evaluations back to back with spares that take 2 s to start: the
// replacement started after the first candidate's timing is still starting
// when the second candidate is ready to be timed, and the judge waits for it.
TEST(RunnerStartTest, TimingWaitsForTheSparesStartedAfterThePreviousTiming) {
  auto device = make_cpu_judge_device();
  RunnerPool pool(config_for(slow_runner("eval", 2), "eval"), 2);
  pool.refill();
  env::EvalRequest request;
  request.task = testing::elementwise_chain_task(1 << 12);
  request.artifact = testing::artifact_for(testing::compile_candidate(testing::candidates::kChainCorrect));
  request.verify = true;
  request.time = true;
  request.options = testing::quick_options();
  EvaluationCounters counters;

  const env::EvalReport first = evaluate(request, device.get(), &pool, &counters);
  ASSERT_EQ(first.outcome, Outcome::kCorrect) << first.summary;
  // Both spares were started together; taking one waited for its start.
  EXPECT_GE(first.phase_ms.value("runner_start", 0.0), 1000) << first.phase_ms.dump();
  EXPECT_EQ(pool.spares(), 2);  // the replacement was started after the timing

  const env::EvalReport second = evaluate(request, device.get(), &pool, &counters);
  ASSERT_EQ(second.outcome, Outcome::kCorrect) << second.summary;
  // The other original spare was ready; the replacement was not.
  EXPECT_LT(second.phase_ms.value("runner_start", 0.0), 1000) << second.phase_ms.dump();
  EXPECT_GE(second.phase_ms.value("settle", 0.0), 500) << second.phase_ms.dump();
  ASSERT_TRUE(second.phase_ms.contains("time")) << second.phase_ms.dump();
}

TEST(RunnerStartTest, TakingASpareStartsNoReplacement) {
  RunnerPool pool(config_for(kRunner, "take"), 2);
  pool.refill();
  ASSERT_EQ(pool.spares(), 2);
  RunnerPool::Taken taken = pool.take(Deadline::after_ms(10000));
  ASSERT_TRUE(taken.started.ok()) << taken.started.detail;
  EXPECT_TRUE(taken.runner->started());
  EXPECT_EQ(pool.spares(), 1);
  pool.refill();
  EXPECT_EQ(pool.spares(), 2);
  EXPECT_GE(pool.settle(Deadline::after_ms(10000)), 0);
}

// A spare that takes longer to start than the candidate may take to load (a
// busy GPU host creating many contexts at once): its start-up is the
// harness's time, waited for up to kStartLimitMs, and the candidate is judged
// as usual. The load limit here is 5 s (max(call_timeout_ms, 5000)); the
// spare needs 8.
TEST(RunnerStartTest, ASlowStartIsNotChargedToTheCandidatesLoadLimit) {
  auto device = make_cpu_judge_device();
  env::EvalRequest request;
  request.task = testing::elementwise_chain_task(1 << 12);
  request.artifact = testing::artifact_for(testing::compile_candidate(testing::candidates::kChainCorrect));
  request.verify = true;
  request.time = false;
  request.options = testing::quick_options();
  request.options.call_timeout_ms = 1000;
  RunnerPool pool(config_for(slow_runner("slowstart", 8), "slowstart"), 1);
  pool.refill();
  EvaluationCounters counters;
  const env::EvalReport report = evaluate(request, device.get(), &pool, &counters);
  // The outcome is what a 5 s load limit could not give; the phase shows
  // where the wait was booked (most of the 8 s, less what ran before the take).
  EXPECT_EQ(report.outcome, Outcome::kCorrect) << report.summary;
  EXPECT_GE(report.phase_ms.value("runner_start", 0.0), 4000) << report.phase_ms.dump();
}

// A runner that never starts is the harness's failure, named as such.
TEST(RunnerStartTest, ARunnerThatCannotStartIsASystemErrorNotTheCandidates) {
  auto device = make_cpu_judge_device();
  exec::RunnerProcess::Config config = config_for(kRunner, "nostart");
  config.backend = "nope";  // exits before `started`, spare and replacement alike
  RunnerPool pool(config, 1);
  pool.refill();
  env::EvalRequest request;
  request.task = testing::elementwise_chain_task(1 << 12);
  request.artifact = testing::artifact_for(testing::compile_candidate(testing::candidates::kChainCorrect));
  request.verify = true;
  request.options = testing::quick_options();
  EvaluationCounters counters;
  const env::EvalReport report = evaluate(request, device.get(), &pool, &counters);
  EXPECT_EQ(report.outcome, Outcome::kNotRun) << report.summary;
  EXPECT_NE(report.summary.find("system error: the runner failed before the candidate was loaded (crashed"),
            std::string::npos)
      << report.summary;
}

}  // namespace
}  // namespace kforge::judge
