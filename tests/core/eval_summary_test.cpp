// The typed timing and profile summaries of the judge's report
// (docs/schemas.md): their JSON form round-trips, and the readers name the
// field that is wrong, refuse unknown keys and another schema version.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kforge/core/profile_summary.h"
#include "kforge/core/timing_summary.h"
#include "kforge/core/trajectory.h"

namespace kforge {
namespace {

SampleStats stats(double median, int64_t samples) {
  SampleStats s;
  s.median_ms = median;
  s.p25_ms = median * 0.9;
  s.p75_ms = median * 1.1;
  s.mean_ms = median;
  s.min_ms = median * 0.8;
  s.max_ms = median * 1.5;
  s.rse = 0.01;
  s.samples = samples;
  return s;
}

TimingSummary full_timing() {
  TimingSummary t;
  t.timer = "device_events";
  t.device = "NVIDIA H200";
  t.reference = stats(1.0, 40);
  t.candidate = stats(0.25, 40);
  t.candidate.energy_j = 0.002;
  t.overhead = stats(0.01, 25);
  t.speedup = 4.0;
  t.speedup_interval = SpeedupInterval{3.8, 4.3, 0.96, 0.95, 40, "paired_log_ratio_sign_test", 4.02};
  t.candidate_self_reported = stats(0.24, 40);
  t.resolution_ms = 0.002;
  t.stop_reason = "target_rse";
  t.warmup_rounds = 7;
  t.warmup_ms = 11.5;
  t.input_sets = 3;
  t.timing_seed = 18446744073709551000ull;
  t.cache_flush_bytes = 100663296;
  t.elapsed_ms = 120.5;
  t.reference_wall = stats(1.1, 40);
  t.candidate_wall = stats(0.3, 40);
  t.overhead_wall = stats(0.02, 25);
  t.speedup_wall = 3.7;
  t.self_clock_disagrees = "the runner's clock reported a median of 0.033 ms per call";
  t.clocks = {{"sm_mhz", 1980}};
  t.roofline = {{"checked", true}};
  t.drain = {{"null_median_ms", 0.0}};
  t.sandbox = {{"seccomp", true}};
  return t;
}

TEST(TimingSummaryTest, RoundTripsThroughJson) {
  const TimingSummary t = full_timing();
  const json j = to_json(t);
  EXPECT_EQ(j["schema_version"], kTimingSummarySchemaVersion);
  const TimingSummary back = timing_summary_from_json(j);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.timing_seed, t.timing_seed);
  EXPECT_DOUBLE_EQ(*back.warmup_ms, 11.5);
  EXPECT_DOUBLE_EQ(*back.candidate.energy_j, 0.002);
  EXPECT_EQ(back.self_clock_disagrees, t.self_clock_disagrees);
  EXPECT_TRUE(back.timed());
  ASSERT_TRUE(back.speedup_interval.has_value());
  EXPECT_DOUBLE_EQ(back.speedup_interval->lo, 3.8);
  EXPECT_EQ(back.speedup_interval->rounds, 40);
  EXPECT_DOUBLE_EQ(back.speedup_interval->median.value_or(0), 4.02);
  // Files written before the interval carried its own estimate still read.
  json old = j;
  old["speedup_interval"].erase("median");
  EXPECT_FALSE(timing_summary_from_json(old).speedup_interval->median.has_value());
}

TEST(TimingSummaryTest, OptionalPartsStayAbsentAndNonFiniteBecomesNull) {
  TimingSummary t;
  t.timer = "cpu_time";
  t.candidate.median_ms = std::numeric_limits<double>::quiet_NaN();
  const json j = to_json(t);
  EXPECT_FALSE(j.contains("speedup"));
  EXPECT_FALSE(j.contains("speedup_interval"));
  EXPECT_FALSE(j.contains("candidate_wall"));
  EXPECT_FALSE(j.contains("cuda_graph"));
  EXPECT_FALSE(j.contains("self_clock_disagrees"));
  EXPECT_TRUE(j["candidate"]["median_ms"].is_null());
  EXPECT_TRUE(j["candidate"]["rse"].is_null());
  const TimingSummary back = timing_summary_from_json(j);
  EXPECT_TRUE(std::isnan(back.candidate.median_ms));
  EXPECT_FALSE(back.speedup.has_value());
  EXPECT_FALSE(back.timed());
}

std::string error_of(const json& j) {
  try {
    timing_summary_from_json(j, "<t>");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TimingSummaryTest, ErrorsNameTheField) {
  json j = to_json(full_timing());
  json bad = j;
  bad["candidate"]["median_ms"] = "fast";
  EXPECT_NE(error_of(bad).find("/candidate/median_ms"), std::string::npos) << error_of(bad);
  bad = j;
  bad["speeedup"] = 2.0;
  EXPECT_NE(error_of(bad).find("speeedup"), std::string::npos) << error_of(bad);
  bad = j;
  bad["schema_version"] = 2;
  EXPECT_NE(error_of(bad).find("schema version 1"), std::string::npos) << error_of(bad);
  bad = j;
  bad.erase("timer");
  EXPECT_NE(error_of(bad).find("timer"), std::string::npos) << error_of(bad);
  bad = j;
  bad["speedup_interval"]["lo"] = 0.0;
  EXPECT_NE(error_of(bad).find("/speedup_interval/lo"), std::string::npos) << error_of(bad);
  bad = j;
  bad["speedup_interval"]["hi"] = 1.0;  // below lo
  EXPECT_NE(error_of(bad).find("/speedup_interval/hi"), std::string::npos) << error_of(bad);
  bad = j;
  bad["speedup_interval"]["median"] = 5.0;  // outside [lo, hi]
  EXPECT_NE(error_of(bad).find("/speedup_interval/median"), std::string::npos) << error_of(bad);
  bad = j;
  bad["speedup_interval"].erase("confidence");
  EXPECT_NE(error_of(bad).find("confidence"), std::string::npos) << error_of(bad);
  bad = j;
  bad["candidate"]["samples"] = -3;
  EXPECT_NE(error_of(bad).find("/candidate/samples"), std::string::npos) << error_of(bad);
}

TEST(ProfileSummaryTest, RoundTripsAndErrorsNameTheField) {
  ProfileSummary p;
  p.own_kernel_fraction = 0.97;
  p.traced_call_ms = 0.011;
  p.attribution = {{"kernels", json::array({{{"name", "k"}, {"own", true}}})}, {"kernel_launches", 1}};
  HardwareMetrics m;
  m.memory_throughput_pct = 81.5;
  m.dram_bytes = 3.2e7;
  m.pct_basis = "sm_active_cycles";
  m.passes = 4;
  m.unsupported = {"smsp__inst_executed.sum"};
  p.metrics = m;
  p.roofline = {{"bound", "memory"}};
  p.hints = {"memory-bound at 82% of peak: move fewer bytes"};
  p.traced_in = "profiler_runner";
  p.timing_runner_trace_failed = "the timing runner's trace failed (sandbox: mmap)";
  p.metrics_unavailable = nullptr;
  const json j = to_json(p);
  EXPECT_EQ(to_json(profile_summary_from_json(j)), j);
  EXPECT_EQ(profile_summary_from_json(j).traced_in, "profiler_runner");
  EXPECT_EQ(profile_summary_from_json(j).timing_runner_trace_failed, p.timing_runner_trace_failed);

  json bad = j;
  bad["metrics"]["dram_bytes"] = "lots";
  try {
    profile_summary_from_json(bad, "<p>");
    FAIL() << "accepted a string as dram_bytes";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/metrics/dram_bytes"), std::string::npos) << e.what();
  }
  bad = j;
  bad["hints"] = json::array({1});
  EXPECT_THROW(profile_summary_from_json(bad), InputError);
}

TEST(TrajectoryTest, TurnInfoRoundTrips) {
  Trajectory t;
  t.id = "r-g0-e0";
  t.task_id = "task";
  Turn turn;
  turn.info = {{"state", {{"turns_used", 1}}}, {"policy", {{"token_ids", {1, 2}}}}};
  t.turns.push_back(turn);
  const Trajectory back = parse_trajectory(Document::from_value(to_json(t), "<t>"));
  ASSERT_EQ(back.turns.size(), 1u);
  EXPECT_EQ(back.turns[0].info, turn.info);
}

// Written as version 3 (the speedup's interval); versions 1 and 2 still
// read; a version this build does not know is refused naming the field.
TEST(TrajectoryTest, WritesVersion3AndReadsVersions1To3) {
  Trajectory t;
  t.id = "r-g0-e0";
  t.task_id = "task";
  json j = to_json(t);
  EXPECT_EQ(j["schema_version"], 3);
  EXPECT_EQ(parse_trajectory(Document::from_value(j, "<t>")).schema_version, 3);
  for (int old : {1, 2}) {
    j["schema_version"] = old;
    EXPECT_EQ(parse_trajectory(Document::from_value(j, "<t>")).schema_version, old);
  }
  for (int unknown : {0, 4}) {
    j["schema_version"] = unknown;
    try {
      parse_trajectory(Document::from_value(j, "<t>"));
      ADD_FAILURE() << "version " << unknown << " was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("schema_version"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("schema version 1 to 3"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kforge
