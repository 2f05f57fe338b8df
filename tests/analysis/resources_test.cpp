#include "kforge/env/analysis/resources.h"

#include <gtest/gtest.h>

namespace kforge::env {
namespace {

// Older ptxas wording (CUDA 11/12): cmem banks on the "Used" line, and a
// non-inlined device function (-rdc) reported without "Compiling entry".
constexpr const char* kPtxasLog = R"(ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z1ff
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z1kPfS_' for 'sm_80'
ptxas info    : Function properties for _Z1kPfS_
    72 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 46 registers, used 1 barriers, 2048 bytes smem, 376 bytes cmem[0], 16 bytes cmem[2]
ptxas info    : Compile time = 2.1 ms
some unrelated nvcc line
)";

// cuobjdump --dump-resource-usage of a fat binary with two targets.
constexpr const char* kCuobjdump = R"(
Fatbin elf code:
================
arch = sm_80
code version = [1,7]
host = linux
compile_size = 64bit

Resource usage:
 Common:
  GLOBAL:0
 Function _Z1kPfS_:
  REG:40 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:368 TEXTURE:0 SURFACE:0 SAMPLER:0

Fatbin elf code:
================
arch = sm_90a
code version = [1,8]
host = linux
compile_size = 64bit

Resource usage:
 Common:
  GLOBAL:0
 Function _Z1kPfS_:
  REG:17 STACK:16 SHARED:4096 LOCAL:0 CONSTANT[0]:336 CONSTANT[2]:60 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z1ff:
  REG:14 STACK:0 SHARED:0 LOCAL:0 TEXTURE:0 SURFACE:0 SAMPLER:0
)";

TEST(ResourcesTest, ParsesPtxasInfo) {
  const auto ks = parse_ptxas_info(kPtxasLog);
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_EQ(ks[0].name, "_Z1ff");
  EXPECT_EQ(ks[0].entry, false);
  EXPECT_EQ(ks[0].stack_bytes, 8);
  EXPECT_FALSE(ks[0].registers.has_value());
  const KernelResources& k = ks[1];
  EXPECT_EQ(k.name, "_Z1kPfS_");
  EXPECT_EQ(k.arch, "sm_80");
  EXPECT_EQ(k.entry, true);
  EXPECT_EQ(k.registers, 46);
  EXPECT_EQ(k.barriers, 1);
  EXPECT_EQ(k.shared_bytes, 2048);
  EXPECT_EQ(k.constant_bytes, 392);
  EXPECT_EQ(k.stack_bytes, 72);
  EXPECT_EQ(k.spill_store_bytes, 12);
  EXPECT_EQ(k.spill_load_bytes, 16);
  EXPECT_EQ(k.spill_bytes(), 28);
}

TEST(ResourcesTest, ParsesCuobjdumpResourceUsage) {
  const auto ks = parse_cuobjdump_resource_usage(kCuobjdump);
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0].arch, "sm_80");
  EXPECT_EQ(ks[0].registers, 40);
  EXPECT_EQ(ks[1].arch, "sm_90a");
  EXPECT_EQ(ks[1].registers, 17);
  EXPECT_EQ(ks[1].stack_bytes, 16);
  EXPECT_EQ(ks[1].shared_bytes, 4096);
  EXPECT_EQ(ks[1].constant_bytes, 396);
  EXPECT_EQ(ks[1].local_bytes, 0);
  EXPECT_FALSE(ks[1].spill_bytes().has_value());  // cuobjdump does not report spills
  EXPECT_EQ(ks[2].name, "_Z1ff");
  EXPECT_FALSE(ks[2].constant_bytes.has_value());
}

TEST(ResourcesTest, ArtifactJsonRoundTripAndSynonyms) {
  const auto ks = parse_ptxas_info(kPtxasLog);
  const json j = resources_to_json(ks);
  EXPECT_EQ(j["k(float*, float*)"]["mangled"], "_Z1kPfS_");
  EXPECT_EQ(j["k(float*, float*)"]["registers"], 46);
  EXPECT_EQ(j["k(float*, float*)"]["spill_bytes"], 28);
  const auto back = resources_from_json(j);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].name, "_Z1kPfS_");
  EXPECT_EQ(back[1].registers, 46);
  EXPECT_EQ(back[1].spill_bytes(), 28);
  EXPECT_EQ(back[1].constant_bytes, 392);

  const json other = {{"k",
                       {{"regs", 32},
                        {"smem_bytes", 1024},
                        {"stack_frame_bytes", 8},
                        {"spill_bytes", 4},
                        {"cmem", {{"0", 352}, {"2", 8}}},
                        {"something_new", "ignored"}}}};
  const auto o = resources_from_json(other);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].registers, 32);
  EXPECT_EQ(o[0].shared_bytes, 1024);
  EXPECT_EQ(o[0].stack_bytes, 8);
  EXPECT_EQ(o[0].spill_bytes(), 4);
  EXPECT_EQ(o[0].constant_bytes, 360);

  const auto arr = resources_from_json(json::array({{{"name", "a"}, {"registers", 8}}}));
  ASSERT_EQ(arr.size(), 1u);
  EXPECT_EQ(arr[0].name, "a");
}

// The form the compile service records (env/src/compile): demangled keys.
TEST(ResourcesTest, ReadsTheCompileServiceForm) {
  const json j = {{"void scale<float, 4>(float const*, float*, long)",
                   {{"mangled", "_Z5scaleIfLi4EEvPKT_PS0_l"},
                    {"registers", 32},
                    {"barriers", 1},
                    {"shared_bytes", 4096},
                    {"constant_bytes", 0},
                    {"stack_bytes", 0},
                    {"spill_store_bytes", 0},
                    {"spill_load_bytes", 0}}}};
  const auto ks = resources_from_json(j);
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].name, "_Z5scaleIfLi4EEvPKT_PS0_l");
  EXPECT_EQ(ks[0].registers, 32);
  EXPECT_EQ(ks[0].shared_bytes, 4096);
  EXPECT_EQ(ks[0].spill_bytes(), 0);
}

TEST(ResourcesTest, WrongTypesAreErrorsNamingTheField) {
  try {
    resources_from_json({{"k", {{"registers", "many"}}}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/k/registers"), std::string::npos) << e.what();
  }
}

TEST(ResourcesTest, Demangles) {
  EXPECT_EQ(demangle("_Z1kPfS_"), "k(float*, float*)");
  EXPECT_EQ(demangle("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(demangle("_Znot_valid"), "_Znot_valid");
}

}  // namespace
}  // namespace kforge::env
