#include "kforge/env/analysis/roofline.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kforge::env {
namespace {

bool any_contains(const std::vector<std::string>& hints, const std::string& needle) {
  return std::any_of(hints.begin(), hints.end(),
                     [&](const std::string& h) { return h.find(needle) != std::string::npos; });
}

RooflineInput input(double bytes, double flops, double time_s) {
  RooflineInput in;
  in.bytes = bytes;
  in.flops = flops;
  in.time_s = time_s;
  return in;
}

TEST(RooflineTest, H200Peaks) {
  const DevicePeaks p = DevicePeaks::h200();
  EXPECT_DOUBLE_EQ(p.memory_bytes_per_s, 4.3e12);
  const auto r = classify_roofline(input(4.3e9, 0, 2e-3), p);
  EXPECT_NEAR(r.ridge_intensity, 67.0 / 4.3, 1e-9);
}

// 4.3 GB at 4.3 TB/s is 1 ms; measured 1.1 ms: 91% of peak bandwidth.
TEST(RooflineTest, MemoryBoundOnTheRoofline) {
  const auto r = classify_roofline(input(4.3e9, 1e9, 1.1e-3), DevicePeaks::h200());
  EXPECT_EQ(r.bound, Bound::kMemory);
  EXPECT_TRUE(r.memory_side);
  EXPECT_NEAR(r.memory_fraction, 1.0 / 1.1, 1e-9);
  EXPECT_NEAR(r.floor_s, 1e-3, 1e-12);
  EXPECT_FALSE(r.below_floor);
  EXPECT_TRUE(any_contains(r.hints, "only moving fewer bytes helps"));
}

TEST(RooflineTest, MemoryBoundBelowTheRoofline) {
  const auto r = classify_roofline(input(4.3e9, 0, 1.5e-3), DevicePeaks::h200());
  EXPECT_EQ(r.bound, Bound::kMemory);
  EXPECT_TRUE(any_contains(r.hints, "16-byte vector accesses"));
}

TEST(RooflineTest, ComputeBound) {
  // 67 GFLOP of FP32 at 67 TFLOP/s is 1 ms; measured 1.25 ms.
  const auto r = classify_roofline(input(1e8, 67e9, 1.25e-3), DevicePeaks::h200());
  EXPECT_EQ(r.bound, Bound::kCompute);
  EXPECT_FALSE(r.memory_side);
  EXPECT_NEAR(r.compute_fraction, 0.8, 1e-9);
  EXPECT_TRUE(any_contains(r.hints, "tensor cores raise the ceiling"));
  RooflineInput tc = input(1e8, 990e9, 1.25e-3);
  tc.tensor_cores = true;
  const auto t = classify_roofline(tc, DevicePeaks::h200());
  EXPECT_EQ(t.bound, Bound::kCompute);
  EXPECT_NEAR(t.compute_fraction, 0.8, 1e-9);
}

TEST(RooflineTest, LatencyBound) {
  // 43 MB should take 10 us; 200 us is 5% of bandwidth and little arithmetic.
  const auto r = classify_roofline(input(43e6, 1e6, 200e-6), DevicePeaks::h200());
  EXPECT_EQ(r.bound, Bound::kLatency);
  EXPECT_TRUE(any_contains(r.hints, "latency-bound"));
  EXPECT_TRUE(any_contains(r.hints, "memory-bound at best"));
  EXPECT_NEAR(r.efficiency, 0.05, 1e-9);
}

TEST(RooflineTest, LaunchBound) {
  RooflineInput in = input(4096, 1024, 6e-6);
  const auto r = classify_roofline(in, DevicePeaks::h200());
  EXPECT_EQ(r.bound, Bound::kLaunch);
  EXPECT_TRUE(any_contains(r.hints, "CUDA graph"));
  in.time_s = 400e-6;
  in.launches = 60;
  EXPECT_EQ(classify_roofline(in, DevicePeaks::h200()).bound, Bound::kLaunch);
  in.launches = 10;
  EXPECT_NE(classify_roofline(in, DevicePeaks::h200()).bound, Bound::kLaunch);
}

TEST(RooflineTest, FasterThanPhysicallyPossibleIsFlagged) {
  const auto r = classify_roofline(input(4.3e9, 0, 0.5e-3), DevicePeaks::h200());
  EXPECT_TRUE(r.below_floor);
  EXPECT_TRUE(any_contains(r.hints, "below the roofline floor"));
  const json j = to_json(r);
  EXPECT_EQ(j["below_floor"], true);
  EXPECT_EQ(j["bound"], "memory");
}

TEST(RooflineTest, RejectsMeaninglessInput) {
  EXPECT_THROW(classify_roofline(input(1, 1, 0), DevicePeaks::h200()), InputError);
  EXPECT_THROW(classify_roofline(input(-1, 1, 1), DevicePeaks::h200()), InputError);
  EXPECT_THROW(classify_roofline(input(1, 1, 1), DevicePeaks{}), InputError);
}

}  // namespace
}  // namespace kforge::env
