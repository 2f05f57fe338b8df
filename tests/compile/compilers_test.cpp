// The host compiler (mode cpp) on its own with the real g++: the artifact and
// its exports, and the condensed diagnostics of real g++ error output.
#include "kforge/env/compile/compilers.h"

#include <gtest/gtest.h>

#include "kforge/env/compile/diagnostics.h"
#include "test_support.h"

namespace kforge::env {
namespace {

using testing::TempDir;

Solution solution(SolutionMode mode, std::string source, std::vector<std::string> options = {}) {
  Solution s;
  s.mode = mode;
  s.source = std::move(source);
  s.options = std::move(options);
  return s;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const char* kCppAdd = R"(#include "kforge/kernel_abi.h"
extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const float* a = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (int64_t i = 0; i < kf_numel(&in[0]); ++i) y[i] = a[i] + 1.0f;
  return 0;
}
)";

TEST(HostCompilerTest, BuildsASharedObjectThatExportsKfForward) {
  TempDir dir;
  auto compiler = make_host_compiler();
  const CompileResult r = compiler->compile(solution(SolutionMode::kCpp, kCppAdd, {"-O2"}), {}, dir.path());
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_EQ(r.artifact.path, dir.path() / kSharedObjectName);
  EXPECT_TRUE(testing::exports_function(r.artifact.path, "kf_forward"));
  EXPECT_TRUE(r.system_error.empty());
  EXPECT_EQ(r.diagnostics, "");
  // The full command is logged, the ABI dir included, user flags after ours.
  EXPECT_NE(r.log.find("-I" + default_abi_include_dir().string()), std::string::npos) << r.log;
  EXPECT_LT(r.log.find("-O3"), r.log.find("-O2")) << r.log;
}

TEST(HostCompilerTest, ErrorsAreCondensedToTheCandidatesLines) {
  TempDir dir;
  const std::string source = R"(#include <vector>
template <typename T> T twice(T x) { return x.twice(); }
int f() { return twice(3); }
int g() {
  std::vector<int> v; v.push_back("text");
  return undefined_name;
}
)";
  const CompileResult r = make_host_compiler()->compile(solution(SolutionMode::kCpp, source), {}, dir.path());
  ASSERT_FALSE(r.ok);
  EXPECT_FALSE(r.rejected);
  EXPECT_TRUE(r.system_error.empty());
  const std::string& d = r.diagnostics;
  EXPECT_NE(d.find("candidate.cpp:6:10: error: 'undefined_name' was not declared in this scope"), std::string::npos)
      << d;
  EXPECT_NE(d.find(" 6 |   return undefined_name;\n   |          ^\n"), std::string::npos) << d;
  EXPECT_NE(d.find("candidate.cpp:5:"), std::string::npos) << d;
  EXPECT_NE(d.find("candidate.cpp:2:47: error: request for member 'twice'"), std::string::npos) << d;
  // Noise the policy does not need: notes, candidates, instantiation chains.
  EXPECT_EQ(d.find("note:"), std::string::npos) << d;
  EXPECT_EQ(d.find("required from"), std::string::npos) << d;
  EXPECT_EQ(d.find("stl_vector.h"), std::string::npos) << d;
  // ... which the full log keeps.
  EXPECT_NE(r.log.find("note:"), std::string::npos);
  EXPECT_NE(r.log.find("required from here"), std::string::npos);
  EXPECT_LT(d.size(), r.log.size());
}

TEST(HostCompilerTest, WarningsAreShownOnlyWithoutErrors) {
  TempDir ok_dir;
  const std::string warns = std::string(kCppAdd) + "int unused_fn() { int unused_var; return 0; }\n";
  const CompileResult ok =
      make_host_compiler()->compile(solution(SolutionMode::kCpp, warns, {"-Wall"}), {}, ok_dir.path());
  ASSERT_TRUE(ok.ok) << ok.log;
  EXPECT_NE(ok.diagnostics.find("candidate.cpp:8:"), std::string::npos) << ok.diagnostics;
  EXPECT_NE(ok.diagnostics.find("warning: unused variable 'unused_var'"), std::string::npos) << ok.diagnostics;

  TempDir bad_dir;
  const CompileResult bad = make_host_compiler()->compile(
      solution(SolutionMode::kCpp, warns + "int broken() { return nope; }\n", {"-Wall"}), {}, bad_dir.path());
  ASSERT_FALSE(bad.ok);
  EXPECT_NE(bad.log.find("warning: unused variable"), std::string::npos);
  EXPECT_EQ(bad.diagnostics.find("warning"), std::string::npos) << bad.diagnostics;
  EXPECT_NE(bad.diagnostics.find("candidate.cpp:9:23: error: 'nope' was not declared"), std::string::npos)
      << bad.diagnostics;
}

TEST(HostCompilerTest, ManyErrorsAreCappedInCountAndLength) {
  TempDir dir;
  std::string source;
  for (int i = 0; i < 30; ++i) source += "int a" + std::to_string(i) + " = missing_" + std::to_string(i) + ";\n";
  const CompileResult r = make_host_compiler()->compile(solution(SolutionMode::kCpp, source), {}, dir.path());
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(count(r.diagnostics, ": error: "), 5u) << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("candidate.cpp:1:10: error: 'missing_0'"), std::string::npos) << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("(25 more errors not shown)"), std::string::npos) << r.diagnostics;
  EXPECT_LE(r.diagnostics.size(), DiagnosticsLimits().max_chars);

  DiagnosticsLimits tight;
  tight.max_errors = 2;
  tight.max_chars = 150;
  const std::string d = condense_diagnostics(r.log, kCppSourceName, source, true, tight);
  EXPECT_EQ(count(d, ": error: "), 1u) << d;  // the second block would pass 150 chars
  EXPECT_NE(d.find("(29 more errors not shown)"), std::string::npos) << d;
}

TEST(HostCompilerTest, RejectedFlagsNeverReachTheCompiler) {
  TempDir dir;
  const CompileResult r =
      make_host_compiler()->compile(solution(SolutionMode::kCpp, kCppAdd, {"-fopenmp"}), {}, dir.path());
  EXPECT_TRUE(r.rejected);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.diagnostics.find("\"-fopenmp\""), std::string::npos);
  EXPECT_TRUE(r.log.empty());
  EXPECT_FALSE(std::filesystem::exists(dir.path() / kCppSourceName));
}

}  // namespace
}  // namespace kforge::env
