#include "kforge/env/analysis/occupancy.h"

#include <gtest/gtest.h>

#include "kforge/env/analysis.h"

namespace kforge::env {
namespace {

ArchLimits sm90() {
  auto l = arch_limits("sm_90a");
  EXPECT_TRUE(l.has_value());
  return *l;
}

OccupancyResult occ(const ArchLimits& l, int threads, int regs, int64_t static_smem = 0, int64_t dyn_smem = 0) {
  OccupancyQuery q;
  q.threads_per_block = threads;
  q.registers_per_thread = regs;
  q.static_shared_bytes = static_smem;
  q.dynamic_shared_bytes = dyn_smem;
  return compute_occupancy(l, q);
}

bool limited_first(const OccupancyResult& r, const std::string& what) {
  return !r.limited_by.empty() && r.limited_by.front() == what;
}

TEST(OccupancyTest, ArchTablesMatchTheProgrammingGuide) {
  const ArchLimits h = sm90();
  EXPECT_EQ(h.arch, "sm_90");
  EXPECT_EQ(h.max_warps_per_sm, 64);
  EXPECT_EQ(h.max_blocks_per_sm, 32);
  EXPECT_EQ(h.shared_bytes_per_sm, 233472);
  EXPECT_EQ(h.shared_bytes_per_block_optin, 232448);
  EXPECT_EQ(arch_limits("sm_86")->max_warps_per_sm, 48);
  EXPECT_EQ(arch_limits("sm_86")->max_blocks_per_sm, 16);
  EXPECT_EQ(arch_limits("sm_89")->max_blocks_per_sm, 24);
  EXPECT_EQ(arch_limits("sm_80")->shared_bytes_per_sm, 167936);
  EXPECT_FALSE(arch_limits("sm_75").has_value());
}

// 256 threads x 32 registers = 1024 registers per warp, 16 warps per
// sub-partition, 64 warps: 8 blocks of 8 warps fill the SM.
TEST(OccupancyTest, Sm90SmallKernelReachesFullOccupancy) {
  const auto r = occ(sm90(), 256, 32);
  EXPECT_TRUE(r.launchable);
  EXPECT_EQ(r.warps_per_block, 8);
  EXPECT_EQ(r.registers_per_warp, 1024);
  EXPECT_EQ(r.blocks_by_registers, 8);
  EXPECT_EQ(r.blocks_by_warps, 8);
  EXPECT_EQ(r.blocks_by_shared, 32);  // 1 KB reserved per block: 228 blocks, capped at 32
  EXPECT_EQ(r.active_blocks, 8);
  EXPECT_EQ(r.active_warps, 64);
  EXPECT_DOUBLE_EQ(r.occupancy, 1.0);
}

// 255 registers round up to 8192 per warp: 2 warps per sub-partition, 8 per SM.
TEST(OccupancyTest, Sm90MaxRegistersLimitByRegisters) {
  const auto r = occ(sm90(), 256, 255);
  EXPECT_TRUE(r.launchable);
  EXPECT_EQ(r.registers_per_warp, 8192);
  EXPECT_EQ(r.blocks_by_registers, 1);
  EXPECT_EQ(r.active_blocks, 1);
  EXPECT_DOUBLE_EQ(r.occupancy, 0.125);
  EXPECT_TRUE(limited_first(r, "registers"));
}

TEST(OccupancyTest, Sm90RegistersHalveOccupancyAt128) {
  const auto r = occ(sm90(), 256, 128);
  EXPECT_EQ(r.active_blocks, 2);
  EXPECT_DOUBLE_EQ(r.occupancy, 0.25);
  EXPECT_TRUE(limited_first(r, "registers"));
  // 2 blocks of 8 warps need 4 warps per sub-partition: at most 4096 registers per warp.
  EXPECT_EQ(max_registers_for_blocks(sm90(), 256, 2), 128);
  EXPECT_EQ(max_registers_for_blocks(sm90(), 256, 4), 64);
}

// 100 KB dynamic + 1 KB reserved = 103424 B per block: 2 blocks in 228 KB.
TEST(OccupancyTest, Sm90LargeSharedMemoryLimitsBySharedMemory) {
  const auto r = occ(sm90(), 128, 32, 0, 100 * 1024);
  EXPECT_TRUE(r.launchable);
  EXPECT_TRUE(r.needs_shared_optin);
  EXPECT_EQ(r.shared_bytes_per_block, 103424);
  EXPECT_EQ(r.blocks_by_shared, 2);
  EXPECT_EQ(r.active_warps, 8);
  EXPECT_DOUBLE_EQ(r.occupancy, 0.125);
  EXPECT_TRUE(limited_first(r, "shared_memory"));
  EXPECT_EQ(max_shared_for_blocks(sm90(), 2), 115712);
}

// Measured on the H200: cudaOccupancyMaxActiveBlocksPerMultiprocessor gave 2
// for a 12-register kernel with 8 KB static shared memory, both at 256
// threads + 100 KB dynamic (after the opt-in) and at 1024 threads.
TEST(OccupancyTest, AgreesWithTheRuntimeOnTheH200) {
  EXPECT_EQ(occ(sm90(), 256, 12, 8192, 100 * 1024).active_blocks, 2);
  EXPECT_EQ(occ(sm90(), 1024, 12, 8192, 0).active_blocks, 2);
}

TEST(OccupancyTest, SharedMemoryAtAndOverTheBlockLimit) {
  const auto at = occ(sm90(), 128, 32, 0, 227 * 1024);
  EXPECT_TRUE(at.launchable);
  EXPECT_EQ(at.active_blocks, 1);
  const auto over = occ(sm90(), 128, 32, 0, 227 * 1024 + 1);
  EXPECT_FALSE(over.launchable);
  EXPECT_EQ(over.active_blocks, 0);
  EXPECT_NE(over.launch_error.find("shared memory"), std::string::npos) << over.launch_error;
}

TEST(OccupancyTest, TooManyRegistersForABlockCannotLaunch) {
  const auto r = occ(sm90(), 1024, 255);
  EXPECT_FALSE(r.launchable);
  EXPECT_NE(r.launch_error.find("too many resources requested for launch"), std::string::npos) << r.launch_error;
  const auto big = occ(sm90(), 2048, 16);
  EXPECT_FALSE(big.launchable);
  EXPECT_NE(big.launch_error.find("1024"), std::string::npos);
}

TEST(OccupancyTest, SmallBlocksHitTheBlockLimit) {
  const auto r = occ(sm90(), 32, 16);
  EXPECT_EQ(r.active_blocks, 32);
  EXPECT_DOUBLE_EQ(r.occupancy, 0.5);
  EXPECT_TRUE(limited_first(r, "blocks"));
}

TEST(OccupancyTest, BlockSizeThatDoesNotDivideTheSmLimitsByWarps) {
  const auto r = occ(sm90(), 768, 32);
  EXPECT_EQ(r.active_blocks, 2);
  EXPECT_DOUBLE_EQ(r.occupancy, 0.75);
  EXPECT_EQ(r.limited_by, std::vector<std::string>{"warps"});
}

TEST(OccupancyTest, Sm86HasFortyEightWarps) {
  const auto r = occ(*arch_limits("sm_86"), 256, 32);
  EXPECT_EQ(r.active_blocks, 6);
  EXPECT_EQ(r.max_warps, 48);
  EXPECT_DOUBLE_EQ(r.occupancy, 1.0);
  const auto s = occ(*arch_limits("sm_86"), 256, 32, 0, 48 * 1024);
  EXPECT_EQ(s.blocks_by_shared, 2);  // 49 KB per block in 100 KB
}

TEST(OccupancyTest, WavesOnTheDevice) {
  const auto w = compute_waves(2 * 1056 + 100, 8, 132);
  EXPECT_EQ(w.blocks_per_wave, 1056);
  EXPECT_EQ(w.full_waves, 2);
  EXPECT_NEAR(w.waves, 2.0947, 1e-3);
  EXPECT_NEAR(w.last_wave_fill, 100.0 / 1056.0, 1e-9);
  const auto exact = compute_waves(1056, 8, 132);
  EXPECT_DOUBLE_EQ(exact.last_wave_fill, 1.0);
}

TEST(OccupancyTest, DevicePropertiesOverrideTheTable) {
  DeviceProperties d = DeviceProperties::h200();
  d.shared_bytes_per_sm = 100 * 1024;
  const ArchLimits l = limits_for_device(d);
  EXPECT_EQ(l.shared_bytes_per_sm, 100 * 1024);
  EXPECT_NE(l.source.find("overridden"), std::string::npos);

  DeviceProperties old;
  old.arch = "sm_75";
  try {
    limits_for_device(old);
    FAIL() << "sm_75 has no table";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("known: sm_80, sm_86, sm_89, sm_90"), std::string::npos) << e.what();
  }
  old.max_threads_per_sm = 1024;
  old.max_blocks_per_sm = 16;
  old.registers_per_sm = 65536;
  old.shared_bytes_per_sm = 64 * 1024;
  const ArchLimits t = limits_for_device(old);
  EXPECT_EQ(t.max_warps_per_sm, 32);
  EXPECT_EQ(occ(t, 256, 32).active_blocks, 4);
}

AnalysisResult run_occupancy(const json& args, const Solution* solution = nullptr) {
  AnalysisInput in;
  in.args = args;
  in.solution = solution;
  return AnalysisRegistry::with_builtin_tools()->run("occupancy", in);
}

TEST(OccupancyToolTest, RegisterLimitedHintNamesLaunchBounds) {
  const auto r = run_occupancy({{"registers", 255}, {"block_size", 256}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.facts["kernels"][0]["occupancy"].get<double>(), 0.125);
  EXPECT_EQ(r.facts["kernels"][0]["limited_by"][0], "registers");
  ASSERT_FALSE(r.hints.empty());
  EXPECT_NE(r.hints[0].find("__launch_bounds__(256, 2)"), std::string::npos) << r.hints[0];
  EXPECT_NE(r.hints[0].find("-maxrregcount=128"), std::string::npos) << r.hints[0];
  EXPECT_NE(r.text.find("occupancy 12.5%"), std::string::npos) << r.text;
}

TEST(OccupancyToolTest, SmallGridLeavesSmsIdle) {
  const auto r = run_occupancy({{"registers", 32}, {"block_size", 256}, {"grid", 66}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.facts["kernels"][0]["waves"]["grid_blocks"], 66);
  EXPECT_EQ(r.facts["kernels"][0]["waves"]["blocks_per_wave"], 8 * 132);
  bool found = false;
  for (const auto& h : r.hints) found = found || h.find("66 SMs get no work") != std::string::npos;
  EXPECT_TRUE(found) << r.text;
}

TEST(OccupancyToolTest, TailWaveHint) {
  const auto r = run_occupancy({{"registers", 32}, {"block_size", 256}, {"grid", 1056 + 100}});
  ASSERT_TRUE(r.ok) << r.error;
  bool found = false;
  for (const auto& h : r.hints) found = found || h.find("persistent grid of 1056 blocks") != std::string::npos;
  EXPECT_TRUE(found) << r.text;
}

TEST(OccupancyToolTest, BlockSizeIsRequiredWithoutALiteralPlan) {
  const auto r = run_occupancy({{"registers", 32}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("block_size is required"), std::string::npos) << r.error;
}

TEST(OccupancyToolTest, NvrtcLaunchPlanLiteralsAreUsed) {
  // The normalized plan of docs/launch-plan.md: literals are canonical strings.
  Solution s;
  s.mode = SolutionMode::kNvrtc;
  s.launch = {{"kernels", json::array({{{"name", "k"},
                                        {"lowered_name", "_Z1kPf"},
                                        {"grid", json::array({"264", "1", "1"})},
                                        {"block", json::array({"128", "1", "1"})},
                                        {"shared_mem", "4096"}}})}};
  const auto r = run_occupancy({{"registers", 32}}, &s);
  ASSERT_TRUE(r.ok) << r.error;
  const json& k = r.facts["kernels"][0];
  EXPECT_EQ(k["name"], "_Z1kPf");
  EXPECT_EQ(k["threads_per_block"], 128);
  EXPECT_EQ(k["dynamic_shared_bytes"], 4096);
  EXPECT_EQ(k["waves"]["grid_blocks"], 264);

  // The plan's short form, with an expression for the shared memory.
  Solution one;
  one.mode = SolutionMode::kNvrtc;
  one.launch = {{"name", "k"},
                {"grid", json::array({"cdiv(numel(x), 128)"})},
                {"block", json::array({64, 2})},
                {"shared_mem", "dim(x, 1) * 4"}};
  const auto r1 = run_occupancy({{"registers", 32}}, &one);
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_EQ(r1.facts["kernels"][0]["threads_per_block"], 128);
  EXPECT_FALSE(r1.facts["kernels"][0].contains("waves"));
  EXPECT_NE(r1.text.find("depends on the shapes; assumed 0 B"), std::string::npos) << r1.text;

  Solution e = s;
  e.launch["kernels"][0]["block"] = json::array({"dim(x, 1)", "1", "1"});
  const auto bad = run_occupancy({{"registers", 32}}, &e);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("depends on the shapes"), std::string::npos) << bad.error;
}

TEST(OccupancyToolTest, SharedMemoryOverTheLimitCannotLaunch) {
  Solution s;
  s.mode = SolutionMode::kCuda;
  const auto r = run_occupancy({{"registers", 32}, {"block_size", 128}, {"dynamic_shared_bytes", 300000}}, &s);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.facts["kernels"][0]["launchable"].get<bool>());
  ASSERT_FALSE(r.hints.empty());
  EXPECT_NE(r.hints[0].find("cannot launch"), std::string::npos) << r.hints[0];
}

}  // namespace
}  // namespace kforge::env
