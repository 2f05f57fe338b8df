#include "kforge/env/analysis/sass.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kforge/core/document.h"

namespace kforge::env {
namespace {

// Hand-written in cuobjdump's format (see the fixture's header); the GPU suite
// checks the parser against real cuobjdump and nvdisasm output.
std::string fixture() { return read_text_file(std::string(KFORGE_ANALYSIS_FIXTURES) + "/sass_sm90a_handwritten.txt"); }

const SassFunction& find(const std::vector<SassFunction>& fns, const char* name) {
  auto it = std::find_if(fns.begin(), fns.end(), [&](const SassFunction& f) { return f.name == name; });
  if (it == fns.end()) throw std::runtime_error(std::string("no function ") + name);
  return *it;
}

bool any_contains(const std::vector<std::string>& hints, const std::string& needle) {
  return std::any_of(hints.begin(), hints.end(),
                     [&](const std::string& h) { return h.find(needle) != std::string::npos; });
}

TaskSpec task_with(const std::string& op, DType dtype = DType::kFloat32) {
  TaskSpec t;
  t.id = "t";
  TensorSpec x;
  x.name = "x";
  x.shape = {64, 64};
  x.dtype = dtype;
  t.inputs = {x};
  t.nodes = {GraphNode{op, {"x", "x"}, "y", json::object()}};
  t.outputs = {"y"};
  return t;
}

TEST(SassParserTest, FindsEveryFunctionWithItsArch) {
  const auto fns = parse_sass(fixture());
  ASSERT_EQ(fns.size(), 7u);
  EXPECT_EQ(fns[0].name, "_Z13gemm_mma_bf16PK13__nv_bfloat16S1_Pfiii");
  EXPECT_EQ(fns[0].arch, "sm_80");
  for (size_t i = 1; i < fns.size(); ++i) EXPECT_EQ(fns[i].arch, "sm_90a") << fns[i].name;
  EXPECT_EQ(find(fns, "_Z12scale_kernelPfPKffi").instructions.size(), 35u);  // NOP padding included
  EXPECT_EQ(find(fns, "_Z15vec4_add_kernelPK6float4S1_PS_i").instructions.size(), 24u);
  EXPECT_EQ(find(fns, "_Z10gemm_wgmmaP13__nv_bfloat16PKS_S2_iii").instructions.size(), 35u);
}

TEST(SassParserTest, SplitsAddressPredicateOpcodeAndOperands) {
  const auto fns = parse_sass(fixture());
  const auto& scale = find(fns, "_Z12scale_kernelPfPKffi").instructions;
  EXPECT_EQ(scale[0].address, 0u);
  EXPECT_EQ(scale[0].opcode, "LDC");
  EXPECT_EQ(scale[0].operands, "R1, c[0x0][0x28]");
  EXPECT_EQ(scale[7].address, 0x70u);
  EXPECT_EQ(scale[7].predicate, "@P0");
  EXPECT_EQ(scale[7].opcode, "EXIT");
  EXPECT_EQ(scale[20].predicate, "@!P0");
  EXPECT_EQ(scale[20].base, "BRA");
  EXPECT_EQ(scale[31].opcode, "BRA");  // "BRA 0x250;" has no space before ';'
  EXPECT_EQ(scale[31].operands, "0x250");
  const auto& wg = find(fns, "_Z10gemm_wgmmaP13__nv_bfloat16PKS_S2_iii").instructions;
  EXPECT_EQ(wg[16].opcode, "HGMMA.64x128x16.F32.BF16");
  EXPECT_EQ(wg[16].base, "HGMMA");
  EXPECT_EQ(wg[16].operands, "R24, gdesc[UR16], RZ, !UPT");
  EXPECT_EQ(wg[23].predicate, "@UP0");
}

TEST(SassParserTest, ReadsNvdisasmListings) {
  const std::string text =
      "\t.headerflags\t@\"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 "
      "EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n"
      "\t.section\t.text._Z3fooPf,\"ax\",@progbits\n"
      "\t.sectioninfo\t@\"SHI_REGISTERS=8\"\n"
      "        .global         _Z3fooPf\n"
      "_Z3fooPf:\n"
      ".text._Z3fooPf:\n"
      "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
      "        /*0010*/                   S2R R0, SR_TID.X ;\n"
      ".L_x_0:\n"
      "        /*0020*/               @P0 BRA `(.L_x_0) ;\n"
      "        /*0030*/                   EXIT ;\n"
      ".L_x_1:\n"
      "        /*0040*/                   BRA `(.L_x_1);\n"
      "        /*0050*/                   NOP;\n";
  const auto fns = parse_sass(text);
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(fns[0].name, "_Z3fooPf");
  ASSERT_EQ(fns[0].instructions.size(), 6u);
  EXPECT_EQ(fns[0].instructions[2].predicate, "@P0");
  EXPECT_EQ(summarize_sass(fns[0]).instructions, 5);
}

TEST(SassParserTest, SectionsAfterAFunctionAreNotAttributedToIt) {
  const std::string text =
      "\t\tFunction : k\n"
      "        /*0000*/                   EXIT ;      /* 0x000000000000794d */\n"
      "                                               /* 0x000fea0003800000 */\n"
      "                .nv.uft :\n"
      "        /*0000*/                   CALL.ABS.NOINC 0x0 ;    /* 0x0000000000007943 */\n";
  const auto fns = parse_sass(text);
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(fns[0].instructions.size(), 1u);
}

TEST(SassClassTest, OpcodesMapToClasses) {
  EXPECT_EQ(sass_opcode_class("FFMA"), "fp32");
  EXPECT_EQ(sass_opcode_class("HFMA2"), "fp16");
  EXPECT_EQ(sass_opcode_class("DFMA"), "fp64");
  EXPECT_EQ(sass_opcode_class("HGMMA"), "tensor");
  EXPECT_EQ(sass_opcode_class("QGMMA"), "tensor");
  EXPECT_EQ(sass_opcode_class("IMMA"), "tensor");
  EXPECT_EQ(sass_opcode_class("LDG"), "global_load");
  EXPECT_EQ(sass_opcode_class("STG"), "global_store");
  EXPECT_EQ(sass_opcode_class("LDSM"), "shared_load");
  EXPECT_EQ(sass_opcode_class("LDL"), "local_load");
  EXPECT_EQ(sass_opcode_class("LDGSTS"), "async_copy");
  EXPECT_EQ(sass_opcode_class("UTMALDG"), "tma");
  EXPECT_EQ(sass_opcode_class("SYNCS"), "sync");
  EXPECT_EQ(sass_opcode_class("BAR"), "sync");
  EXPECT_EQ(sass_opcode_class("BRA"), "control");
  EXPECT_EQ(sass_opcode_class("MUFU"), "special");
  EXPECT_EQ(sass_opcode_class("IMAD"), "integer");
  EXPECT_EQ(sass_opcode_class("UIADD3"), "integer");
  EXPECT_EQ(sass_opcode_class("ULOP3"), "integer");
  EXPECT_EQ(sass_opcode_class("F2FP"), "conversion");
  EXPECT_EQ(sass_opcode_class("I2F"), "conversion");
  EXPECT_EQ(sass_opcode_class("SHFL"), "warp");
  EXPECT_EQ(sass_opcode_class("NOP"), "nop");
  EXPECT_EQ(sass_opcode_class("XYZZY"), "other");
  for (const auto& op : {"FFMA", "LDG", "HGMMA", "XYZZY"}) {
    const auto& names = sass_class_names();
    EXPECT_NE(std::find(names.begin(), names.end(), sass_opcode_class(op)), names.end()) << op;
  }
}

TEST(SassClassTest, AccessWidthFromModifiers) {
  EXPECT_EQ(sass_access_bits("LDG.E"), 32);
  EXPECT_EQ(sass_access_bits("LDG.E.128.CONSTANT"), 128);
  EXPECT_EQ(sass_access_bits("LDG.E.LTC128B.64"), 64);  // LTC128B is a cache hint, not a width
  EXPECT_EQ(sass_access_bits("LDG.E.ENL2.256"), 256);
  EXPECT_EQ(sass_access_bits("STG.E.U8"), 8);
  EXPECT_EQ(sass_access_bits("LDS.U16"), 16);
  EXPECT_EQ(sass_access_bits("STL.128"), 128);
  EXPECT_EQ(sass_access_bits("LDSM.16.M88.4"), 0);
  EXPECT_EQ(sass_access_bits("ATOMG.E.ADD.F32"), 0);
}

TEST(SassMixTest, CountsClassesAndWidths) {
  const auto fns = parse_sass(fixture());
  const SassMix vec = summarize_sass(find(fns, "_Z15vec4_add_kernelPK6float4S1_PS_i"));
  EXPECT_EQ(vec.instructions, 23);  // one NOP of padding left out
  EXPECT_EQ(vec.count_opcode("FADD"), 4);
  EXPECT_EQ(vec.count_class("fp32"), 4);
  EXPECT_EQ(vec.access_bits.at("global_load").at(128), 2);
  EXPECT_EQ(vec.access_bits.at("global_store").at(128), 1);
  EXPECT_EQ(vec.predicated, 1);

  const SassMix wg = summarize_sass(find(fns, "_Z10gemm_wgmmaP13__nv_bfloat16PKS_S2_iii"));
  EXPECT_EQ(wg.count_class("tensor"), 4);
  EXPECT_EQ(wg.by_mnemonic.at("HGMMA.64x128x16.F32.BF16"), 4);
  EXPECT_EQ(wg.count_class("tma"), 2);
  EXPECT_EQ(wg.count_opcode("SYNCS"), 4);
  EXPECT_EQ(wg.count_class("conversion"), 2);

  const SassMix mma = summarize_sass(fns[0]);
  EXPECT_EQ(mma.count_class("async_copy"), 3);  // LDGSTS x2 + LDGDEPBAR
  EXPECT_EQ(mma.count_class("shared_load"), 2);

  const json j = to_json(wg, 3);
  EXPECT_EQ(j["top_mnemonics"].size(), 3u);
  EXPECT_EQ(j["top_mnemonics"][0]["mnemonic"], "BRA");  // 5 branches
  EXPECT_EQ(j["top_mnemonics"][1]["mnemonic"], "HGMMA.64x128x16.F32.BF16");
  EXPECT_EQ(j["top_mnemonics"][1]["count"], 4);
  EXPECT_EQ(j["tensor_mnemonics"]["HGMMA.64x128x16.F32.BF16"], 4);
  EXPECT_EQ(j["demangled"], "gemm_wgmma(__nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 const*, int, int, int)");
}

TEST(SassHintsTest, ScalarKernelGetsVectorizeAndDivisionHints) {
  const auto fns = parse_sass(fixture());
  const auto h = sass_mix_hints(summarize_sass(find(fns, "_Z12scale_kernelPfPKffi")), nullptr, "sm_90a");
  EXPECT_TRUE(any_contains(h, "vectorize to 128-bit")) << h.size();
  EXPECT_TRUE(any_contains(h, "FCHK"));
  EXPECT_FALSE(any_contains(h, "tensor"));
}

TEST(SassHintsTest, VectorizedKernelGetsNoWidthHint) {
  const auto fns = parse_sass(fixture());
  const auto h = sass_mix_hints(summarize_sass(find(fns, "_Z15vec4_add_kernelPK6float4S1_PS_i")), nullptr, "sm_90a");
  EXPECT_TRUE(h.empty()) << h.front();
}

TEST(SassHintsTest, MatmulWithoutTensorCores) {
  const auto fns = parse_sass(fixture());
  const SassMix m = summarize_sass(find(fns, "_Z11naive_sgemmPKfS0_Pfiii"));
  const TaskSpec mm = task_with("matmul");
  EXPECT_TRUE(any_contains(sass_mix_hints(m, &mm, "sm_90a"), "not using tensor cores"));
  const TaskSpec relu = task_with("relu");
  EXPECT_FALSE(any_contains(sass_mix_hints(m, &relu, "sm_90a"), "tensor cores"));
  EXPECT_FALSE(any_contains(sass_mix_hints(m, nullptr, "sm_90a"), "tensor cores"));
}

TEST(SassHintsTest, WgmmaKernelIsNotToldToUseTensorCores) {
  const auto fns = parse_sass(fixture());
  const TaskSpec mm = task_with("matmul");
  const auto h = sass_mix_hints(summarize_sass(find(fns, "_Z10gemm_wgmmaP13__nv_bfloat16PKS_S2_iii")), &mm, "sm_90a");
  EXPECT_FALSE(any_contains(h, "tensor")) << (h.empty() ? "" : h.front());
  EXPECT_FALSE(any_contains(h, "consider wgmma"));
  EXPECT_FALSE(any_contains(h, "sm_90a target"));
}

TEST(SassHintsTest, MmaSyncOnHopperSuggestsWgmma) {
  SassFunction f{"_Z4gemmv", "sm_90a", {}};
  for (const char* line : {"HMMA.16816.F32.BF16", "HMMA.16816.F32.BF16", "LDSM.16.M88.4", "EXIT"}) {
    SassInstruction ins;
    ins.opcode = line;
    ins.base = ins.opcode.substr(0, ins.opcode.find('.'));
    f.instructions.push_back(ins);
  }
  const TaskSpec mm = task_with("bmm");
  EXPECT_TRUE(any_contains(sass_mix_hints(summarize_sass(f), &mm, "sm_90a"), "consider wgmma"));
  f.arch = "sm_90";
  EXPECT_TRUE(any_contains(sass_mix_hints(summarize_sass(f), &mm, "sm_90"), "needs the sm_90a target"));
  f.arch = "sm_80";
  EXPECT_FALSE(any_contains(sass_mix_hints(summarize_sass(f), &mm, "sm_80"), "wgmma"));
}

TEST(SassHintsTest, LocalMemoryAndFp64) {
  const auto fns = parse_sass(fixture());
  const auto spill = sass_mix_hints(summarize_sass(find(fns, "_Z12spill_kernelPfPKfii")), nullptr, "sm_90a");
  EXPECT_TRUE(any_contains(spill, "LDL/STL present (2 LDL, 3 STL)"));
  const SassMix gelu = summarize_sass(find(fns, "_Z11gelu_doublePfPKfi"));
  const TaskSpec f32 = task_with("gelu");
  EXPECT_TRUE(any_contains(sass_mix_hints(gelu, &f32, "sm_90a"), "double-precision"));
  const TaskSpec f64 = task_with("gelu", DType::kFloat64);
  EXPECT_FALSE(any_contains(sass_mix_hints(gelu, &f64, "sm_90a"), "double-precision"));
}

}  // namespace
}  // namespace kforge::env
