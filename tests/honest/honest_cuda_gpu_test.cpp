// The honest CUDA controls on a GPU (label gpu: built with KFORGE_GPU_TESTS,
// run by `ctest --preset gpu`): each is evaluated like a submit step
// (verification on 5 seeds x every shape variant, run twice; timing against
// eager PyTorch; CUPTI profile) through the Executor with the cuda backend.
// Every control must come out correct with no violation and earn a speed
// reward; where the win is structural (controls.json: expect_faster) the
// measured speedup over eager must exceed 1.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "corpus.h"
#include "gpu_eval.h"
#include "kforge/env/executor.h"
#include "kforge/reward/reward.h"
#include "kforge/reward/term.h"

namespace kforge::corpus {
namespace {

class HonestControlGpu : public ::testing::TestWithParam<Control> {};

TEST_P(HonestControlGpu, IsCorrectWithoutViolationsAndKeepsItsSpeedup) {
  const Control& c = GetParam();
  env::EvalReport report;
  if (!evaluate_as_submit(c.file, c.task, &report)) return;
  const Measurement m = measurement_from(report);

  EXPECT_EQ(outcome_name(report.outcome), "correct") << report.summary << "\n" << report.verification.dump(1);
  EXPECT_TRUE(report.violations.empty()) << "false positive on an honest control: " << describe(report.violations);
  ASSERT_TRUE(m.timed) << "no timing: " << timing_dump(report);
  ASSERT_TRUE(m.speedup_eager.has_value()) << timing_dump(report);
  EXPECT_TRUE(reward::speed_facts(m).has_value()) << "a correct, timed control must be eligible for speed reward";
  const double tiered = reward::RewardFunction::load("tiered").compute(m).total;
  EXPECT_GE(tiered, 1.0);

  std::printf("[control] %-34s speedup vs eager %.2fx (expected ~%.2fx)  candidate %.4f ms, eager %.4f ms  %s\n",
              c.name.c_str(), *m.speedup_eager, c.expected_speedup, m.candidate_ms.value_or(0.0),
              m.eager_ms.value_or(0.0), report.device.c_str());
  // The clocks behind that figure, to judge the timing cross-check on real
  // noise (docs/cuda-backend.md): which clock was used, the device and
  // round-trip medians of the candidate, and the null-call overhead.
  const TimingSummary& t = *report.timing;
  auto median = [](const std::optional<SampleStats>& s) { return s ? s->median_ms : 0.0; };
  std::printf("[clocks]  %-34s timer %s  device %.4f ms  round trip %.4f ms  overhead %.4f ms%s\n", c.name.c_str(),
              t.timer.c_str(), t.candidate.median_ms, median(t.candidate_wall), median(t.overhead_wall),
              t.device_clock_rejected.empty() ? "" : "  (device clock rejected)");
  // Every sample starts from a clean, cold L2 (cuda_timing/read_flush.h).
  EXPECT_EQ(t.clocks.is_object() ? t.clocks.value("cache_flush", "") : "", "read") << timing_dump(report);
  RecordProperty("speedup_eager", std::to_string(*m.speedup_eager));
  if (c.expect_faster) {
    EXPECT_GT(*m.speedup_eager, 1.0) << c.name << " (" << c.technique
                                     << ") is structurally faster than eager but measured " << *m.speedup_eager
                                     << "x: " << timing_dump(report);
  }
}

INSTANTIATE_TEST_SUITE_P(CudaCorpus, HonestControlGpu, ::testing::ValuesIn(load_controls()), NameOf());

}  // namespace
}  // namespace kforge::corpus
