// A profile traced in the candidate's own timing runner
// ($KFORGE_TRACE_IN_TIMING_RUNNER=1, judge_loop.h; judge/profile.h): the
// attribution comes from that runner with no profiler runner taken, a
// foreign stream is caught there as in a profiler runner, and counters still
// go to a profiler runner. Label gpu; its own executor, started with the
// variable set.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "cuda_executor_test_support.h"
#include "kforge/env/executor.h"

namespace kforge::env {
namespace {

using testing::affine_task;

class TraceInTimingRunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Read by the judge when it starts (it inherits the environment).
    ::setenv("KFORGE_TRACE_IN_TIMING_RUNNER", "1", 1);
    ExecutorConfig config;
    config.backend = BackendKind::kCuda;
    executor_ = make_executor(config).release();
    ::unsetenv("KFORGE_TRACE_IN_TIMING_RUNNER");
  }
  static void TearDownTestSuite() {
    delete executor_;
    executor_ = nullptr;
  }

  static EvalReport profile(const std::string& source, bool counters) {
    EvalRequest req;
    req.task = affine_task(1024, 1024);
    req.artifact = testing::compile_cuda(source, req.task);
    req.verify = true;
    req.time = true;
    req.profile = true;
    req.options = testing::gpu_quick_options();
    req.options.hardware_metrics = counters;
    return executor_->submit(req).get();
  }

  static Executor* executor_;
};

Executor* TraceInTimingRunnerTest::executor_ = nullptr;

TEST_F(TraceInTimingRunnerTest, TheJudgeSaysItTracesInTimingRunners) {
  ASSERT_TRUE(executor_->start_report().error.empty()) << executor_->start_report().error;
  EXPECT_TRUE(executor_->health().value("trace_in_timing_runner", false)) << executor_->health().dump();
}

TEST_F(TraceInTimingRunnerTest, AProfileWithoutCountersIsTracedInTheCandidatesOwnRunner) {
  const EvalReport r = profile(kAffineCorrect, /*counters=*/false);
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  ASSERT_TRUE(r.profile.has_value()) << r.summary;
  const ProfileSummary& p = *r.profile;
  EXPECT_EQ(p.timing_runner_trace_failed, "") << profile_text(r);
  EXPECT_EQ(p.traced_in, "timing_runner") << profile_text(r);
  ASSERT_TRUE(p.attribution.is_object()) << profile_text(r);
  const json& kernels = p.attribution["kernels"];
  ASSERT_EQ(kernels.size(), 1u) << profile_text(r);
  EXPECT_TRUE(kernels[0]["own"].get<bool>()) << profile_text(r);
  EXPECT_GT(p.own_kernel_fraction.value_or(0.0), 0.99) << profile_text(r);
  // No profiler runner was taken, and the timing runner reads no counters.
  EXPECT_FALSE(r.phase_ms.contains("profile_profiler_setup")) << r.phase_ms.dump();
  EXPECT_TRUE(r.phase_ms.contains("profile_trace")) << r.phase_ms.dump();
  EXPECT_FALSE(p.metrics.has_value()) << profile_text(r);
  // The timing ran in a process carrying the tracer: still on device events,
  // or on the round trip with the rejection's evidence.
  ASSERT_TRUE(r.timing.has_value()) << r.summary;
  EXPECT_EQ(testing::device_clock_problem(*r.timing), "") << timing_text(r);
}

TEST_F(TraceInTimingRunnerTest, AForeignStreamIsCaughtByTheOwnRunnersTrace) {
  const EvalReport r = profile(kForeignStream, /*counters=*/false);
  EXPECT_EQ(r.outcome, Outcome::kViolation) << r.summary;
  ASSERT_TRUE(r.profile.has_value()) << r.summary;
  EXPECT_EQ(r.profile->traced_in, "timing_runner") << profile_text(r);
  EXPECT_TRUE(std::any_of(r.violations.begin(), r.violations.end(),
                          [](const Violation& v) { return v.check == "foreign_stream"; }))
      << r.summary << "\n"
      << profile_text(r);
}

TEST_F(TraceInTimingRunnerTest, CountersAreStillReadInAProfilerRunner) {
  const EvalReport r = profile(kAffineCorrect, /*counters=*/true);
  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  ASSERT_TRUE(r.profile.has_value()) << r.summary;
  EXPECT_EQ(r.profile->traced_in, "profiler_runner") << profile_text(r);
  EXPECT_TRUE(r.phase_ms.contains("profile_profiler_setup")) << r.phase_ms.dump();
}

}  // namespace
}  // namespace kforge::env
