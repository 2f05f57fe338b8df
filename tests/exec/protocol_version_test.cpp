// Executor, judge and runner say which build they are (ipc/build_identity.h):
// a judge or a runner of another protocol is refused at start-up with a
// message naming both builds, and a judge setting from the environment that
// has none of its values names the variable. Real processes on the CPU
// backend; the judge and the runner are made to claim another protocol by the
// test-only variables KFORGE_TEST_ONLY_JUDGE_PROTOCOL and
// KFORGE_TEST_ONLY_RUNNER_PROTOCOL, which change nothing but the number they
// announce.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "candidates.h"
#include "ipc/build_identity.h"
#include "kforge/env/executor.h"
#include "test_support.h"

namespace kforge::env {
namespace {

// Sets an environment variable for the scope of one test; the processes the
// executor starts inherit it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

EvalRequest correct_request() {
  EvalRequest req;
  req.task = testing::elementwise_chain_task(256);
  req.artifact = testing::artifact_for(testing::compile_candidate(testing::candidates::kChainCorrect));
  req.verify = true;
  req.options = testing::quick_options();
  return req;
}

// A CPU executor whose judge starts under this process's environment.
std::unique_ptr<Executor> cpu_executor() {
  ExecutorConfig config;
  config.backend = BackendKind::kCpu;
  return make_executor(config);
}

TEST(BuildIdentity, TheBuildIsNamedAndTheTestVariableOnlyChangesTheNumber) {
  EXPECT_EQ(ipc::build_id().rfind("kforge ", 0), 0u) << ipc::build_id();
  EXPECT_EQ(ipc::announced_protocol_version(2, "KFORGE_TEST_ONLY_NOT_SET"), 2);
  {
    ScopedEnv v("KFORGE_TEST_ONLY_SOME_PROTOCOL", "7");
    EXPECT_EQ(ipc::announced_protocol_version(2, "KFORGE_TEST_ONLY_SOME_PROTOCOL"), 7);
  }
  for (const char* junk : {"", "seven", "7x", "99999999999999999999"}) {
    ScopedEnv v("KFORGE_TEST_ONLY_SOME_PROTOCOL", junk);
    EXPECT_EQ(ipc::announced_protocol_version(2, "KFORGE_TEST_ONLY_SOME_PROTOCOL"), 2) << junk;
  }
  EXPECT_EQ(ipc::protocol_mismatch("the judge j", "judge protocol", 2, "b", 2, "fix"), "");
  EXPECT_EQ(ipc::protocol_mismatch("the judge j", "judge protocol", 1, "", 2, "fix it"),
            "the judge j is another build: a build from before protocol versions, speaking judge protocol 1, while "
            "this one is " +
                ipc::build_id() + ", speaking judge protocol 2: fix it");
}

TEST(BuildIdentity, AJudgeOfAnotherProtocolIsRefusedAtStartNamingBothBuilds) {
  ScopedEnv claim(ipc::kTestOnlyJudgeProtocolVariable, "1");
  std::unique_ptr<Executor> executor = cpu_executor();
  const Executor::StartReport start = executor->start_report();
  EXPECT_TRUE(start.device_name.empty());
  const std::string expected_tail = " is another build: " + ipc::build_id() + ", speaking judge protocol 1, while " +
                                    "this one is " + ipc::build_id() +
                                    ", speaking judge protocol 2: build kforge-judge and kforge-runner together with "
                                    "this program, or point executor.tools_dir (KFORGE_TOOLS_DIR) at the ones built "
                                    "with it";
  EXPECT_EQ(start.error.rfind("the judge /", 0), 0u) << start.error;
  EXPECT_NE(start.error.find("kforge-judge" + expected_tail), std::string::npos) << start.error;

  // Every request says so too, and the judge is not started again and again.
  const EvalReport r = executor->submit(correct_request()).get();
  EXPECT_EQ(r.outcome, Outcome::kNotRun);
  EXPECT_EQ(r.summary.rfind("system error: the judge /", 0), 0u) << r.summary;
  EXPECT_NE(r.summary.find(expected_tail), std::string::npos) << r.summary;
  EXPECT_EQ(executor->restarts(), 0);
}

TEST(BuildIdentity, ARunnerOfAnotherProtocolIsASystemErrorBeforeTheCandidateLoads) {
  ScopedEnv claim(ipc::kTestOnlyRunnerProtocolVariable, "7");
  std::unique_ptr<Executor> executor = cpu_executor();
  EXPECT_FALSE(executor->device_name().empty()) << "the judge itself is of this build";
  const EvalReport r = executor->submit(correct_request()).get();
  EXPECT_EQ(r.outcome, Outcome::kNotRun) << r.summary;
  EXPECT_EQ(r.summary.rfind("system error: the runner failed before the candidate was loaded (error: the runner /", 0),
            0u)
      << r.summary;
  EXPECT_NE(r.summary.find("kforge-runner is another build: " + ipc::build_id() +
                           ", speaking runner protocol 7, while this one is " + ipc::build_id() +
                           ", speaking runner protocol 2: build kforge-runner together with kforge-judge"),
            std::string::npos)
      << r.summary;
}

TEST(BuildIdentity, JudgeAndRunnerOfThisBuildWorkTogether) {
  std::unique_ptr<Executor> executor = cpu_executor();
  const EvalReport r = executor->submit(correct_request()).get();
  EXPECT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
}

// The judge's start-up settings from the environment (judge_loop.h): a value
// that is none of a setting's is the judge's start-up error, naming the
// variable and its values; both values start a judge that judges.
TEST(JudgeSettings, AProfilerStartThatIsNeitherIsRefusedAtStartNamingTheVariable) {
  ScopedEnv bad("KFORGE_PROFILER_START", "sideways");
  std::unique_ptr<Executor> executor = cpu_executor();
  const Executor::StartReport start = executor->start_report();
  EXPECT_TRUE(start.device_name.empty());
  EXPECT_NE(start.error.find("KFORGE_PROFILER_START='sideways' is not a profiler start-up: set it to beside_timing "
                             "(the default) or outside_timing, or unset it"),
            std::string::npos)
      << start.error;
  const EvalReport r = executor->submit(correct_request()).get();
  EXPECT_EQ(r.outcome, Outcome::kNotRun);
  EXPECT_NE(r.summary.find("KFORGE_PROFILER_START"), std::string::npos) << r.summary;
}

TEST(JudgeSettings, EitherProfilerStartJudgesAndTheJudgeSaysWhichItUses) {
  for (const char* value : {"outside_timing", "beside_timing"}) {
    ScopedEnv set("KFORGE_PROFILER_START", value);
    std::unique_ptr<Executor> executor = cpu_executor();
    EXPECT_TRUE(executor->start_report().error.empty()) << value << ": " << executor->start_report().error;
    const EvalReport r = executor->submit(correct_request()).get();
    EXPECT_EQ(r.outcome, Outcome::kCorrect) << value << ": " << r.summary;
    EXPECT_EQ(executor->health().value("profiler_start", ""), value);
  }
}

TEST(JudgeSettings, UnsetTheProfilerStartsBesideTimingWithTwoSpares) {
  ScopedEnv start("KFORGE_PROFILER_START", "");
  ScopedEnv spares("KFORGE_PROFILER_SPARES", "");
  std::unique_ptr<Executor> executor = cpu_executor();
  EXPECT_TRUE(executor->start_report().error.empty()) << executor->start_report().error;
  EXPECT_EQ(executor->submit(correct_request()).get().outcome, Outcome::kCorrect);
  const json health = executor->health();
  EXPECT_EQ(health.value("profiler_start", ""), "beside_timing") << health.dump();
  EXPECT_EQ(health.value("profiler_spares", 0), 2) << health.dump();
}

TEST(JudgeSettings, ATraceSwitchThatIsNeitherIsRefusedAtStartNamingTheVariable) {
  ScopedEnv bad("KFORGE_TRACE_IN_TIMING_RUNNER", "yes");
  std::unique_ptr<Executor> executor = cpu_executor();
  EXPECT_NE(executor->start_report().error.find("KFORGE_TRACE_IN_TIMING_RUNNER='yes' is not a switch: set it to 1 "
                                                "(trace a profile in the candidate's timing runner) or 0 (in a "
                                                "profiler runner, the default), or unset it"),
            std::string::npos)
      << executor->start_report().error;
  EXPECT_EQ(executor->submit(correct_request()).get().outcome, Outcome::kNotRun);
}

// The CPU backend has no tracer to put in its runners; the switch is read
// and reported all the same, and judging is unchanged.
TEST(JudgeSettings, EitherTraceSwitchJudgesAndTheJudgeSaysWhichItUses) {
  for (const char* value : {"", "0", "1"}) {
    ScopedEnv set("KFORGE_TRACE_IN_TIMING_RUNNER", value);
    std::unique_ptr<Executor> executor = cpu_executor();
    EXPECT_TRUE(executor->start_report().error.empty()) << value << ": " << executor->start_report().error;
    EXPECT_EQ(executor->submit(correct_request()).get().outcome, Outcome::kCorrect) << value;
    EXPECT_EQ(executor->health().value("trace_in_timing_runner", false), std::string(value) == "1") << value;
  }
}

TEST(JudgeSettings, ProfilerSparesOutsideOneToFourAreRefusedAtStartNamingTheVariable) {
  for (const char* value : {"0", "5", "two", "2 ", "-1", "12"}) {
    ScopedEnv bad("KFORGE_PROFILER_SPARES", value);
    std::unique_ptr<Executor> executor = cpu_executor();
    const std::string error = executor->start_report().error;
    EXPECT_NE(
        error.find("KFORGE_PROFILER_SPARES='" + std::string(value) +
                   "' is not a number of spare profiler runners: set it to 1 to 4 (2 is the default), or unset it"),
        std::string::npos)
        << value << ": " << error;
    EXPECT_EQ(executor->submit(correct_request()).get().outcome, Outcome::kNotRun) << value;
  }
}

// executor.profiler_spares reaches the judge and wins over the variable; a
// value outside 1..4 given to the executor directly (the config reader bounds
// its own) is the judge's start-up error naming the setting.
TEST(JudgeSettings, TheConfigsProfilerSparesWinOverTheEnvironment) {
  ScopedEnv set("KFORGE_PROFILER_SPARES", "3");
  ExecutorConfig config;
  config.backend = BackendKind::kCpu;
  config.profiler_spares = 2;
  std::unique_ptr<Executor> executor = make_executor(config);
  EXPECT_TRUE(executor->start_report().error.empty()) << executor->start_report().error;
  EXPECT_EQ(executor->submit(correct_request()).get().outcome, Outcome::kCorrect);
  EXPECT_EQ(executor->health().value("profiler_spares", 0), 2);

  config.profiler_spares = 9;
  std::unique_ptr<Executor> refused = make_executor(config);
  const std::string error = refused->start_report().error;
  EXPECT_NE(error.find("executor.profiler_spares is 9: give 1 to 4 spare profiler runners, or 0 for the default"),
            std::string::npos)
      << error;
  EXPECT_EQ(refused->submit(correct_request()).get().outcome, Outcome::kNotRun);
}

TEST(JudgeSettings, ProfilerSparesJudgeAndTheJudgeSaysHowMany) {
  ScopedEnv set("KFORGE_PROFILER_SPARES", "3");
  std::unique_ptr<Executor> executor = cpu_executor();
  EXPECT_TRUE(executor->start_report().error.empty()) << executor->start_report().error;
  EXPECT_EQ(executor->submit(correct_request()).get().outcome, Outcome::kCorrect);
  EXPECT_EQ(executor->health().value("profiler_spares", 0), 3);
}

}  // namespace
}  // namespace kforge::env
