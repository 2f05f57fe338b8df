// Runner start-up and the judge's spares (judge/runner_process.h,
// judge/runner_pool.h): a runner says `started` once its device is set up; a
// timing runner's replacement starts as soon as a spare is taken and timing
// never waits for it, while a profiler runner's start-up is settled before
// anything is timed. Real runner processes; a slow start is a real `sleep` in
// front of the real runner.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "candidates.h"
#include "forwarding_judge_device.h"
#include "ipc/build_identity.h"
#include "ipc/child_process.h"
#include "ipc/runner_protocol.h"
#include "judge/cpu_judge_device.h"
#include "judge/evaluation.h"
#include "judge/gpu_gate.h"
#include "judge/runner_pool.h"
#include "judge/runner_process.h"
#include "kforge/core/unique_fd.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

namespace fs = std::filesystem;
using ipc::Deadline;
using Status = judge::RunnerReply::Status;

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
  judge::RunnerReply r = runner->await_started(Deadline::after_ms(10000));
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_TRUE(runner->started());
  // Read once: the second wait returns at once, and the protocol carries on.
  EXPECT_TRUE(runner->await_started(Deadline::after_ms(1)).ok());
  EXPECT_TRUE(runner->alive());
}

// Its `started` names its protocol and build (ipc/build_identity.h);
// a judge does not use a runner of another protocol. The runner claims one
// through the test-only variable, which changes nothing but the number.
TEST(RunnerStartTest, ARunnerOfAnotherProtocolIsRefusedWhenItSaysStarted) {
  ::setenv(ipc::kTestOnlyRunnerProtocolVariable, "9", 1);
  auto runner = RunnerProcess::spawn(config_for(kRunner, "protocol"));
  ::unsetenv(ipc::kTestOnlyRunnerProtocolVariable);
  judge::RunnerReply r = runner->await_started(Deadline::after_ms(10000));
  EXPECT_EQ(r.status, Status::kError);
  EXPECT_FALSE(r.candidate_ran);
  EXPECT_EQ(r.detail, "the runner " + kRunner.string() + " is another build: " + ipc::build_id() +
                          ", speaking runner protocol 9, while this one is " + ipc::build_id() +
                          ", speaking runner protocol " + std::to_string(ipc::kRunnerProtocolVersion) +
                          ": build kforge-runner together with kforge-judge, or point executor.tools_dir "
                          "(KFORGE_TOOLS_DIR) at a directory with both from one build");
  EXPECT_FALSE(runner->started());
  EXPECT_FALSE(runner->alive()) << "killed and reaped";
}

TEST(RunnerStartTest, ARunnerThatCannotStartIsReportedAsCrashed) {
  judge::RunnerProcess::Config config = config_for(kRunner, "nope");
  config.backend = "nope";  // make_runner_device throws: usage exit before `started`
  auto runner = RunnerProcess::spawn(config);
  judge::RunnerReply r = runner->await_started(Deadline::after_ms(10000));
  EXPECT_EQ(r.status, Status::kCrashed);
  EXPECT_NE(r.detail.find("158"), std::string::npos) << r.detail;
  EXPECT_FALSE(runner->alive());
}

// The runner's hardware queues (ExecutorConfig::runner_cuda_connections) are
// a number the driver accepts, 1 to 32; anything else is a usage error before
// any device exists, and says so.
TEST(RunnerStartTest, CudaConnectionsOutsideOneToThirtyTwoAreAUsageError) {
  const fs::path dir = scratch_root("connections");
  fs::create_directories(dir);
  for (const std::string bad : {"0", "33", "8x", ""}) {
    const fs::path log = dir / "stderr.log";
    UniqueFd err(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ipc::ChildProcess child = ipc::ChildProcess::spawn({kRunner,
                                                        {"--backend", "cuda", "--scratch", dir.string(), "--parent-pid",
                                                         std::to_string(::getpid()), "--cuda-connections", bad},
                                                        {{2, err.get()}}});
    const std::optional<int> status = child.wait_for(10000);
    ASSERT_TRUE(status.has_value()) << bad;
    EXPECT_EQ(ipc::describe_exit_status(*status), "exit code " + std::to_string(ipc::runner_protocol::kUsageExitCode))
        << bad;
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("--cuda-connections takes 1 to 32"), std::string::npos) << bad << ": " << text;
  }
}

// kforge-runner that sleeps `seconds` first only while `<dir>/slow` exists:
// the test decides which spares start slowly.
fs::path switchable_runner(const std::string& name, double seconds) {
  const fs::path dir = scratch_root(name);
  fs::create_directories(dir);
  const fs::path script = dir / "switchable-runner.sh";
  std::ofstream(script) << "#!/bin/sh\nif [ -e '" << (dir / "slow").string() << "' ]; then sleep " << seconds
                        << "; fi\nexec '" << kRunner.string() << "' \"$@\"\n";
  ::chmod(script.c_str(), 0755);
  return script;
}

// Reads `started` until no spare is starting (at most `limit_ms`).
void wait_until_started(RunnerPool* pool, double limit_ms) {
  const Deadline deadline = Deadline::after_ms(limit_ms);
  while (pool->starting() > 0 && !deadline.expired()) {
    pool->collect_started();
    ::usleep(10000);
  }
}

env::EvalRequest timed_request() {
  env::EvalRequest request;
  request.task = testing::elementwise_chain_task(1 << 12);
  request.artifact = testing::artifact_for(testing::compile_candidate(testing::candidates::kChainCorrect));
  request.verify = true;
  request.time = true;
  request.options = testing::quick_options();
  return request;
}

TEST(RunnerStartTest, SettleKillsASpareThatDoesNotStartByTheDeadline) {
  RunnerPool pool(config_for(slow_runner("late", 30), "late"), 1, RunnerPool::StartUp::kOutsideTiming);
  const std::vector<pid_t> before = testing::children_of(::getpid());
  pool.refill();
  ASSERT_EQ(testing::children_of(::getpid()).size(), before.size() + 1);
  const double waited = pool.settle(Deadline::after_ms(300));
  EXPECT_GE(waited, 250);
  EXPECT_LT(waited, 10000);
  // Killed and reaped: it runs no more start-up work next to a measurement.
  EXPECT_EQ(testing::children_of(::getpid()).size(), before.size());
}

// A timing runner's start-up may run beside a timed call (runner_pool.h:
// measured on an H100, it does not move a timed kernel's median): the
// replacement of the spare a candidate takes starts at once, and the
// candidate is timed while it is still starting, with no settle wait.
TEST(RunnerStartTest, TimingDoesNotWaitForATimingRunnerStillStarting) {
  auto device = make_cpu_judge_device();
  const fs::path runner = switchable_runner("beside", 30);
  RunnerPool pool(config_for(runner, "beside"), 2);
  pool.refill();
  wait_until_started(&pool, 20000);
  ASSERT_EQ(pool.starting(), 0);
  // From now on every new runner needs 30 s to start.
  std::ofstream(scratch_root("beside") / "slow") << "1";
  EvaluationCounters counters;
  const env::EvalRequest request = timed_request();

  const env::EvalReport report = evaluate(request, device.get(), &pool, &counters);
  ASSERT_EQ(report.outcome, Outcome::kCorrect) << report.summary;
  ASSERT_TRUE(report.phase_ms.contains("time")) << report.phase_ms.dump();
  ASSERT_TRUE(report.timing.has_value());
  // Timed while the replacement, started when the candidate took its spare,
  // was (and still is) starting: no wait for it anywhere.
  EXPECT_EQ(pool.spares(), 2);
  EXPECT_EQ(pool.starting(), 1);
  EXPECT_LT(report.phase_ms.value("settle", 0.0), 1000) << report.phase_ms.dump();
  EXPECT_LT(report.phase_ms.value("runner_start", 0.0), 1000) << report.phase_ms.dump();
}

// A profiler runner's start-up (CUPTI) is not covered by that measurement:
// the judge waits for it before it times anything.
TEST(RunnerStartTest, TimingWaitsForAProfilerRunnerStillStarting) {
  auto device = make_cpu_judge_device();
  RunnerPool pool(config_for(kRunner, "timing"), 1);
  pool.refill();
  RunnerPool profilers(config_for(slow_runner("profiler", 2), "profiler"), 1, RunnerPool::StartUp::kOutsideTiming);
  profilers.refill();
  EvaluationCounters counters;
  const env::EvalReport report = evaluate(timed_request(), device.get(), &pool, &counters, &profilers);
  ASSERT_EQ(report.outcome, Outcome::kCorrect) << report.summary;
  ASSERT_TRUE(report.phase_ms.contains("time")) << report.phase_ms.dump();
  EXPECT_GE(report.phase_ms.value("settle", 0.0), 500) << report.phase_ms.dump();
  EXPECT_EQ(profilers.starting(), 0) << "settled before the timing";
}

TEST(RunnerStartTest, TakingATimingRunnerStartsItsReplacementAtOnce) {
  RunnerPool pool(config_for(kRunner, "take"), 2);
  pool.refill();
  ASSERT_EQ(pool.spares(), 2);
  RunnerPool::Taken taken = pool.take(Deadline::after_ms(10000));
  ASSERT_TRUE(taken.started.ok()) << taken.started.detail;
  EXPECT_TRUE(taken.runner->started());
  EXPECT_EQ(pool.spares(), 2);
  EXPECT_EQ(pool.settle(Deadline::after_ms(10000)), 0) << "nothing to settle for timing runners";
}

TEST(RunnerStartTest, TakingAProfilerRunnerStartsNoReplacement) {
  RunnerPool pool(config_for(kRunner, "takeprofiler"), 2, RunnerPool::StartUp::kOutsideTiming);
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

// Only the timing window is exclusive (judge/evaluation.cpp): the wait for
// the gate is booked by the part that waited, and once the candidate is timed
// the judge holds a share again (its report overlaps other judges' work but
// never their timing) until it retires the runner, which holds nothing. A second
// gate object opens the lock files anew, so it contends as another judge would.
TEST(RunnerStartTest, TheGateIsExclusiveOnlyForTheTimingAndItsWaitsAreBookedByPart) {
  const env::EvalRequest request = timed_request();  // compiled before the gate is taken
  const fs::path dir = scratch_root("gate") / "gate";
  judge::GpuGate gate(dir, "gpu-test");
  judge::GpuGate other(dir, "gpu-test");
  auto device = make_cpu_judge_device();
  RunnerPool pool(config_for(kRunner, "gate"), 1);
  pool.refill();
  EvaluationCounters counters;
  other.exclusive();
  std::thread releaser([&other] {
    ::usleep(400 * 1000);
    other.release();
  });
  const env::EvalReport report = evaluate(request, device.get(), &pool, &counters, nullptr, &gate);
  releaser.join();
  ASSERT_EQ(report.outcome, Outcome::kCorrect) << report.summary;
  EXPECT_GE(report.phase_ms.value("gate_wait_load", 0.0), 300) << report.phase_ms.dump();
  ASSERT_TRUE(report.phase_ms.contains("gate_wait_time")) << report.phase_ms.dump();
  EXPECT_DOUBLE_EQ(report.phase_ms.value("gate_wait", -1.0),
                   report.phase_ms.value("gate_wait_load", 0.0) + report.phase_ms.value("gate_wait_time", 0.0));
  // The used runner was retired without the gate (its teardown does not
  // move another judge's timing): the other judge may time at once.
  EXPECT_EQ(gate.hold(), judge::GpuGate::Hold::kNone);
  EXPECT_LT(other.exclusive(), 100.0);
  other.release();
}

// The judge's context check after a request runs work on its device (on the
// GPU a cache flush through its context): it is GPU work beside any other
// judge's timing unless a share of the gate covers it. A device that looks at
// the gate's lock file while it is asked says whether a writer could have
// taken the GPU then: it must not, for a correct candidate and for one that
// failed verification (whose evaluation ends before timing).
class GateWatchingDevice final : public testing::ForwardingJudgeDevice {
 public:
  GateWatchingDevice(std::unique_ptr<JudgeDevice> inner, fs::path lock_file)
      : ForwardingJudgeDevice(std::move(inner)), lock_file_(std::move(lock_file)) {}

  std::string context_error() override {
    ++checks;
    UniqueFd fd(::open(lock_file_.c_str(), O_RDWR | O_CLOEXEC));
    if (fd && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      ++checks_a_writer_could_overlap;
      ::flock(fd.get(), LOCK_UN);
    }
    return "";
  }

  int checks = 0;
  int checks_a_writer_could_overlap = 0;

 private:
  fs::path lock_file_;
};

TEST(RunnerStartTest, TheJudgesContextCheckIsUnderAShareOfTheGate) {
  env::EvalRequest correct = timed_request();
  env::EvalRequest wrong = timed_request();
  wrong.artifact = testing::artifact_for(testing::compile_candidate(testing::candidates::kChainNoRelu));
  const fs::path dir = scratch_root("gatecheck") / "gate";
  judge::GpuGate gate(dir, "gpu-test");
  GateWatchingDevice device(make_cpu_judge_device(), dir / "gpu-test.gpu");
  RunnerPool pool(config_for(kRunner, "gatecheck"), 1);
  pool.refill();
  EvaluationCounters counters;
  for (const env::EvalRequest* request : {&correct, &wrong}) {
    std::string context_error = "not checked";
    const env::EvalReport report =
        evaluate(*request, &device, &pool, &counters, nullptr, &gate, nullptr, &context_error);
    EXPECT_EQ(report.outcome, request == &correct ? Outcome::kCorrect : Outcome::kWrong) << report.summary;
    EXPECT_EQ(context_error, "");
    // Released on return, before the used runner's retirement.
    EXPECT_EQ(gate.hold(), judge::GpuGate::Hold::kNone);
  }
  EXPECT_EQ(device.checks, 2);
  EXPECT_EQ(device.checks_a_writer_could_overlap, 0);
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
  judge::RunnerProcess::Config config = config_for(kRunner, "nostart");
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
