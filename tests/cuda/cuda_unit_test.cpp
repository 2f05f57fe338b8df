// Logic of the CUDA judge and runner that needs no GPU: L2 flush sizing, the
// IPC handle's text form, the device-clock tamper and leftover-work rules,
// kernel attribution over synthetic CUPTI records, metric names, and NVML's
// "unavailable" path. Runs on every machine (label cpu).
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <set>
#include <vector>

#include "ipc/hex_codec.h"
#include "judge/kernel_attribution.h"
#include "judge/l2_flush.h"
#include "judge/leftover_work.h"
#include "judge/nvml_monitor.h"
#include "judge/profile.h"
#include "judge/sample_stats.h"
#include "judge/timing_tamper.h"

namespace kforge::judge {
namespace {

using json = nlohmann::json;

TEST(L2FlushPlan, TwiceTheReportedL2RoundedToTwoMiB) {
  L2FlushPlan h200 = plan_l2_flush(62914560);  // 60 MiB, as the H200 reports it
  EXPECT_EQ(h200.l2_bytes, 62914560u);
  EXPECT_EQ(h200.flush_bytes, 120u << 20);
  EXPECT_EQ(h200.source, "device");
  EXPECT_EQ(plan_l2_flush(40 << 20).flush_bytes, 80u << 20);
  EXPECT_EQ(plan_l2_flush((3 << 20) + 1).flush_bytes, 8u << 20);  // 6 MiB + 2 bytes, rounded up
}

TEST(L2FlushPlan, UnknownOrAbsurdSizesFallBackOrClamp) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{4096}}) {
    L2FlushPlan p = plan_l2_flush(bad);
    EXPECT_EQ(p.l2_bytes, 64u << 20) << bad;
    EXPECT_EQ(p.flush_bytes, 128u << 20) << bad;
    EXPECT_NE(p.source.find("default"), std::string::npos) << bad;
  }
  EXPECT_EQ(plan_l2_flush(int64_t{1} << 40).flush_bytes, 2048u << 20);
}

TEST(HexCodec, RoundTripsAnIpcSizedHandle) {
  std::vector<uint8_t> handle(64);
  for (size_t i = 0; i < handle.size(); ++i) handle[i] = static_cast<uint8_t>(i * 37 + 11);
  std::string text = ipc::hex_encode(handle.data(), handle.size());
  EXPECT_EQ(text.size(), 128u);
  EXPECT_EQ(text.substr(0, 4), "0b30");
  EXPECT_EQ(ipc::hex_decode(text, 64), handle);
  for (auto& c : text) c = static_cast<char>(std::toupper(c));
  EXPECT_EQ(ipc::hex_decode(text, 64), handle);
}

TEST(HexCodec, RejectsWrongLengthAndStrayCharacters) {
  std::string text(128, 'a');
  EXPECT_THROW(ipc::hex_decode(text.substr(1), 64), std::invalid_argument);
  EXPECT_THROW(ipc::hex_decode(text + "00", 64), std::invalid_argument);
  text[77] = 'g';
  EXPECT_THROW(ipc::hex_decode(text, 64), std::invalid_argument);
}

judge::SampleSummary median_of(double m) {
  judge::SampleSummary s;
  s.median = m;
  s.samples = 20;
  return s;
}

TEST(DeviceClockTamper, HonestDeviceTimesFitUnderTheWallClock) {
  // Event time a little below the round trip minus overhead: sync latency.
  EXPECT_EQ(check_device_time_covers_wall(median_of(0.95), median_of(1.0)), "");
  EXPECT_EQ(check_device_time_covers_wall(median_of(0.010), median_of(0.055)), "");  // within the absolute slack
  EXPECT_EQ(check_device_time_covers_wall(median_of(0.80), median_of(1.0)), "");
}

TEST(DeviceClockTamper, AForgedShortDeviceTimeIsCaught) {
  std::string e = check_device_time_covers_wall(median_of(0.4), median_of(1.0));
  EXPECT_NE(e.find("device clock"), std::string::npos) << e;
  EXPECT_NE(check_device_time_covers_wall(median_of(0.01), median_of(0.2)), "");
  EXPECT_EQ(check_device_time_covers_wall(median_of(0.4), judge::SampleSummary{}), "");  // no samples, no verdict
}

TEST(DeviceClockTamper, AClaimLongerThanTheRoundTripIsCaught) {
  EXPECT_EQ(check_self_within_round_trip(0.5, 0.6), "");
  EXPECT_NE(check_self_within_round_trip(0.9, 0.6), "");
}

TEST(LeftoverWork, HonestCallsDrainLikeNullCalls) {
  std::vector<double> null_drain(25, 0.004), calls(40, 0.005);
  calls[3] = 0.3;  // one preempted runner thread
  calls[17] = 0.2;
  EXPECT_EQ(check_work_after_return(null_drain, calls), "");
}

TEST(LeftoverWork, KernelsOutlivingTheCallAreFlagged) {
  std::vector<double> null_drain(25, 0.004), calls(40, 0.005);
  for (size_t i = 0; i < calls.size(); i += 2) calls[i] = 1.5;  // a 1.5 ms kernel left on another stream
  std::string e = check_work_after_return(null_drain, calls);
  EXPECT_NE(e.find("20 of 40"), std::string::npos) << e;
  EXPECT_EQ(check_work_after_return({}, calls), "");
}

TEST(LeftoverWork, WorkPendingOnAnotherStreamAtReturnIsAForeignStreamViolation) {
  EXPECT_EQ(check_foreign_stream({{"rc", 0}, {"self_ns", 10}}), "");
  EXPECT_EQ(check_foreign_stream({{"rc", 0}, {"foreign_pending", false}}), "");
  const std::string e = check_foreign_stream({{"rc", 0}, {"foreign_pending", true}});
  EXPECT_NE(e.find("legacy default stream"), std::string::npos) << e;
}

json kernel(const std::string& name, uint64_t stream, uint64_t start, uint64_t end, int grid = 264, int block = 256) {
  return {{"kind", "kernel"},         {"name", name},    {"stream", stream},
          {"start_ns", start},        {"end_ns", end},   {"grid", {grid, 1, 1}},
          {"block", {block, 1, 1}},   {"registers", 32}, {"static_shared_bytes", 0},
          {"dynamic_shared_bytes", 0}};
}

TEST(KernelAttribution, OwnKernelsOnTheGivenStreamAreClean) {
  json activity = {{"stream", 7},
                   {"synchronized_ns", 10000},
                   {"records",
                    {kernel("_Z4gemmPfS_", 7, 1000, 5000), kernel("_Z8epiloguePf", 7, 5000, 6000),
                     kernel("_Z8epiloguePf", 7, 6000, 7000), kernel("cublasLt_internal_kernel", 7, 7000, 9500)}}};
  AttributionDevice h200;
  h200.sm_count = 132;
  KernelAttribution a = attribute_kernels(activity, {"_Z4gemmPfS_", "_Z8epiloguePf"}, h200);
  EXPECT_TRUE(a.violations.empty());
  EXPECT_EQ(a.kernel_launches, 4);
  EXPECT_NEAR(a.kernel_ms, 0.0085, 1e-12);
  EXPECT_NEAR(a.own_kernel_fraction, 6.0 / 8.5, 1e-12);
  ASSERT_EQ(a.kernels.size(), 3u);
  EXPECT_EQ(a.kernels[0]["name"], "gemm(float*, float*)");  // longest first, demangled
  EXPECT_EQ(a.kernels[0]["mangled"], "_Z4gemmPfS_");
  EXPECT_EQ(a.kernels[1]["launches"], 1);  // the library kernel (2.5 us) comes before the epilogue (2 x 1 us)
  EXPECT_FALSE(a.kernels[1]["own"].get<bool>());
  EXPECT_EQ(a.kernels[2]["launches"], 2);
  // 256 threads x 32 registers: 8 blocks per SM on sm_90, 264 blocks = 0.25 waves on 132 SMs.
  EXPECT_NEAR(a.kernels[0]["waves"].get<double>(), 0.25, 1e-9);
  EXPECT_NEAR(a.max_waves, 0.25, 1e-9);
}

TEST(KernelAttribution, WorkOnAnotherStreamIsAForeignStream) {
  json activity = {{"stream", 7},
                   {"synchronized_ns", 10000},
                   {"records",
                    {kernel("_Z4workPf", 7, 1000, 2000),
                     kernel("_Z4workPf", 14, 1000, 8000),
                     {{"kind", "memset"}, {"stream", 1}, {"start_ns", 100}, {"end_ns", 200}, {"bytes", 64}}}}};
  KernelAttribution a = attribute_kernels(activity, {"_Z4workPf"}, {});
  ASSERT_EQ(a.violations.size(), 1u);
  EXPECT_EQ(a.violations[0].check, "foreign_stream");
  EXPECT_NE(a.violations[0].detail.find("2 operations"), std::string::npos) << a.violations[0].detail;
  EXPECT_NE(a.violations[0].detail.find("memset on stream 1"), std::string::npos) << a.violations[0].detail;
  EXPECT_EQ(a.other_activity, 1);
  EXPECT_EQ(a.kernels[0]["streams"], json({"given", "other"}));
  EXPECT_FALSE(a.kernels[0].contains("waves"));  // no SM count given
}

TEST(KernelAttribution, AKernelStillRunningAfterTheCallIsFlagged) {
  json activity = {{"stream", 7},
                   {"synchronized_ns", 10000},
                   {"records", {kernel("_Z4workPf", 7, 1000, 2000), kernel("_Z4spinv", 3, 1500, 2010000)}}};
  KernelAttribution a = attribute_kernels(activity, {}, {});
  ASSERT_EQ(a.violations.size(), 2u);
  EXPECT_EQ(a.violations[0].check, "foreign_stream");
  EXPECT_EQ(a.violations[1].check, "work_after_return");
  EXPECT_NE(a.violations[1].detail.find("kernel spin()"), std::string::npos) << a.violations[1].detail;
  EXPECT_NE(a.violations[1].detail.find("2.000 ms later"), std::string::npos) << a.violations[1].detail;
  // Without a kernel list from the compiler, "own" means "on the given stream".
  EXPECT_NE(a.own_rule.find("given stream"), std::string::npos);
  EXPECT_NEAR(a.own_kernel_fraction, 1000.0 / (1000.0 + 2008500.0), 1e-9);
}

TEST(KernelAttribution, NothingRecordedIsNotAViolation) {
  KernelAttribution a = attribute_kernels({{"stream", 1}, {"records", json::array()}}, {}, {});
  EXPECT_TRUE(a.violations.empty());
  EXPECT_EQ(a.own_kernel_fraction, 0.0);
  EXPECT_EQ(a.to_json()["kernel_launches"], 0);
}

TEST(ProfileMetrics, RangeProfilerValuesAreRenamedAndScaled) {
  json values = {{"gpu__time_duration.sum", 52000.0},
                 {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 41.5},
                 {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 88.0},
                 {"dram__bytes_read.sum", 2.0e8},
                 {"dram__bytes_write.sum", 1.0e8},
                 {"sm__warps_active.avg.pct_of_peak_sustained_active", 62.0},
                 {"sm__cycles_elapsed.avg.per_second", 1.98e9}};
  json m = normalize_metrics(values);
  EXPECT_DOUBLE_EQ(m["range_ms"].get<double>(), 0.052);
  EXPECT_DOUBLE_EQ(m["sm_throughput_pct"].get<double>(), 41.5);
  EXPECT_DOUBLE_EQ(m["memory_throughput_pct"].get<double>(), 88.0);
  EXPECT_DOUBLE_EQ(m["dram_bytes"].get<double>(), 3.0e8);
  EXPECT_DOUBLE_EQ(m["achieved_occupancy_pct"].get<double>(), 62.0);
  EXPECT_DOUBLE_EQ(m["sm_clock_mhz"].get<double>(), 1980.0);
  EXPECT_EQ(m["pct_basis"], "range");
  EXPECT_FALSE(m.contains("dram_throughput_pct"));
}

TEST(ProfileMetrics, ThroughputsAreRestatedOverTheTimeTheGpuWorked) {
  // A 10 us kernel in a 60 us range (the host's part of the call is inside it).
  json values = {{"gpu__time_duration.sum", 60000.0},
                 {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 3.0},
                 {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 12.0},
                 {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 20.0},
                 {"sm__warps_active.avg.pct_of_peak_sustained_active", 70.0}};
  json m = normalize_metrics(values, 0.010);
  EXPECT_EQ(m["pct_basis"], "busy");
  EXPECT_DOUBLE_EQ(m["busy_ms"].get<double>(), 0.010);
  EXPECT_NEAR(m["sm_throughput_pct"].get<double>(), 18.0, 1e-9);
  EXPECT_NEAR(m["memory_throughput_pct"].get<double>(), 72.0, 1e-9);
  EXPECT_DOUBLE_EQ(m["dram_throughput_pct"].get<double>(), 100.0) << "capped at the peak";
  EXPECT_DOUBLE_EQ(m["over_range"]["memory_throughput_pct"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(m["achieved_occupancy_pct"].get<double>(), 70.0) << "already per active cycle";
  // The SMs' own active share, counted in the same passes, wins over a busy
  // time from another call.
  values["sm__cycles_active.max"] = 30000.0;
  values["sm__cycles_elapsed.max"] = 120000.0;
  json c = normalize_metrics(values, 0.010);
  EXPECT_EQ(c["pct_basis"], "sm_active_cycles");
  EXPECT_NEAR(c["busy_ms"].get<double>(), 0.015, 1e-12);
  EXPECT_NEAR(c["memory_throughput_pct"].get<double>(), 48.0, 1e-9);
  values["sm__cycles_active.max"] = nullptr;  // not evaluated: the busy time from the trace stands
  EXPECT_EQ(normalize_metrics(values, 0.010)["pct_basis"], "busy");
  values.erase("sm__cycles_active.max");
  values.erase("sm__cycles_elapsed.max");
  // A busy time longer than the range is never used to scale down.
  EXPECT_EQ(normalize_metrics(values, 0.5)["pct_basis"], "range");
  EXPECT_DOUBLE_EQ(normalize_metrics(values, 0.5)["memory_throughput_pct"].get<double>(), 12.0);
}

TEST(NvmlMonitor, EitherReachesTheDeviceOrSaysWhyNot) {
  std::string why;
  auto nvml = NvmlMonitor::open("0000:00:00.0", &why);  // no GPU sits at this address
  EXPECT_EQ(nvml, nullptr);
  EXPECT_FALSE(why.empty());
}

TEST(NvmlMonitor, ClockEventReasonsAreNamed) {
  EXPECT_EQ(clock_event_reason_names(0), json::array());
  EXPECT_EQ(clock_event_reason_names(0x1), json({"idle"}));
  EXPECT_EQ(clock_event_reason_names(0x4 | 0x40), json({"sw_power_cap", "hw_thermal_slowdown"}));
}

}  // namespace
}  // namespace kforge::judge
