// A profiler runner's `profiled` reply is the candidate's to forge: its shape
// is checked before the judge reads it (judge/profile_reply.h).
#include "judge/profile_reply.h"

#include <gtest/gtest.h>

namespace kforge::judge {
namespace {

using json = nlohmann::json;

json honest_profile() {
  json kernel = {{"kind", "kernel"},         {"stream", 7},
                 {"start_ns", 100},          {"end_ns", 900},
                 {"name", "_Z5scalePfl"},    {"grid", {64, 1, 1}},
                 {"block", {256, 1, 1}},     {"registers", 32},
                 {"static_shared_bytes", 0}, {"dynamic_shared_bytes", 4096}};
  json copy = {{"kind", "memcpy"}, {"stream", 7}, {"start_ns", 950}, {"end_ns", 990}, {"bytes", 4096}};
  return {{"phase_ms", {{"trace", 3.5}, {"metrics", 120.0}}},
          {"activity",
           {{"rc", 0},
            {"stream", 7},
            {"call_start_ns", 50},
            {"synchronized_ns", 1000},
            {"device_ns", 850},
            {"records", {kernel, copy}},
            {"dropped", 0}}},
          {"metrics",
           {{"values", {{"dram__bytes_read.sum", 1e6}, {"sm__cycles_active.max", nullptr}}},
            {"passes", 19},
            {"unsupported", json::array()}}},
          {"libraries_loaded", {"libnvidia-ptxjitcompiler.so.1"}}};
}

TEST(ProfileReply, AcceptsWhatTheProfilerRunnerSends) {
  EXPECT_EQ(profile_reply_problem(honest_profile()), "");
  EXPECT_EQ(profile_reply_problem({{"activity", {{"error", "CUPTI_ERROR_NOT_INITIALIZED"}}},
                                   {"metrics_unavailable", "counters restricted"}}),
            "");
  EXPECT_EQ(profile_reply_problem({{"activity_unavailable", "no CUPTI"}}), "");
}

TEST(ProfileReply, NamesWhatIsWrong) {
  json p = honest_profile();
  p["activity"]["records"][0]["block"] = {5000, 1, 1};
  EXPECT_EQ(profile_reply_problem(p), "activity.records[0]: block[0] is not an integer in 0..1024");

  p = honest_profile();
  p["activity"]["records"][1]["kind"] = 3;
  EXPECT_EQ(profile_reply_problem(p), "activity.records[1]: field 'kind' is an integer, expected a string");

  p = honest_profile();
  p["activity"]["records"][0]["grid"] = {1, 2};
  EXPECT_EQ(profile_reply_problem(p), "activity.records[0]: field 'grid' has 2 entries, not 3");

  p = honest_profile();
  p["activity"]["records"] = {{"kind", "kernel"}};
  EXPECT_EQ(profile_reply_problem(p), "activity: field 'records' is a map, expected an array");

  p = honest_profile();
  p["activity"]["stream"] = "7";
  EXPECT_EQ(profile_reply_problem(p), "activity: field 'stream' is a string, expected a non-negative integer");

  p = honest_profile();
  p["metrics"]["values"]["dram__bytes_read.sum"] = "lots";
  EXPECT_EQ(profile_reply_problem(p), "metrics.values: 'dram__bytes_read.sum' is not a number");

  p = honest_profile();
  p["phase_ms"]["trace"] = json::array();
  EXPECT_EQ(profile_reply_problem(p), "phase_ms: 'trace' is not a number");

  p = honest_profile();
  p["libraries_loaded"] = {1};
  EXPECT_EQ(profile_reply_problem(p), "libraries_loaded: an entry is not a string");

  EXPECT_EQ(profile_reply_problem({{"activity", {{"error", 5}}}}),
            "activity: field 'error' is an integer, expected a string");
}

}  // namespace
}  // namespace kforge::judge
