// Compiles that a hostile source makes run away (docs/compile.md#nvrtc-out-of-process: a preprocessor
// bomb, `#define K1 K0 K0` ... 40 levels, expands to 2^40 tokens) are stopped
// at the compile's time or memory limit and reported as a compile error that
// says which ("compile exceeded ..."), with the real compilers: NVRTC (in its
// worker process, no GPU needed), nvcc and g++. Other compiles carry on
// meanwhile, and a stopped NVRTC worker is replaced.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "kforge/core/demangle.h"
#include "kforge/core/process.h"
#include "kforge/core/solution.h"
#include "kforge/env/compile/compilers.h"
#include "kforge/env/compile_service.h"
#include "test_support.h"

namespace kforge::env {
namespace {

using testing::TempDir;

// `#define K1 K0 K0` ... `#define K40 K39 K39`: K40 stands for 2^40 copies of
// K0. What expands it is `expansion` (an initializer, or a kernel body).
std::string preprocessor_bomb(const std::string& head, const std::string& use) {
  std::string s = head + "#define K0 1+\n";
  for (int i = 1; i <= 40; ++i) {
    s += "#define K" + std::to_string(i) + " K" + std::to_string(i - 1) + " K" + std::to_string(i - 1) + "\n";
  }
  return s + use;
}

Solution solution(SolutionMode mode, std::string source, json launch = nullptr) {
  Solution s;
  s.mode = mode;
  s.source = std::move(source);
  s.launch = std::move(launch);
  return s;
}

bool says_limit_exceeded(const CompileResult& r) { return r.diagnostics.rfind("compile exceeded ", 0) == 0; }

// Limits small enough for a test: the bomb reaches one of them within
// seconds on any machine.
CompileContext tight_context() {
  CompileContext ctx;
  ctx.timeout_s = 30;
  ctx.memory_limit_bytes = uint64_t{768} << 20;
  ctx.tensor_names = {"y"};
  return ctx;
}

const char* kBombPlan = R"J({"name": "bomb", "grid": 1, "block": 32, "args": ["y"]})J";

TEST(CompileLimits, SubprocessGetsTheMemoryLimitAndReportsItsPeak) {
  ProcessOptions options;
  options.memory_limit_bytes = uint64_t{300} << 20;
  const ProcessResult r = run_process({"/bin/sh", "-c", "ulimit -v"}, options);
  ASSERT_TRUE(r.ok()) << r.output;
  EXPECT_EQ(r.output, std::to_string(300 * 1024) + "\n");
  EXPECT_GT(r.peak_rss_bytes, 0u);
  // An allocation beyond the limit fails in the child, not in us.
  const ProcessResult big = run_process({"/usr/bin/python3", "-c", "b = bytearray(600 << 20)"}, options);
  EXPECT_NE(big.exit_code, 0);
  EXPECT_NE(big.output.find("MemoryError"), std::string::npos) << big.output;
}

TEST(CompileLimits, AMissingCompilerIsStillASystemError) {
  EXPECT_THROW(run_process({"/nonexistent/kforge-no-such-compiler"}), SystemError);
}

TEST(CompileLimits, PreprocessorBombUnderNvrtcIsACompileErrorAndOthersKeepCompiling) {
  auto compiler = make_nvrtc_compiler();
  const CompileContext ctx = tight_context();
  TempDir bomb_dir;
  const Solution bomb =
      solution(SolutionMode::kNvrtc, preprocessor_bomb("", "__global__ void bomb(float* y) { y[0] = K40 1; }\n"),
               json::parse(kBombPlan));
  std::atomic<bool> bomb_done{false};
  auto running = std::async(std::launch::async, [&] {
    CompileResult r = compiler->compile(bomb, ctx, bomb_dir.path());
    bomb_done = true;
    return r;
  });
  // Honest compiles on another thread (another worker) while the bomb runs.
  int honest_while_bomb = 0;
  for (int i = 0; i < 50 && !bomb_done; ++i) {
    TempDir dir;
    const Solution honest = solution(
        SolutionMode::kNvrtc, "__global__ void k(float* y) { y[threadIdx.x] *= " + std::to_string(i) + ".0f; }\n",
        json::parse(R"J({"name": "k", "grid": 1, "block": 32, "args": ["y"]})J"));
    const CompileResult r = compiler->compile(honest, ctx, dir.path());
    ASSERT_TRUE(r.ok) << r.log;
    if (!bomb_done) ++honest_while_bomb;
  }
  const CompileResult r = running.get();
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.system_error.empty()) << r.system_error;
  EXPECT_TRUE(r.limit_hit());
  EXPECT_TRUE(says_limit_exceeded(r)) << r.diagnostics;
  EXPECT_TRUE(r.diagnostics.find("30 s") != std::string::npos || r.diagnostics.find("768 MiB") != std::string::npos)
      << r.diagnostics;
  // Stopped at its limit, not after it: the time limit plus the time a
  // killed worker takes to go.
  EXPECT_LT(r.compile_ms, (ctx.timeout_s + 10) * 1000) << r.diagnostics;
  EXPECT_GE(honest_while_bomb, 1);

  // The worker that ran the bomb is gone; the next compile gets a new one.
  TempDir after;
  const CompileResult next =
      compiler->compile(solution(SolutionMode::kNvrtc, "__global__ void k(float* y) { y[0] = 1; }\n",
                                 json::parse(R"J({"name": "k", "grid": 1, "block": 1, "args": ["y"]})J")),
                        ctx, after.path());
  EXPECT_TRUE(next.ok) << next.log;
}

// A bomb through another path: no macro, but a kernel instantiated over a
// type that doubles `depth` times (typedef P<T39, T39> T40). Its mangled name
// is short (substitutions), its demangled one 2^depth characters; demangling
// it in the parent (ptxas' resource usage, CUPTI, SASS) once took minutes and
// died. NVRTC's own work also doubles with each level.
std::string type_doubling_kernel(int depth) {
  std::string source = "template <class A, class B> struct P {};\ntypedef int T0;\n";
  for (int i = 1; i <= depth; ++i) {
    const std::string prev = "T" + std::to_string(i - 1);
    source += "typedef P<" + prev + ", " + prev + "> T" + std::to_string(i) + ";\n";
  }
  const std::string top = "T" + std::to_string(depth);
  return source + "template <class T> __global__ void k(float* y, T* unused) { y[threadIdx.x] = 1.0f; }\n" +
         "template __global__ void k<" + top + ">(float*, " + top + "*);\n";
}

CompileResult compile_type_doubling(int depth) {
  auto compiler = make_nvrtc_compiler();
  TempDir dir;
  json plan = json::parse(R"J({"grid": 1, "block": 32, "args": ["y", "y"]})J");
  plan["name"] = "k<T" + std::to_string(depth) + ">";
  return compiler->compile(solution(SolutionMode::kNvrtc, type_doubling_kernel(depth), plan), tight_context(),
                           dir.path());
}

TEST(CompileLimits, TypeDoublingKernelNamesAreKeptMangledInTheParent) {
  // 2^24: NVRTC compiles it in seconds; its demangled name would be tens of
  // megabytes in every resource-usage key.
  const CompileResult r = compile_type_doubling(24);
  ASSERT_TRUE(r.system_error.empty()) << r.system_error;
  ASSERT_TRUE(r.ok) << r.diagnostics;
  ASSERT_FALSE(r.artifact.resources.empty()) << r.log;
  for (const auto& [name, usage] : r.artifact.resources.items()) {
    EXPECT_LE(name.size(), kMaxDemangledChars);
    EXPECT_EQ(name.rfind("_Z", 0), 0u) << "left mangled: its demangled form is over the bound";
  }
  EXPECT_LE(r.log.size() + r.diagnostics.size(), size_t{1} << 20);
}

TEST(CompileLimits, TypeDoublingBombIsStoppedAtTheCompileLimit) {
  // 2^40: NVRTC itself runs away; the limit stops it and says so.
  const CompileResult r = compile_type_doubling(40);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.system_error.empty()) << r.system_error;
  EXPECT_TRUE(r.limit_hit());
  EXPECT_TRUE(says_limit_exceeded(r)) << r.diagnostics;
  EXPECT_LE(r.log.size() + r.diagnostics.size(), size_t{1} << 20);
}

TEST(CompileLimits, NvrtcTimeLimitStopsACompileThatIsSlowButSmall) {
  // NVRTC expands the bomb slowly in memory: without a memory limit, the
  // time limit alone stops it.
  auto compiler = make_nvrtc_compiler();
  CompileContext ctx = tight_context();
  ctx.timeout_s = 3;
  const std::string source = preprocessor_bomb("", "__global__ void bomb(float* y) { y[0] = K40 1; }\n");
  TempDir dir;
  ctx.memory_limit_bytes = 0;  // time only
  const CompileResult r =
      compiler->compile(solution(SolutionMode::kNvrtc, source, json::parse(kBombPlan)), ctx, dir.path());
  EXPECT_TRUE(r.timed_out) << r.diagnostics;
  EXPECT_EQ(r.diagnostics.rfind("compile exceeded 3 s (the compile time limit; NVRTC was stopped)", 0), 0u)
      << r.diagnostics;
}

TEST(CompileLimits, PreprocessorBombUnderGccIsACompileError) {
  TempDir dir;
  const CompileResult r = make_host_compiler()->compile(
      solution(SolutionMode::kCpp, preprocessor_bomb("#include <kforge/kernel_abi.h>\n", "int a = K40 1;\n")),
      tight_context(), dir.path());
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.system_error.empty()) << r.system_error;
  EXPECT_TRUE(says_limit_exceeded(r)) << r.diagnostics << r.log.substr(0, 2000);
  EXPECT_TRUE(r.out_of_memory || r.timed_out);
}

TEST(CompileLimits, PreprocessorBombUnderNvccIsACompileError) {
  TempDir dir;
  CompileContext ctx = tight_context();
  ctx.timeout_s = 60;
  ctx.memory_limit_bytes = uint64_t{512} << 20;
  const CompileResult r = make_nvcc_compiler()->compile(
      solution(SolutionMode::kCuda, preprocessor_bomb("#include <kforge/kernel_abi.h>\n", "int a = K40 1;\n")), ctx,
      dir.path());
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.system_error.empty()) << r.system_error;
  EXPECT_TRUE(says_limit_exceeded(r)) << r.diagnostics << r.log.substr(0, 2000);
}

TEST(CompileLimits, StoppedCompilesAreNotCachedAndCountAsCompileErrors) {
  TempDir cache;
  CompileServiceConfig config;
  config.cache_dir = cache.path();
  config.threads = 1;
  CompileService service(config);
  service.add_compiler(make_host_compiler());
  CompileContext ctx = tight_context();
  ctx.timeout_s = 2;
  const Solution bomb =
      solution(SolutionMode::kCpp, preprocessor_bomb("#include <kforge/kernel_abi.h>\n", "int a = K40 1;\n"));
  const CompileResult first = service.submit(bomb, ctx).get();
  const CompileResult second = service.submit(bomb, ctx).get();
  for (const CompileResult* r : {&first, &second}) {
    EXPECT_FALSE(r->ok);
    EXPECT_TRUE(r->system_error.empty());
    EXPECT_TRUE(says_limit_exceeded(*r)) << r->diagnostics;
    EXPECT_FALSE(r->cache_hit);
  }
  const CompileStats stats = service.stats();
  EXPECT_EQ(stats.compiled, 2u);
  EXPECT_EQ(stats.system_errors, 0u);
}

// A hostile-input probe: a torch_ext solution with a very long run of identifier
// characters in a parameter list crashed the source precheck (a recursive
// std::regex over the policy's text) with SIGSEGV, taking the environment
// down. It must be an answer (a refusal that says what is wrong, or a compile). Run in a child so that
// a crash fails this test instead of ending the test binary. (The parser is
// hardened in torch_ext_source.cpp by the harden-input work.)
TEST(CompileLimits, PathologicalTorchExtParameterListGetsAnAnswerNotACrash) {
  const std::string source = "#include <torch/extension.h>\ntorch::Tensor forward(torch::Tensor x, int " +
                             std::string(300000, 'a') + ") { return x; }\n";
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A refusal before compiling, or a compile that ends and says how:
    // either is an answer. (A 300,000-character parameter name is legal C++.)
    auto compiler = make_torch_ext_compiler();
    const Solution s = solution(SolutionMode::kTorchExt, source);
    CompileContext ctx;
    ctx.timeout_s = 120;
    if (!compiler->precheck(s, ctx).empty()) ::_exit(0);
    TempDir dir;
    const CompileResult r = compiler->compile(s, ctx, dir.path());
    ::_exit(r.ok || !r.diagnostics.empty() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the torch_ext precheck or compile died with signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the compile failed without saying why";
}

}  // namespace
}  // namespace kforge::env
