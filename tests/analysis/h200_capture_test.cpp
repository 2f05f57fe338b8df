// The parsers on real output captured on the H200 host (fixtures/h200/README.md
// says how). The gpu suite checks the same against freshly produced output.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "kforge/core/document.h"
#include "kforge/env/analysis/resources.h"
#include "kforge/env/analysis/sass.h"

namespace kforge::env {
namespace {

std::string capture(const std::string& name) {
  return read_text_file(std::string(KFORGE_ANALYSIS_FIXTURES) + "/h200/" + name);
}

size_t instruction_lines(const std::string& text) {
  static const std::regex kAddress(R"(^\s*/\*[0-9a-f]{4,}\*/\s+\S)");
  size_t n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) n += std::regex_search(line, kAddress) ? 1 : 0;
  return n;
}

const SassMix& mix_of(const std::vector<SassMix>& mixes, const std::string& name) {
  auto it = std::find_if(mixes.begin(), mixes.end(), [&](const SassMix& m) { return m.name == name; });
  if (it == mixes.end()) throw std::runtime_error("no function " + name);
  return *it;
}

std::vector<SassMix> mixes_of(const std::vector<SassFunction>& fns) {
  std::vector<SassMix> out;
  for (const auto& f : fns) out.push_back(summarize_sass(f));
  return out;
}

TEST(H200CaptureTest, CuobjdumpSassOfASharedObject) {
  const std::string text = capture("cuobjdump_sass_mixed_so.txt");
  const auto fns = parse_sass(text);
  ASSERT_EQ(fns.size(), 4u);
  size_t parsed = 0;
  for (const auto& f : fns) {
    EXPECT_EQ(f.arch, "sm_90a") << f.name;
    parsed += f.instructions.size();
    for (const auto& ins : f.instructions) EXPECT_NE(sass_opcode_class(ins.base), "other") << ins.opcode;
  }
  EXPECT_EQ(parsed, instruction_lines(text));

  const auto mixes = mixes_of(fns);
  const SassMix vec = mix_of(mixes, "_Z15vec4_add_kernelPK6float4S1_PS_i");
  EXPECT_EQ(vec.access_bits.at("global_load").at(128), 2);
  EXPECT_EQ(vec.access_bits.at("global_store").at(128), 1);
  EXPECT_EQ(vec.count_opcode("FADD"), 4);
  EXPECT_TRUE(sass_mix_hints(vec, nullptr, "sm_90a").empty());

  const SassMix scale = mix_of(mixes, "_Z12scale_kernelPfPKffi");
  EXPECT_EQ(scale.access_bits.at("global_load").size(), 1u);
  EXPECT_GE(scale.count_opcode("FCHK"), 1);
  EXPECT_GE(scale.count_opcode("MUFU"), 1);
  const auto scale_hints = sass_mix_hints(scale, nullptr, "sm_90a");
  EXPECT_EQ(scale_hints.size(), 2u);  // vectorize, division

  const SassMix wmma = mix_of(mixes, "_Z11wmma_kernelPK6__halfS1_Pf");
  EXPECT_GE(wmma.count_opcode("HMMA"), 1);
  const SassMix smem = mix_of(mixes, "_Z11smem_kernelPfPKfi");
  EXPECT_GE(smem.count_opcode("BAR"), 1);
  EXPECT_GE(smem.count_class("shared_store"), 1);
  EXPECT_GE(smem.count_class("shared_load"), 1);
}

TEST(H200CaptureTest, HopperKernelAndNvdisasmAgree) {
  const std::string cuobjdump = capture("cuobjdump_sass_hopper_cubin.txt");
  const std::string nvdisasm = capture("nvdisasm_c_hopper_cubin.txt");
  const auto a = parse_sass(cuobjdump);
  const auto b = parse_sass(nvdisasm);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].name, "_Z13hopper_kernel14CUtensorMap_stPfmmi");
  EXPECT_EQ(b[0].name, a[0].name);
  EXPECT_EQ(a[0].arch, "sm_90a");
  EXPECT_EQ(b[0].arch, "sm_90a");
  EXPECT_EQ(a[0].instructions.size(), instruction_lines(cuobjdump));
  EXPECT_EQ(b[0].instructions.size(), instruction_lines(nvdisasm));
  const SassMix ma = summarize_sass(a[0]);
  const SassMix mb = summarize_sass(b[0]);
  EXPECT_EQ(ma.by_opcode, mb.by_opcode);
  EXPECT_EQ(ma.count_class("other"), 0);
  EXPECT_GE(ma.count_opcode("HGMMA"), 1);
  EXPECT_GE(ma.count_opcode("UTMALDG"), 1);
  EXPECT_GE(ma.count_opcode("SYNCS"), 2);
  EXPECT_GE(ma.count_opcode("WARPGROUP"), 1);
  bool shape = false;
  for (const auto& [m, n] : ma.by_mnemonic) shape = shape || m.rfind("HGMMA.64x8x16.F32.BF16", 0) == 0;
  EXPECT_TRUE(shape);
}

TEST(H200CaptureTest, ResourceUsageMatchesTheCompilerReport) {
  auto cuobj = parse_cuobjdump_resource_usage(capture("cuobjdump_res_usage_mixed_so.txt"));
  auto hopper = parse_cuobjdump_resource_usage(capture("cuobjdump_res_usage_hopper_cubin.txt"));
  ASSERT_EQ(cuobj.size(), 4u);
  ASSERT_EQ(hopper.size(), 1u);
  EXPECT_EQ(hopper[0].arch, "");  // a bare CUBIN's listing names no arch
  EXPECT_EQ(remove_reserved_shared(cuobj, "sm_90a"), 1);
  EXPECT_EQ(remove_reserved_shared(hopper, "sm_90a"), 1);
  cuobj.push_back(hopper[0]);
  const auto ptxas = parse_ptxas_info(capture("ptxas_logs.txt"));
  for (const auto& k : cuobj) {
    SCOPED_TRACE(k.name);
    auto it = std::find_if(ptxas.begin(), ptxas.end(), [&](const KernelResources& p) { return p.name == k.name; });
    ASSERT_NE(it, ptxas.end());
    EXPECT_EQ(k.registers, it->registers);
    EXPECT_EQ(k.shared_bytes.value_or(0), it->shared_bytes.value_or(0));
    EXPECT_EQ(k.stack_bytes, it->stack_bytes);
  }
  std::vector<KernelResources> sm80 = {KernelResources{}};
  sm80[0].arch = "sm_80";
  sm80[0].shared_bytes = 8192;
  EXPECT_EQ(remove_reserved_shared(sm80, "sm_90a"), 0);
  EXPECT_EQ(sm80[0].shared_bytes, 8192);
}

}  // namespace
}  // namespace kforge::env
