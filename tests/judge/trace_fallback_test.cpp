// The profile's trace in the candidate's own timing runner (judge/profile.h,
// $KFORGE_TRACE_IN_TIMING_RUNNER) when that runner cannot give one, without a
// GPU: a CPU judge device that claims a profile stage, and timing runners
// started as tracers. A CPU runner answers a `profile` request with an error,
// which is exactly a trace that failed in the timing runner: the judge must
// not judge the candidate by it, must say why in the profile, and must ask a
// profiler runner instead (here there is none, which the profile says too).
// Real judge code, real runner processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "candidates.h"
#include "forwarding_judge_device.h"
#include "judge/cpu_judge_device.h"
#include "judge/evaluation.h"
#include "judge/runner_pool.h"
#include "kforge/core/remove_tree.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

class ProfilingCpu final : public testing::ForwardingJudgeDevice {
 public:
  using ForwardingJudgeDevice::ForwardingJudgeDevice;
  bool has_profile_stage() const override { return true; }
};

TEST(TraceFallback, ATraceTheTimingRunnerCannotGiveIsNotJudgedAndTheProfilerRunnerIsAskedInstead) {
  ProfilingCpu device(make_cpu_judge_device());
  RunnerProcess::Config config;
  config.executable = std::filesystem::path(KFORGE_BINARY_DIR) / "bin" / "kforge-runner";
  config.scratch_root = std::filesystem::temp_directory_path() / ("kforge-trace-" + std::to_string(::getpid()));
  config.tracer = true;
  RunnerPool pool(config);

  env::EvalRequest request;
  request.task = testing::elementwise_chain_task(1 << 12);
  request.artifact = testing::artifact_for(testing::compile_candidate(testing::candidates::kChainCorrect));
  request.verify = true;
  request.time = true;
  request.profile = true;
  request.options = testing::quick_options();
  request.options.hardware_metrics = false;
  EvaluationCounters counters;
  const env::EvalReport r = evaluate(request, &device, &pool, &counters, /*profilers=*/nullptr);

  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  EXPECT_TRUE(r.violations.empty()) << r.summary;
  ASSERT_TRUE(r.profile.has_value()) << r.summary;
  const ProfileSummary& p = *r.profile;
  const std::string dump = to_json(p).dump(1);
  EXPECT_EQ(p.timing_runner_trace_failed,
            "the trace in the timing runner failed (error: this runner has no profiler (profiling needs the CUDA "
            "backend))")
      << dump;
  EXPECT_EQ(p.traced_in, "") << dump;
  EXPECT_EQ(p.attribution_unavailable, "this backend has no profiler runner") << dump;
  kforge::remove_tree(config.scratch_root);
}

}  // namespace
}  // namespace kforge::judge
