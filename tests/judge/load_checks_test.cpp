// The load-time checks `load_constructor` and `load_section`
// (judge/elf_inspector.h) on real objects: built by g++ here, and by nvcc
// where the CUDA toolkit is installed, so that what the toolchains emit for
// honest code is accepted and everything else is named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "judge/elf_inspector.h"
#include "kforge/core/process.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

const SymbolPolicy& cpu() {
  static const SymbolPolicy p = SymbolPolicy::for_backend("cpu");
  return p;
}

std::vector<std::string> details_of(const ElfInspection& r, const std::string& check) {
  std::vector<std::string> out;
  for (const auto& v : r.violations) {
    if (v.check == check) out.push_back(v.detail);
  }
  return out;
}

bool has(const ElfInspection& r, const std::string& check, const std::string& needle) {
  return std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation& v) {
    return v.check == check && v.detail.find(needle) != std::string::npos;
  });
}

std::string all_violations(const ElfInspection& r) {
  std::string s;
  for (const auto& v : r.violations) s += v.check + ": " + v.detail + "\n";
  return s;
}

ElfInspection inspect(const std::string& source, const std::vector<std::string>& flags = {}) {
  return inspect_candidate(testing::compile_candidate(source, flags), cpu());
}

constexpr const char* kPlainKernel = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data; float* o = (float*)out[0].data;
  for (int64_t i = 0; i < kf_numel(&out[0]); ++i) o[i] = x[i] > 0.f ? x[i] : 0.f;
  return 0;
}
)";

TEST(LoadChecks, ToolchainConstructorsAreAccepted) {
  ElfInspection r = inspect(kPlainKernel);
  EXPECT_TRUE(r.accepted) << all_violations(r);
  EXPECT_TRUE(r.facts.has_symbol_table);
  // GCC's crtstuff registers frame_dummy; DT_INIT is the C runtime's _init.
  bool frame_dummy = false, init = false;
  for (const auto& c : r.facts.load_time_code) {
    frame_dummy |= c.kind == "init_array" && std::count(c.names.begin(), c.names.end(), "frame_dummy") == 1;
    init |= c.kind == "init" && c.anomaly.empty();
  }
  EXPECT_TRUE(frame_dummy);
  EXPECT_TRUE(init);
}

TEST(LoadChecks, NamespaceScopeObjectsOfHonestCodeAreAccepted) {
  // <iostream>'s std::ios_base::Init and a global std::vector give the object
  // a _GLOBAL__sub_I_ initializer: common in honest code, and accepted.
  ElfInspection r = inspect(R"(
#include <iostream>
#include <vector>
#include <kforge/kernel_abi.h>
static std::vector<float> g_scratch;
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor* out, int, void*) {
  g_scratch.assign(kf_numel(&out[0]), 0.f);
  std::cout << g_scratch.size() << std::endl;
  return 0;
}
)");
  EXPECT_TRUE(r.accepted) << all_violations(r);
}

TEST(LoadChecks, ConstructorAttributeIsRefused) {
  ElfInspection r = inspect(R"(
#include <kforge/kernel_abi.h>
static int g;
__attribute__((constructor)) static void warm_up() { g = 1; }
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return g - 1; }
)");
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has(r, "load_constructor", "warm_up")) << all_violations(r);
}

TEST(LoadChecks, HandMadeAndImportedInitArrayEntriesAreRefused) {
  ElfInspection r = inspect(R"(
#include <kforge/kernel_abi.h>
#include <stdlib.h>
static int g;
static void hidden() { g = 1; }
__attribute__((section(".init_array"), used)) static void (*const g_a)() = hidden;
__attribute__((section(".init_array"), used)) static void (*const g_b)() = (void (*)())abort;
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return g - 1; }
)");
  EXPECT_TRUE(has(r, "load_constructor", "hidden")) << all_violations(r);
  EXPECT_TRUE(has(r, "load_constructor", "imported function abort")) << all_violations(r);
}

TEST(LoadChecks, AToolchainNameReusedForAConstructorIsRefused) {
  // An asm label gives the constructor the name frame_dummy; GCC's own
  // frame_dummy is there too, so the name is no longer unique.
  ElfInspection r = inspect(R"(
#include <kforge/kernel_abi.h>
static int g;
extern "C" __attribute__((constructor, used)) void evil() __asm__("frame_dummy");
extern "C" void evil() { g = 1; }
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return g - 1; }
)");
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has(r, "load_constructor", "a name 2 functions in the object carry")) << all_violations(r);
}

TEST(LoadChecks, IfuncResolversAreRefused) {
  ElfInspection r = inspect(R"(
#include <kforge/kernel_abi.h>
extern "C" int impl(const kf_tensor*, int, kf_tensor*, int, void*) { return 0; }
extern "C" void* pick() { return (void*)impl; }
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) __attribute__((ifunc("pick")));
)");
  EXPECT_TRUE(has(r, "load_constructor", "IFUNC resolver")) << all_violations(r);
  EXPECT_TRUE(has(r, "load_constructor", "pick")) << all_violations(r);
}

TEST(LoadChecks, CodeSplicedIntoInitIsRefused) {
  // Top-level asm in the .init section runs inside the C runtime's _init.
  ElfInspection r = inspect(R"(
#include <kforge/kernel_abi.h>
static int g;
extern "C" void bump() { g = 1; }
__asm__(".section .init,\"ax\",@progbits\n call bump@PLT\n .previous\n");
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return g - 1; }
)");
#if defined(__x86_64__)
  EXPECT_TRUE(has(r, "load_constructor", "beyond the C runtime's _init")) << all_violations(r);
#else
  GTEST_SKIP() << "the .init byte comparison is implemented for x86-64 only";
#endif
}

TEST(LoadChecks, SearchPathsAndExecutableStacksAreRefused) {
  ElfInspection rpath = inspect(kPlainKernel, {"-Wl,-rpath,/tmp/kforge-planted", "-Wl,-z,execstack"});
  EXPECT_TRUE(has(rpath, "load_section", "/tmp/kforge-planted")) << all_violations(rpath);
  EXPECT_TRUE(has(rpath, "load_section", "executable stack")) << all_violations(rpath);
  ElfInspection old_rpath = inspect(kPlainKernel, {"-Wl,--disable-new-dtags", "-Wl,-rpath,/opt/kforge"});
  EXPECT_TRUE(has(old_rpath, "load_section", "DT_RPATH")) << all_violations(old_rpath);
}

TEST(LoadChecks, TextRelocationsAreRefused) {
  // An absolute address stored in .text: the loader must write to the code.
  ElfInspection r = inspect(R"(
#include <kforge/kernel_abi.h>
int g_value = 1;
__asm__(".text\n.globl kf_text_ptr\nkf_text_ptr: .quad g_value\n.previous\n");
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return 0; }
)",
                            {"-Wl,-z,notext"});
  EXPECT_TRUE(has(r, "load_section", "DT_TEXTREL")) << all_violations(r);
}

// nvcc's objects carry its fatbinary registration constructor
// (__sti____cudaRegisterAll) next to GCC's: both must pass. Built with the
// flags of the environment's CUDA compile step.
TEST(LoadChecks, NvccRegistrationConstructorIsAccepted) {
  const std::filesystem::path nvcc = "/usr/local/cuda/bin/nvcc";
  if (!std::filesystem::exists(nvcc)) GTEST_SKIP() << nvcc << " not installed";
  const std::string source = R"(
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>
__global__ void relu(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void* stream) {
  long n = (long)kf_numel(&out[0]);
  relu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (float*)out[0].data, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)";
  std::filesystem::path dir = std::filesystem::path(KFORGE_BINARY_DIR) / "tests" / "checks" / "nvcc";
  std::filesystem::create_directories(dir);
  std::filesystem::path so = dir / (std::to_string(std::hash<std::string>{}(source)) + ".so");
  if (!std::filesystem::exists(so)) {
    std::filesystem::path cu = dir / "relu.cu", tmp = dir / "relu.so.tmp";
    std::ofstream(cu) << source;
    ProcessOptions options;
    options.output_file = dir / "log";
    const ProcessResult built =
        run_process({nvcc.string(), "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
                     "-I" KFORGE_SOURCE_DIR "/core/include", "-o", tmp.string(), cu.string()},
                    options);
    ASSERT_TRUE(built.ok()) << "nvcc failed; see " << (dir / "log");
    std::filesystem::rename(tmp, so);
  }
  ElfInspection r = inspect_candidate(so, SymbolPolicy::for_backend("cuda"));
  EXPECT_TRUE(details_of(r, "load_constructor").empty()) << all_violations(r);
  EXPECT_TRUE(details_of(r, "load_section").empty()) << all_violations(r);
  bool registration = std::any_of(r.facts.load_time_code.begin(), r.facts.load_time_code.end(), [](const auto& c) {
    return std::any_of(c.names.begin(), c.names.end(),
                       [](const std::string& n) { return n.find("__sti____cudaRegisterAll") != std::string::npos; });
  });
  EXPECT_TRUE(registration) << "nvcc no longer emits __sti____cudaRegisterAll: revisit the allow-list";
}

}  // namespace
}  // namespace kforge::judge
