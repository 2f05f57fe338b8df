// End to end on the GPU host, where cuobjdump and nvdisasm exist: kernels
// built by nvcc, read back by the tools through the real binary utilities.
// Label `gpu`; no device is used, only the utilities the GPU host carries.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include "kforge/core/process.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/analysis.h"
#include "kforge/env/analysis/resources.h"
#include "kforge/env/analysis/sass.h"
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

// The kernel whose demangled name starts with `prefix`.
const json& kernel(const AnalysisResult& r, const std::string& prefix) {
  for (const json& k : r.facts["kernels"]) {
    if (k["demangled"].get<std::string>().rfind(prefix, 0) == 0) return k;
  }
  throw std::runtime_error("no kernel " + prefix + " in " + r.facts.dump());
}

std::filesystem::path cuda_tool_path(const std::string& name) {
  const std::filesystem::path on_path = kforge::find_on_path(name);
  return on_path.empty() ? std::filesystem::path("/usr/local/cuda/bin") / name : on_path;
}

class AnalysisGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(kforge::testing::make_temp_dir("kforge-analysis-gpu"));
    const std::string mixed = std::string(kforge::testing::kWmmaKernel) + kforge::testing::kScalarKernel +
                              kforge::testing::kVec4Kernel + kforge::testing::kSmemKernel;
    mixed_ = new NvccBuild(nvcc_build(mixed, *dir_, "mixed", NvccOutput::kSharedObject));
    spill_ = new NvccBuild(
        nvcc_build(kforge::testing::kStackKernel, *dir_, "spill", NvccOutput::kSharedObject, {"-maxrregcount=16"}));
    cubin_ = new NvccBuild(nvcc_build(kforge::testing::kSmemKernel, *dir_, "smem", NvccOutput::kCubin));
    hopper_ = new NvccBuild(nvcc_build(kforge::testing::kHopperKernel, *dir_, "hopper", NvccOutput::kCubin));
  }
  static void TearDownTestSuite() {
    kforge::remove_tree(*dir_);
    delete mixed_;
    delete spill_;
    delete cubin_;
    delete hopper_;
    delete dir_;
  }

  static Artifact artifact(const NvccBuild& b, SolutionMode mode) {
    EXPECT_EQ(b.exit_code, 0) << b.log;
    Artifact a;
    a.mode = mode;
    a.path = b.output;  // no compiler report: the tools must read the binary
    return a;
  }

  static AnalysisResult run(const std::string& tool, const Artifact& a, const json& args = json::object(),
                            const TaskSpec* task = nullptr) {
    AnalysisInput in;
    in.artifact = &a;
    in.task = task;
    in.args = args;
    return AnalysisRegistry::global().run(tool, in);
  }

  static inline std::filesystem::path* dir_ = nullptr;
  static inline NvccBuild* mixed_ = nullptr;
  static inline NvccBuild* spill_ = nullptr;
  static inline NvccBuild* cubin_ = nullptr;
  static inline NvccBuild* hopper_ = nullptr;
};

TEST_F(AnalysisGpuTest, SassMixOfASharedObject) {
  const Artifact a = artifact(*mixed_, SolutionMode::kCuda);
  const AnalysisResult r = run("sass_mix", a);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.facts["disassembler"], "cuobjdump -sass");
  EXPECT_EQ(r.facts["kernels"].size(), 4u) << r.text;

  const json vec = kernel(r, "vec4_add_kernel");
  EXPECT_EQ(vec["arch"], "sm_90a");
  EXPECT_GE(vec["access_bits"]["global_load"]["128"].get<int>(), 2) << vec.dump();
  EXPECT_GE(vec["access_bits"]["global_store"]["128"].get<int>(), 1) << vec.dump();
  EXPECT_FALSE(vec["access_bits"]["global_load"].contains("32")) << vec.dump();

  const json scale = kernel(r, "scale_kernel");
  EXPECT_EQ(scale["access_bits"]["global_load"].size(), 1u) << scale.dump();
  EXPECT_GE(scale["access_bits"]["global_load"]["32"].get<int>(), 1) << scale.dump();
  EXPECT_GE(scale["by_opcode"]["FCHK"].get<int>(), 1) << scale.dump();
  EXPECT_TRUE(any_contains(r.hints, "scale_kernel(float*, float const*, float, int): all global loads and stores"))
      << r.text;
  EXPECT_TRUE(any_contains(r.hints, "FCHK")) << r.text;

  const json wmma = kernel(r, "wmma_kernel");
  bool hmma = false;
  for (auto it = wmma["tensor_mnemonics"].begin(); it != wmma["tensor_mnemonics"].end(); ++it) {
    hmma = hmma || it.key().rfind("HMMA", 0) == 0;
  }
  EXPECT_TRUE(hmma) << wmma.dump();

  const json smem = kernel(r, "smem_kernel");
  EXPECT_GE(smem["by_opcode"]["BAR"].get<int>(), 1) << smem.dump();
  EXPECT_GE(smem["by_class"]["shared_store"].get<int>(), 1) << smem.dump();
}

TEST_F(AnalysisGpuTest, SassMixSeesSpills) {
  const Artifact a = artifact(*spill_, SolutionMode::kCuda);
  const AnalysisResult r = run("sass_mix", a);
  ASSERT_TRUE(r.ok) << r.error;
  const json k = kernel(r, "stack_kernel");
  EXPECT_GT(k["by_class"].value("local_load", 0) + k["by_class"].value("local_store", 0), 0) << k.dump();
  EXPECT_TRUE(any_contains(r.hints, "LDL/STL present")) << r.text;
}

// Every instruction line cuobjdump prints is one parsed instruction.
TEST_F(AnalysisGpuTest, ParserReadsEveryLineOfRealCuobjdumpOutput) {
  int rc = 0;
  const std::string text =
      kforge::testing::run_capture({cuda_tool_path("cuobjdump").string(), "-sass", mixed_->output.string()}, &rc);
  ASSERT_EQ(rc, 0) << text;
  const std::regex address(R"(^\s*/\*[0-9a-f]{4,}\*/\s+\S)");
  size_t lines = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines += std::regex_search(line, address) ? 1 : 0;
  size_t parsed = 0;
  const auto fns = parse_sass(text);
  for (const auto& f : fns) {
    parsed += f.instructions.size();
    EXPECT_EQ(f.arch, "sm_90a") << f.name;
    for (const auto& ins : f.instructions) {
      EXPECT_NE(sass_opcode_class(ins.base), "other") << ins.opcode << " in " << f.name;
    }
  }
  EXPECT_EQ(fns.size(), 4u);
  EXPECT_GT(parsed, 40u);
  EXPECT_EQ(parsed, lines);
}

TEST_F(AnalysisGpuTest, ResourceUsageViaCuobjdumpMatchesPtxas) {
  for (const NvccBuild* b : {mixed_, spill_}) {
    const Artifact a = artifact(*b, SolutionMode::kCuda);
    const AnalysisResult r = run("resource_usage", a);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.facts["source"], "cuobjdump");
    const auto ptxas = parse_ptxas_info(b->log);
    ASSERT_FALSE(ptxas.empty()) << b->log;
    for (const KernelResources& k : ptxas) {
      SCOPED_TRACE(k.name);
      const json f = kernel(r, demangle(k.name));
      EXPECT_EQ(f["registers"], *k.registers);
      EXPECT_EQ(f.value("shared_bytes", 0), k.shared_bytes.value_or(0));
      EXPECT_EQ(f.value("stack_bytes", 0), k.stack_bytes.value_or(0));
    }
  }
  const AnalysisResult smem = run("resource_usage", artifact(*mixed_, SolutionMode::kCuda), {{"kernel", "smem"}});
  ASSERT_TRUE(smem.ok) << smem.error;
  EXPECT_EQ(smem.facts["kernels"][0]["shared_bytes"], 4096);
}

TEST_F(AnalysisGpuTest, OccupancyViaCuobjdump) {
  const Artifact a = artifact(*cubin_, SolutionMode::kNvrtc);
  const AnalysisResult r = run("occupancy", a, {{"block_size", 256}, {"grid", 132 * 8}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.facts["resource_source"], "cuobjdump");
  const auto ptxas = parse_ptxas_info(cubin_->log);
  ASSERT_EQ(ptxas.size(), 1u);
  EXPECT_EQ(r.facts["kernels"][0]["registers"], *ptxas[0].registers);
  EXPECT_EQ(r.facts["kernels"][0]["static_shared_bytes"], 4096);
  EXPECT_DOUBLE_EQ(r.facts["kernels"][0]["waves"]["waves"].get<double>(), 1.0);
}

TEST_F(AnalysisGpuTest, HopperInstructionsAreClassified) {
  const Artifact a = artifact(*hopper_, SolutionMode::kNvrtc);
  TaskSpec task;
  task.nodes = {GraphNode{"matmul", {"a", "b"}, "c", json::object()}};
  const AnalysisResult r = run("sass_mix", a, json::object(), &task);
  ASSERT_TRUE(r.ok) << r.error;
  const json& k = r.facts["kernels"][0];
  bool hgmma = false;
  for (auto it = k["tensor_mnemonics"].begin(); it != k["tensor_mnemonics"].end(); ++it) {
    hgmma = hgmma || it.key().rfind("HGMMA.64x8x16.F32.BF16", 0) == 0;
  }
  EXPECT_TRUE(hgmma) << k.dump();
  EXPECT_GE(k["by_class"].value("tma", 0), 1) << k.dump();
  EXPECT_GE(k["by_opcode"].value("SYNCS", 0), 1) << k.dump();
  EXPECT_EQ(k["by_class"].value("other", 0), 0) << k.dump();
  EXPECT_FALSE(any_contains(r.hints, "not using tensor cores")) << r.text;
  EXPECT_FALSE(any_contains(r.hints, "consider wgmma")) << r.text;
}

// With only nvdisasm available, a CUBIN is still disassembled, to the same mix.
TEST_F(AnalysisGpuTest, NvdisasmReadsACubin) {
  const Artifact a = artifact(*cubin_, SolutionMode::kNvrtc);
  const AnalysisResult by_cuobjdump = run("sass_mix", a);
  ASSERT_TRUE(by_cuobjdump.ok) << by_cuobjdump.error;

  const auto only = kforge::testing::make_temp_dir("kforge-nvdisasm-only");
  std::filesystem::create_symlink(cuda_tool_path("nvdisasm"), only / "nvdisasm");
  AnalysisInput in;
  in.artifact = &a;
  in.config.tool_dirs = {only};
  const AnalysisResult r = AnalysisRegistry::global().run("sass_mix", in);
  kforge::remove_tree(only);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.facts["disassembler"], "nvdisasm");
  ASSERT_EQ(r.facts["kernels"].size(), 1u);
  EXPECT_EQ(r.facts["kernels"][0]["name"], "_Z11smem_kernelPfPKfi");
  EXPECT_EQ(r.facts["kernels"][0]["by_opcode"], by_cuobjdump.facts["kernels"][0]["by_opcode"]);
  EXPECT_EQ(r.facts["kernels"][0]["instructions"], by_cuobjdump.facts["kernels"][0]["instructions"]);
}

}  // namespace
}  // namespace kforge::env
