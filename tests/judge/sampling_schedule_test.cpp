// The timing's warm-up (judge/timing_protocol.h, SamplingSchedule): by time,
// ended early only by a device whose clocks are at speed, never before
// warmup_min_ms or its second round. Caps are a minute long, so that no
// assertion depends on how fast this machine runs the test.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "judge/timing_protocol.h"

namespace kforge::judge {
namespace {

env::EvalOptions warmup(double min_ms, double max_ms) {
  env::EvalOptions o;
  o.warmup_min_ms = min_ms;
  o.warmup_ms = max_ms;
  return o;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(SamplingScheduleTest, ClocksAtSpeedEndTheWarmUpAfterItsMinimumAndSecondRound) {
  int asked = 0;
  SamplingSchedule s(warmup(10, 60000), {}, [&asked] {
    ++asked;
    return true;
  });
  sleep_ms(12);
  EXPECT_FALSE(s.finish_round());  // the first round is always a warm-up round, and never the last
  EXPECT_TRUE(s.warming_up());
  EXPECT_EQ(asked, 0);
  EXPECT_FALSE(s.finish_round());  // the second, past warmup_min_ms with the clocks at speed: the last
  EXPECT_FALSE(s.warming_up());
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(s.warmup_rounds(), 2);
  EXPECT_GE(s.warmup_elapsed_ms(), 10.0);
  EXPECT_LT(s.warmup_elapsed_ms(), 60000.0);
  EXPECT_TRUE(s.finish_round());  // samples from here on
}

TEST(SamplingScheduleTest, ClocksAreNotAskedBeforeTheMinimum) {
  int asked = 0;
  SamplingSchedule s(warmup(60000, 120000), {}, [&asked] {
    ++asked;
    return true;
  });
  for (int round = 0; round < 4; ++round) EXPECT_FALSE(s.finish_round());
  EXPECT_TRUE(s.warming_up());
  EXPECT_EQ(asked, 0);
}

TEST(SamplingScheduleTest, ClocksNotAtSpeedKeepTheWholeWarmUp) {
  SamplingSchedule s(warmup(0, 60000), {}, [] { return false; });
  sleep_ms(2);
  for (int round = 0; round < 4; ++round) EXPECT_FALSE(s.finish_round());
  EXPECT_TRUE(s.warming_up());
  EXPECT_EQ(s.warmup_rounds(), 4);
}

TEST(SamplingScheduleTest, WithoutAClockReadingTheWarmUpIsByTimeOnly) {
  SamplingSchedule s(warmup(0, 60000));
  for (int round = 0; round < 4; ++round) EXPECT_FALSE(s.finish_round());
  EXPECT_TRUE(s.warming_up());
}

TEST(SamplingScheduleTest, TheWarmUpEndsAtWarmupMsWhateverTheClocks) {
  SamplingSchedule s(warmup(60000, 5), {}, [] { return false; });  // a minimum above the cap is the cap
  sleep_ms(6);
  EXPECT_FALSE(s.finish_round());
  EXPECT_FALSE(s.warming_up());
  EXPECT_EQ(s.warmup_rounds(), 1);
  EXPECT_GE(s.warmup_elapsed_ms(), 5.0);
}

}  // namespace
}  // namespace kforge::judge
