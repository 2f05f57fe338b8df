// CompileService: cache keys, memory and disk hits (also across instances),
// one compile for concurrent identical requests, what is cached and what is
// not, and atomic publication. Uses the host compiler (fast, real g++) except
// where a mode matters.
#include "kforge/env/compile_service.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "kforge/env/compile/compilers.h"
#include "test_support.h"

namespace kforge::env {
namespace {

using testing::TempDir;

const char* kSource = R"(#include "kforge/kernel_abi.h"
extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const float* a = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  for (int64_t i = 0; i < kf_numel(&in[0]); ++i) y[i] = 2.0f * a[i];
  return 0;
}
)";

Solution cpp(std::string source, std::vector<std::string> options = {}) {
  Solution s;
  s.mode = SolutionMode::kCpp;
  s.source = std::move(source);
  s.options = std::move(options);
  return s;
}

CompileServiceConfig config_for(const TempDir& dir) {
  CompileServiceConfig c;
  c.cache_dir = dir.path();
  c.threads = 2;
  return c;
}

std::unique_ptr<CompileService> cpu_service(const TempDir& dir) {
  auto service = std::make_unique<CompileService>(config_for(dir));
  add_default_compilers(*service, "cpu");
  return service;
}

TEST(CompileServiceTest, CompilesThenServesFromMemory) {
  TempDir dir;
  auto service = cpu_service(dir);
  std::future<CompileResult> f = service->submit(cpp(kSource), {});
  const CompileResult first = f.get();
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(first.artifact.hash.size(), 64u);
  EXPECT_EQ(first.artifact.hash, service->cache_key(cpp(kSource), {}));
  EXPECT_EQ(first.artifact.path, dir.path() / first.artifact.hash / kSharedObjectName);
  EXPECT_TRUE(testing::exports_function(first.artifact.path, "kf_forward"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / first.artifact.hash / "result.json"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / first.artifact.hash / kCppSourceName));

  const CompileResult again = service->submit(cpp(kSource), {}).get();
  EXPECT_TRUE(again.ok);
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.artifact.path, first.artifact.path);
  EXPECT_EQ(again.log, first.log);
  const CompileStats stats = service->stats();
  EXPECT_EQ(stats.submitted, 2u);
  EXPECT_EQ(stats.compiled, 1u);
  EXPECT_EQ(stats.memory_hits, 1u);
}

TEST(CompileServiceTest, ASecondInstanceSharingTheDirectoryGetsDiskHits) {
  TempDir dir;
  std::string path;
  {
    auto writer = cpu_service(dir);
    const CompileResult r = writer->submit(cpp(kSource), {}).get();
    ASSERT_TRUE(r.ok) << r.log;
    path = r.artifact.path.string();
  }
  auto reader = cpu_service(dir);
  const CompileResult r = reader->submit(cpp(kSource), {}).get();
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.cache_hit);
  EXPECT_EQ(r.artifact.path.string(), path);
  EXPECT_EQ(r.artifact.mode, SolutionMode::kCpp);
  EXPECT_EQ(reader->stats().compiled, 0u);
  EXPECT_EQ(reader->stats().disk_hits, 1u);
  // Only complete entries and the scratch area are in the directory.
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == ".tmp" || name.size() == 64) << name;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / ".tmp"));
}

TEST(CompileServiceTest, ConcurrentIdenticalSubmissionsCompileOnce) {
  TempDir dir;
  auto service = cpu_service(dir);
  std::vector<std::future<CompileResult>> futures;
  for (int i = 0; i < 6; ++i) futures.push_back(service->submit(cpp(kSource, {"-O1"}), {}));
  std::string path;
  for (auto& f : futures) {
    const CompileResult r = f.get();
    ASSERT_TRUE(r.ok) << r.log;
    if (path.empty()) path = r.artifact.path.string();
    EXPECT_EQ(r.artifact.path.string(), path);
  }
  const CompileStats stats = service->stats();
  EXPECT_EQ(stats.compiled, 1u);
  EXPECT_EQ(stats.shared + stats.memory_hits, 5u);
}

TEST(CompileServiceTest, KeysDependOnEverythingThatChangesTheOutput) {
  TempDir dir;
  auto service = cpu_service(dir);
  const std::string base = service->cache_key(cpp(kSource), {});
  EXPECT_EQ(service->cache_key(cpp(kSource), {}), base);
  EXPECT_NE(service->cache_key(cpp(kSource, {"-O2"}), {}), base);
  EXPECT_NE(service->cache_key(cpp(kSource, {"-O2", "-ffast-math"}), {}),
            service->cache_key(cpp(kSource, {"-ffast-math", "-O2"}), {}));
  EXPECT_NE(service->cache_key(cpp(std::string(kSource) + " "), {}), base);
  // A different ABI header means a different compiler identity.
  TempDir abi;
  std::filesystem::create_directories(abi.path() / "kforge");
  std::ofstream(abi.path() / "kforge" / "kernel_abi.h") << "/* another ABI */\n";
  CompileContext other_abi;
  other_abi.abi_include_dir = abi.path();
  EXPECT_NE(service->cache_key(cpp(kSource), other_abi), base);
  // Timeouts and tensor names do not change what gets built.
  CompileContext slow;
  slow.timeout_s = 999;
  slow.tensor_names = {"a"};
  EXPECT_EQ(service->cache_key(cpp(kSource), slow), base);

  const CompileResult plain = service->submit(cpp(kSource), {}).get();
  const CompileResult fast = service->submit(cpp(kSource, {"-O2"}), {}).get();
  ASSERT_TRUE(plain.ok && fast.ok);
  EXPECT_NE(plain.artifact.path, fast.artifact.path);
  EXPECT_EQ(service->stats().compiled, 2u);
}

TEST(CompileServiceTest, FailedCompilesAreCachedWithTheSameErrors) {
  TempDir dir;
  const std::string bad = "int f() { return missing; }\n";
  std::string diagnostics;
  {
    auto service = cpu_service(dir);
    const CompileResult r = service->submit(cpp(bad), {}).get();
    ASSERT_FALSE(r.ok);
    EXPECT_FALSE(r.rejected);
    EXPECT_TRUE(r.system_error.empty());
    EXPECT_NE(r.diagnostics.find("candidate.cpp:1:18: error: 'missing' was not declared"), std::string::npos)
        << r.diagnostics;
    diagnostics = r.diagnostics;
    const CompileResult again = service->submit(cpp(bad), {}).get();
    EXPECT_TRUE(again.cache_hit);
    EXPECT_FALSE(again.ok);
    EXPECT_EQ(again.diagnostics, diagnostics);
  }
  auto other = cpu_service(dir);
  const CompileResult r = other->submit(cpp(bad), {}).get();
  EXPECT_TRUE(r.cache_hit);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.diagnostics, diagnostics);
  EXPECT_EQ(other->stats().compiled, 0u);
}

TEST(CompileServiceTest, RejectionsNameTheFlagAndCompileNothing) {
  TempDir dir;
  auto service = cpu_service(dir);
  const CompileResult r = service->submit(cpp(kSource, {"-O3", "-Wl,-rpath,/tmp"}), {}).get();
  EXPECT_TRUE(r.rejected);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.diagnostics.find("option \"-Wl,-rpath,/tmp\" is not allowed"), std::string::npos) << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("Allowed options:"), std::string::npos) << r.diagnostics;

  CompileContext tiny;
  tiny.max_source_bytes = 16;
  const CompileResult big = service->submit(cpp(kSource), tiny).get();
  EXPECT_TRUE(big.rejected);
  EXPECT_NE(big.diagnostics.find("the limit is 16"), std::string::npos) << big.diagnostics;
  EXPECT_EQ(service->stats().compiled, 0u);
  EXPECT_EQ(service->stats().rejected, 2u);
}

TEST(CompileServiceTest, SystemFailuresAreReportedButNeverCached) {
  TempDir dir;
  CompileService service(config_for(dir));
  service.add_compiler(make_host_compiler("/nonexistent/g++"));
  const CompileResult missing = service.submit(cpp(kSource), {}).get();
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(missing.system_error.find("/nonexistent/g++"), std::string::npos) << missing.system_error;
  EXPECT_NE(missing.diagnostics.find("not of the solution"), std::string::npos);

  // A compile that cannot finish in time is stopped: the solution's compile
  // error (docs/threat-model.md, "Who is to blame"), and never cached, so the
  // same source with a sane limit compiles afresh.
  service.add_compiler(make_host_compiler());
  CompileContext hurried;
  hurried.timeout_s = 0.001;
  const CompileResult late = service.submit(cpp(kSource), hurried).get();
  EXPECT_FALSE(late.ok);
  EXPECT_TRUE(late.timed_out);
  EXPECT_TRUE(late.system_error.empty()) << late.system_error;
  EXPECT_NE(late.diagnostics.find("compile exceeded"), std::string::npos) << late.diagnostics;
  const CompileResult on_time = service.submit(cpp(kSource), {}).get();
  EXPECT_TRUE(on_time.ok) << on_time.log;
  EXPECT_FALSE(on_time.cache_hit);
  EXPECT_EQ(service.stats().compiled, 2u);
  EXPECT_EQ(service.stats().system_errors, 1u);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / ".tmp"));
}

TEST(CompileServiceTest, BrokenOrUnfinishedEntriesAreNeverServed) {
  TempDir dir;
  std::string key;
  {
    auto service = cpu_service(dir);
    const CompileResult r = service->submit(cpp(kSource), {}).get();
    ASSERT_TRUE(r.ok);
    key = r.artifact.hash;
    // A truncated artifact (e.g. a disk that filled up): the recorded size
    // no longer matches.
    std::filesystem::resize_file(r.artifact.path, 100);
  }
  // What a process killed mid-compile leaves behind: a scratch directory
  // with a partial artifact, never an entry.
  std::filesystem::create_directories(dir.path() / ".tmp" / "deadbeef-1-0-0");
  std::ofstream(dir.path() / ".tmp" / "deadbeef-1-0-0" / kSharedObjectName) << "partial";

  auto service = cpu_service(dir);
  const CompileResult r = service->submit(cpp(kSource), {}).get();
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_FALSE(r.cache_hit);
  EXPECT_EQ(r.artifact.hash, key);
  EXPECT_GT(std::filesystem::file_size(r.artifact.path), 100u);
  EXPECT_TRUE(testing::exports_function(r.artifact.path, "kf_forward"));
  EXPECT_EQ(service->stats().compiled, 1u);

  // result.json that does not parse is a miss as well.
  std::ofstream(dir.path() / key / "result.json") << "{\"format\": 1, \"key\": ";
  auto third = cpu_service(dir);
  const CompileResult again = third->submit(cpp(kSource), {}).get();
  ASSERT_TRUE(again.ok);
  EXPECT_EQ(third->stats().compiled, 1u);
}

TEST(CompileServiceTest, AnArtifactDeletedBehindItsBackIsRebuilt) {
  TempDir dir;
  auto service = cpu_service(dir);
  const CompileResult r = service->submit(cpp(kSource), {}).get();
  ASSERT_TRUE(r.ok);
  kforge::remove_tree(r.artifact.path.parent_path());
  const CompileResult again = service->submit(cpp(kSource), {}).get();
  ASSERT_TRUE(again.ok) << again.log;
  EXPECT_FALSE(again.cache_hit);
  EXPECT_TRUE(std::filesystem::exists(again.artifact.path));
}

TEST(CompileServiceTest, DefaultCompilersPerBackend) {
  TempDir dir;
  CompileService cpu(config_for(dir));
  add_default_compilers(cpu, "cpu");
  EXPECT_TRUE(cpu.supports(SolutionMode::kCpp));
  EXPECT_FALSE(cpu.supports(SolutionMode::kCuda));
  const CompileResult r = cpu.submit(
                                 [] {
                                   Solution s;
                                   s.mode = SolutionMode::kTorchExt;
                                   s.source = "x";
                                   return s;
                                 }(),
                                 {})
                              .get();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.system_error.find("no compiler for mode \"torch_ext\""), std::string::npos);
  EXPECT_THROW(add_default_compilers(cpu, "tpu"), InputError);

  CompileService cuda(config_for(dir));
  if (have_nvrtc()) {
    add_default_compilers(cuda, "cuda");
    EXPECT_TRUE(cuda.supports(SolutionMode::kCuda));
    EXPECT_TRUE(cuda.supports(SolutionMode::kNvrtc));
    EXPECT_TRUE(cuda.supports(SolutionMode::kTorchExt));
    EXPECT_FALSE(cuda.supports(SolutionMode::kCpp));
  } else {
    EXPECT_THROW(add_default_compilers(cuda, "cuda"), SystemError);
  }
}

TEST(CompileServiceTest, DefaultCacheDirFollowsTheEnvironment) {
  const char* saved_kforge = std::getenv("KFORGE_CACHE_DIR");
  const char* saved_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string keep_kforge = saved_kforge ? saved_kforge : "";
  const std::string keep_xdg = saved_xdg ? saved_xdg : "";
  setenv("KFORGE_CACHE_DIR", "/somewhere/kf", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(default_compile_cache_dir(), std::filesystem::path("/somewhere/kf"));
  unsetenv("KFORGE_CACHE_DIR");
  EXPECT_EQ(default_compile_cache_dir(), std::filesystem::path("/xdg/kforge/compile"));
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_compile_cache_dir(), std::filesystem::path(std::getenv("HOME")) / ".cache/kforge/compile");
  if (saved_kforge) setenv("KFORGE_CACHE_DIR", keep_kforge.c_str(), 1);
  if (saved_xdg) setenv("XDG_CACHE_HOME", keep_xdg.c_str(), 1);
}

TEST(CompileServiceTest, ARelativeCacheDirIsMadeAbsolute) {
  TempDir dir;
  CompileServiceConfig c = config_for(dir);
  const std::filesystem::path relative =
      std::filesystem::relative(dir.path() / "relative-cache", std::filesystem::current_path());
  ASSERT_TRUE(relative.is_relative()) << relative;
  c.cache_dir = relative;
  CompileService service(c);
  EXPECT_TRUE(service.cache_dir().is_absolute()) << service.cache_dir();
  EXPECT_TRUE(std::filesystem::equivalent(service.cache_dir(), dir.path() / "relative-cache"));
}

}  // namespace
}  // namespace kforge::env
