// The bounded demangler: names read as abi::__cxa_demangle prints them, and a
// substitution bomb (a short name standing for 2^40 characters) comes back
// at once as itself.
#include "kforge/core/demangle.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace kforge {
namespace {

TEST(Demangle, NamesReadAsTheCxxRuntimePrintsThem) {
  EXPECT_EQ(demangle("_Z1kPfS_"), "k(float*, float*)");
  EXPECT_EQ(demangle("_Z5scaleIfEvPKfPfl"), "void scale<float>(float const*, float*, long)");
  EXPECT_EQ(demangle("_Z10gemm_wgmmaP13__nv_bfloat16PKS_S2_iii"),
            "gemm_wgmma(__nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 const*, int, int, int)");
}

TEST(Demangle, WhatIsNotAMangledNameComesBackAsItIs) {
  EXPECT_EQ(demangle("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(demangle("_Znot_valid"), "_Znot_valid");
  EXPECT_EQ(demangle(""), "");
  EXPECT_EQ(demangle("_Z"), "_Z");
}

// k<T40>(T40*) with typedef P<T39, T39> T40: 333 characters mangled, 2^40
// demangled. abi::__cxa_demangle did not finish it in a minute.
constexpr const char* kSubstitutionBomb =
    "_Z1kI1PIS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_"
    "IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IiiES1_ES2_ES3_ES4_ES5_ES6_ES7_ES8_ES9_ESA_ESB_ESC_ESD_ESE_"
    "ESF_ESG_ESH_ESI_ESJ_ESK_ESL_ESM_ESN_ESO_ESP_ESQ_ESR_ESS_EST_ESU_ESV_ESW_ESX_ESY_ESZ_ES10_ES11_ES12_ES13_EEvPT_";

TEST(Demangle, ASubstitutionBombIsCutAtTheBoundAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(demangle(kSubstitutionBomb), kSubstitutionBomb);
  // The same name within a large enough bound would print; its first
  // levels do print within a small one, so the bound is what stopped it.
  const std::string shallow = "_Z1kI1PIS0_IiiES1_EEvPT_";
  EXPECT_EQ(demangle(shallow), "void k<P<P<int, int>, P<int, int> > >(P<P<int, int>, P<int, int> >*)");
  EXPECT_EQ(demangle(shallow, 20), shallow);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("bomb_ms", std::to_string(ms));
}

TEST(Demangle, NamesLongerThanTheInputBoundAreNotDemangled) {
  // f_aaa...a(): a valid name under the bound demangles, over it does not.
  auto function_named = [](size_t n) { return "_Z" + std::to_string(n) + std::string(n, 'a') + "v"; };
  // (libiberty itself gives up on identifiers of a few thousand characters.)
  const std::string under = function_named(1000), over = function_named(kMaxMangledChars);
  ASSERT_LE(under.size(), kMaxMangledChars);
  ASSERT_GT(over.size(), kMaxMangledChars);
  EXPECT_EQ(demangle(under, 8192), std::string(1000, 'a') + "()");
  EXPECT_EQ(demangle(over, 8192), over);
}

}  // namespace
}  // namespace kforge
