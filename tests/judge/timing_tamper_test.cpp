// The timing cross-checks between the runner's clock and the judge's: the
// evidence each returns, and honest figures from a busy machine left alone.
#include "judge/timing_tamper.h"

#include <gtest/gtest.h>

namespace kforge::judge {
namespace {

judge::SampleSummary around(double median) { return judge::summarize({median * 0.95, median, median, median * 1.05}); }

TEST(TimingTamper, RunnerIntervalMustFitInTheRoundTrip) {
  EXPECT_EQ(check_self_within_round_trip(0.8, 1.0), "");
  EXPECT_EQ(check_self_within_round_trip(1.02, 1.0), "");  // clock-read jitter
  std::string e = check_self_within_round_trip(5.0, 1.0);
  EXPECT_NE(e.find("5.000 ms"), std::string::npos) << e;
  EXPECT_NE(e.find("1.000 ms"), std::string::npos) << e;
}

TEST(TimingTamper, RewoundRunnerClockIsCaughtByCpuTime) {
  // Honest, idle machine: the interval matches the CPU time.
  EXPECT_EQ(check_self_covers_cpu_time(around(0.76), around(0.74)), "");
  // Honest, busy machine: preemption makes the wall interval longer, never shorter.
  EXPECT_EQ(check_self_covers_cpu_time(around(4.0), around(0.75)), "");
  // Rewound start time: the runner claims almost nothing for 0.75 ms of CPU.
  std::string e = check_self_covers_cpu_time(around(0.01), around(0.75));
  EXPECT_NE(e.find("kernel accounted"), std::string::npos) << e;
  // Tiny kernels are below the slack and never flagged, even when cold-cache
  // protocol work dominates their CPU time (seen on a loaded machine).
  EXPECT_EQ(check_self_covers_cpu_time(around(0.0), around(0.04)), "");
  EXPECT_EQ(check_self_covers_cpu_time(around(0.003), around(0.185)), "");
  // Without CPU figures (GPU backends) there is nothing to compare.
  EXPECT_EQ(check_self_covers_cpu_time(around(0.01), judge::summarize({})), "");
}

}  // namespace
}  // namespace kforge::judge
