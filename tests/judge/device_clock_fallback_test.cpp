// The device clock's cross-check (judge/timing_tamper.h, judge/timing.cpp)
// without a GPU: a CPU judge device that claims its runner times on the
// device. CPU runners report no device time, which is exactly a forged 0 ms:
// the judge must not believe it, must not pay it, and must time both sides
// by its own round trip instead (real judge code, real runner processes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "forwarding_judge_device.h"
#include "judge/cpu_judge_device.h"
#include "judge/evaluation.h"
#include "judge/runner_pool.h"
#include "kforge/core/remove_tree.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

class DeviceClockClaimingCpu final : public testing::ForwardingJudgeDevice {
 public:
  using ForwardingJudgeDevice::ForwardingJudgeDevice;
  bool runner_times_on_device() const override { return true; }
  bool work_is_host_cpu_time() const override { return false; }
};

constexpr const char* kChain = R"(#include "kforge/kernel_abi.h"
extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  for (int64_t i = 0, n = kf_numel(&in[0]); i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
)";

TEST(DeviceClockFallback, ADeviceTimeTheRoundTripCannotExplainIsNeitherBelievedNorPaid) {
  DeviceClockClaimingCpu device(make_cpu_judge_device());
  judge::RunnerProcess::Config config;
  config.executable = std::filesystem::path(KFORGE_BINARY_DIR) / "bin" / "kforge-runner";
  config.scratch_root = std::filesystem::temp_directory_path() / ("kforge-clock-" + std::to_string(::getpid()));
  RunnerPool pool(config);

  env::EvalRequest request;
  request.task = testing::elementwise_chain_task(1 << 18);
  request.artifact = testing::artifact_for(testing::compile_candidate(kChain));
  request.verify = true;
  request.time = true;
  request.options = testing::quick_options();
  EvaluationCounters counters;
  const env::EvalReport r = evaluate(request, &device, &pool, &counters);

  ASSERT_EQ(r.outcome, Outcome::kCorrect) << r.summary;
  EXPECT_TRUE(r.violations.empty()) << r.summary;
  ASSERT_TRUE(r.timing.has_value()) << r.summary;
  const TimingSummary& t = *r.timing;
  const std::string dump = to_json(t).dump(1);
  EXPECT_EQ(t.timer, "wall_round_trip") << dump;
  EXPECT_NE(t.device_clock_rejected.find("round trip"), std::string::npos) << dump;
  // The reported figures are the judge's own, for both sides.
  ASSERT_TRUE(t.candidate_wall && t.reference_wall) << dump;
  EXPECT_EQ(t.candidate.median_ms, t.candidate_wall->median_ms) << dump;
  EXPECT_EQ(t.reference.median_ms, t.reference_wall->median_ms) << dump;
  ASSERT_TRUE(t.speedup && t.speedup_wall) << dump;
  EXPECT_DOUBLE_EQ(*t.speedup, *t.speedup_wall);
  EXPECT_GT(t.candidate.median_ms, 0.0);
  kforge::remove_tree(config.scratch_root);
}

}  // namespace
}  // namespace kforge::judge
