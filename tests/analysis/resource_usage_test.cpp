// resource_usage and occupancy on kernels built by the real nvcc, with the
// compiler report recorded the way a compile step records it
// (Artifact::resources). Needs nvcc and ptxas only, no GPU and no cuobjdump.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "kforge/core/remove_tree.h"
#include "kforge/env/analysis.h"
#include "kforge/env/analysis/resources.h"
#include "nvcc_helper.h"
#include "test_kernels.h"

namespace kforge::env {
namespace {

using kforge::testing::nvcc_build;
using kforge::testing::NvccBuild;
using kforge::testing::NvccOutput;

bool any_contains(const std::vector<std::string>& hints, const std::string& needle) {
  return std::any_of(hints.begin(), hints.end(),
                     [&](const std::string& h) { return h.find(needle) != std::string::npos; });
}

class ResourceUsageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(kforge::testing::make_temp_dir("kforge-analysis"));
    smem_ = new NvccBuild(nvcc_build(kforge::testing::kSmemKernel, *dir_, "smem", NvccOutput::kCubin));
    stack_ = new NvccBuild(nvcc_build(kforge::testing::kStackKernel, *dir_, "stack", NvccOutput::kCubin));
    spill_ = new NvccBuild(
        nvcc_build(kforge::testing::kStackKernel, *dir_, "spill", NvccOutput::kCubin, {"-maxrregcount=16"}));
  }
  static void TearDownTestSuite() {
    kforge::remove_tree(*dir_);
    delete smem_;
    delete stack_;
    delete spill_;
    delete dir_;
  }

  static KernelResources only(const NvccBuild& b) {
    EXPECT_EQ(b.exit_code, 0) << b.log;
    const auto ks = parse_ptxas_info(b.log);
    EXPECT_EQ(ks.size(), 1u) << b.log;
    return ks.empty() ? KernelResources{} : ks[0];
  }

  static Artifact artifact(const NvccBuild& b, bool with_report) {
    Artifact a;
    a.hash = b.output.filename().string();
    a.mode = SolutionMode::kNvrtc;
    a.path = b.output;
    if (with_report) a.resources = resources_to_json(parse_ptxas_info(b.log));
    return a;
  }

  static inline std::filesystem::path* dir_ = nullptr;
  static inline NvccBuild* smem_ = nullptr;
  static inline NvccBuild* stack_ = nullptr;
  static inline NvccBuild* spill_ = nullptr;
};

TEST_F(ResourceUsageTest, PtxasReportOfStaticSharedMemory) {
  const KernelResources k = only(*smem_);
  EXPECT_EQ(k.name, "_Z11smem_kernelPfPKfi");
  EXPECT_EQ(k.arch, "sm_90a");
  EXPECT_EQ(k.entry, true);
  EXPECT_EQ(k.shared_bytes, 4096);
  EXPECT_EQ(k.barriers, 1);
  ASSERT_TRUE(k.registers.has_value());
  EXPECT_GE(*k.registers, 4);
  EXPECT_LE(*k.registers, 64);
  EXPECT_EQ(k.spill_bytes(), 0);
  EXPECT_EQ(k.stack_bytes, 0);
}

TEST_F(ResourceUsageTest, PtxasReportOfSpillsUnderARegisterCap) {
  const KernelResources k = only(*spill_);
  ASSERT_TRUE(k.registers.has_value());
  EXPECT_LE(*k.registers, 24);  // ptxas raises -maxrregcount=16 to its sm_90 minimum of 24
  EXPECT_GT(k.spill_store_bytes.value_or(0), 0);
  EXPECT_GT(k.spill_load_bytes.value_or(0), 0);
  EXPECT_GT(k.stack_bytes.value_or(0), 0);
}

TEST_F(ResourceUsageTest, ToolReportsSpillsFromTheCompilerReport) {
  const Artifact a = artifact(*spill_, true);
  AnalysisInput in;
  in.artifact = &a;
  const AnalysisResult r = AnalysisRegistry::global().run("resource_usage", in);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.facts["source"], "compiler report");
  const KernelResources k = only(*spill_);
  const json& f = r.facts["kernels"][0];
  EXPECT_EQ(f["registers"], *k.registers);
  EXPECT_EQ(f["spill_bytes"], *k.spill_bytes());
  EXPECT_EQ(f["demangled"], "stack_kernel(float*, float const*, int, int)");
  EXPECT_TRUE(any_contains(r.hints, "spills registers to local memory (" + std::to_string(*k.spill_bytes()) + " B"))
      << r.text;
  EXPECT_NE(r.text.find("stack_kernel(float*, float const*, int, int): " + std::to_string(*k.registers) +
                        " registers/thread"),
            std::string::npos)
      << r.text;
}

TEST_F(ResourceUsageTest, ToolExplainsAStackFrameWithoutSpills) {
  const KernelResources k = only(*stack_);
  ASSERT_EQ(k.spill_bytes(), 0) << stack_->log;
  ASSERT_GT(k.stack_bytes.value_or(0), 0) << stack_->log;
  const Artifact a = artifact(*stack_, true);
  AnalysisInput in;
  in.artifact = &a;
  const AnalysisResult r = AnalysisRegistry::global().run("resource_usage", in);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(any_contains(r.hints, std::to_string(*k.stack_bytes) + "-byte stack frame without spills")) << r.text;
  EXPECT_FALSE(any_contains(r.hints, "spills registers"));
}

TEST_F(ResourceUsageTest, KernelFilter) {
  Artifact a = artifact(*smem_, true);
  const json stack_report = resources_to_json(parse_ptxas_info(stack_->log));
  for (const auto& [name, value] : stack_report.items()) a.resources[name] = value;
  AnalysisInput in;
  in.artifact = &a;
  in.args = {{"kernel", "stack_kernel"}};
  AnalysisResult r = AnalysisRegistry::global().run("resource_usage", in);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.facts["kernels"].size(), 1u);
  EXPECT_EQ(r.facts["kernels"][0]["name"], "_Z12stack_kernelPfPKfii");
  in.args = {{"kernel", "gemm"}};
  r = AnalysisRegistry::global().run("resource_usage", in);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("no kernel matches \"gemm\"; kernels in this binary: "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("smem_kernel(float*, float const*, int)"), std::string::npos) << r.error;
}

TEST_F(ResourceUsageTest, OccupancyUsesTheCompiledResources) {
  const KernelResources k = only(*smem_);
  const Artifact a = artifact(*smem_, true);
  AnalysisInput in;
  in.artifact = &a;
  in.args = {{"block_size", 1024}, {"dynamic_shared_bytes", 100 * 1024}};
  const AnalysisResult r = AnalysisRegistry::global().run("occupancy", in);
  ASSERT_TRUE(r.ok) << r.error;
  const json& f = r.facts["kernels"][0];
  EXPECT_EQ(f["registers"], *k.registers);
  EXPECT_EQ(f["static_shared_bytes"], 4096);
  // 4096 + 102400 + 1024 reserved = 107520 B per block: 2 blocks of 32 warps fill the SM.
  EXPECT_EQ(f["shared_bytes_per_block_allocated"], 107520);
  EXPECT_EQ(f["blocks_per_sm_by"]["shared_memory"], 2);
  EXPECT_EQ(f["active_blocks_per_sm"], 2);
  EXPECT_EQ(r.facts["resource_source"], "compiler report");
}

TEST_F(ResourceUsageTest, WithoutAReportOrCuobjdumpTheToolSaysWhy) {
  const auto empty_dir = kforge::testing::make_temp_dir("kforge-no-tools");
  const Artifact a = artifact(*smem_, false);
  AnalysisInput in;
  in.artifact = &a;
  in.config.tool_dirs = {empty_dir};
  AnalysisResult r = AnalysisRegistry::global().run("resource_usage", in);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("resource usage is not available"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("cuobjdump not found on this machine (searched " + empty_dir.string() + ")"),
            std::string::npos)
      << r.error;
  r = AnalysisRegistry::global().run("sass_mix", in);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("SASS is not available: cuobjdump not found on this machine"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("nvdisasm not found on this machine"), std::string::npos) << r.error;
  kforge::remove_tree(empty_dir);
}

}  // namespace
}  // namespace kforge::env
