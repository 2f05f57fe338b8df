// The static check that runs before any candidate is loaded: real shared
// objects built by g++, inspected against the CPU allow-list.
#include "judge/elf_inspector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "candidates.h"
#include "test_support.h"

namespace kforge::judge {
namespace {

namespace cand = testing::candidates;

std::vector<std::string> checks_of(const ElfInspection& r) {
  std::vector<std::string> out;
  for (const auto& v : r.violations) out.push_back(v.check);
  return out;
}

bool has_violation(const ElfInspection& r, const std::string& check, const std::string& needle) {
  return std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation& v) {
    return v.check == check && v.detail.find(needle) != std::string::npos;
  });
}

const SymbolPolicy& cpu() {
  static const SymbolPolicy p = SymbolPolicy::for_backend("cpu");
  return p;
}

TEST(ElfInspector, AcceptsAPlainKernel) {
  ElfInspection r = inspect_candidate(testing::compile_candidate(cand::kChainCorrect), cpu());
  EXPECT_TRUE(r.accepted) << ::testing::PrintToString(checks_of(r));
  EXPECT_NE(std::find(r.facts.exported_functions.begin(), r.facts.exported_functions.end(), "kf_forward"),
            r.facts.exported_functions.end());
  EXPECT_TRUE(r.facts.syscalls.sites.empty());
}

TEST(ElfInspector, AcceptsCxxRuntimeUse) {
  // std::vector: operator new/delete, __throw_length_error, exception personality.
  ElfInspection r = inspect_candidate(testing::compile_candidate(cand::kUnboundedAllocation), cpu());
  EXPECT_TRUE(r.accepted) << ::testing::PrintToString(checks_of(r));
  bool imports_new = std::any_of(r.facts.undefined.begin(), r.facts.undefined.end(),
                                 [](const ElfSymbolRef& s) { return s.name.rfind("_Znw", 0) == 0; });
  EXPECT_TRUE(imports_new);
}

TEST(ElfInspector, NamesForbiddenSymbols) {
  ElfInspection file = inspect_candidate(testing::compile_candidate(cand::kUsesFopen), cpu());
  EXPECT_FALSE(file.accepted);
  EXPECT_TRUE(has_violation(file, "forbidden_symbol", "fopen")) << ::testing::PrintToString(checks_of(file));
  EXPECT_TRUE(has_violation(file, "forbidden_symbol", "file access"));

  ElfInspection threads = inspect_candidate(testing::compile_candidate(cand::kUsesPthread, {"-pthread"}), cpu());
  EXPECT_FALSE(threads.accepted);
  EXPECT_TRUE(has_violation(threads, "forbidden_symbol", "pthread_create"));
}

TEST(ElfInspector, FindsRawSyscallInstructions) {
  ElfInspection r = inspect_candidate(testing::compile_candidate(cand::kRawOpenat), cpu());
  EXPECT_FALSE(r.accepted);
  ASSERT_EQ(r.facts.syscalls.sites.size(), 1u);
  EXPECT_EQ(r.facts.syscalls.sites[0].instruction, "syscall");
  // The report says whose code it is.
  EXPECT_TRUE(has_violation(r, "raw_syscall", "1 system-call instruction(s): syscall in kf_forward+0x"))
      << r.violations[0].detail;
}

#if defined(__x86_64__)
// Honest code whose bytes hold `0f 05` (syscall), `0f 34` (sysenter) and
// `cd 80` (int 0x80) inside longer instructions: a 64-bit immediate and a
// 32-bit displacement. Decoded, they are a movabs and loads, not system calls
// (the template policy's kernels were once refused for such bytes).
const char* kSyscallBytesInConstants = R"(#include <kforge/kernel_abi.h>
#include <stdint.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  volatile uint64_t mix = 0x80cd340f050f050fULL;  // movabs with the bytes in its immediate
  const unsigned char* bytes = static_cast<const unsigned char*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  // Byte loads at displacements 0x050f, 0x340f and 0x80cd: each a disp32 holding the pattern.
  y[0] = static_cast<float>(bytes[0x050f] + bytes[0x340f] + bytes[0x80cd] + (mix & 1));
  return 0;
}
)";

TEST(ElfInspector, SyscallBytesInsideLongerInstructionsAreNotSyscalls) {
  ElfInspection r = inspect_candidate(testing::compile_candidate(kSyscallBytesInConstants), cpu());
  EXPECT_FALSE(has_violation(r, "raw_syscall", "")) << ::testing::PrintToString(checks_of(r));
  EXPECT_TRUE(r.accepted) << ::testing::PrintToString(checks_of(r));
  // The bytes are there (else this test would prove nothing), and decoding
  // is what told them apart.
  EXPECT_GE(r.facts.syscalls.pattern_hits_not_instructions, 4);
  EXPECT_GT(r.facts.syscalls.instructions_decoded, 0);
}

// A syscall hidden inside a movabs's immediate and reached by a jump into
// the middle of that instruction: a linear reading sees only the movabs; the
// jump target is decoded too.
const char* kSyscallBehindAnOverlappingJump = R"(#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  long ret = 39;  // getpid
  __asm__ volatile(
      "jmp 1f + 2\n"
      "1: .byte 0x48, 0xb8, 0x0f, 0x05, 0xeb, 0x04, 0x90, 0x90, 0x90, 0x90\n"
      : "+a"(ret) : : "rcx", "r11", "memory");
  return ret > 0 ? 0 : 1;
}
)";

TEST(ElfInspector, FindsASyscallReachedByAJumpIntoAnotherInstruction) {
  ElfInspection r = inspect_candidate(testing::compile_candidate(kSyscallBehindAnOverlappingJump), cpu());
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_violation(r, "raw_syscall", "1 system-call instruction(s): syscall in kf_forward+0x"))
      << ::testing::PrintToString(checks_of(r));
}
#endif

TEST(ElfInspector, RequiresTheEntryPoint) {
  ElfInspection r = inspect_candidate(testing::compile_candidate(cand::kNoEntryPoint), cpu());
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_violation(r, "missing_entry_point", "kf_forward"));
}

TEST(ElfInspector, HiddenEntryPointDoesNotCount) {
  std::string src = std::string("#include <kforge/kernel_abi.h>\n") +
                    "extern \"C\" __attribute__((visibility(\"hidden\"))) int kf_forward(const kf_tensor*, int, "
                    "kf_tensor*, int, void*) { return 0; }\n";
  ElfInspection r = inspect_candidate(testing::compile_candidate(src), cpu());
  EXPECT_TRUE(has_violation(r, "missing_entry_point", "kf_forward"));
}

#if defined(__x86_64__)
// A namespace-scope initializer is accepted unless its calls reach an import
// that does GPU work. g++ builds these (no GPU or nvcc needed): the "launch"
// is a declared cudaLaunchKernel, reached through a local function, by a PLT
// call and, with -fno-plt, by a GOT call.
const char* kInitializerReachesALaunch = R"(#include <kforge/kernel_abi.h>
extern "C" int cudaLaunchKernel(const void*, int, int, void**, unsigned long, void*);
__attribute__((noinline)) static int warm_up() { return cudaLaunchKernel(0, 1, 1, 0, 0, 0); }
static int g_ready = warm_up();
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return g_ready == 0 ? 0 : 1; }
)";
const char* kInitializerComputes = R"(#include <kforge/kernel_abi.h>
#include <cmath>
__attribute__((noinline)) static float table_value(int i) { return std::sqrt(static_cast<float>(i)); }
static float g_table = table_value(7);
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return g_table > 0 ? 0 : 1; }
)";

TEST(ElfInspector, InitializerThatReachesGpuWorkIsALoadConstructor) {
  const SymbolPolicy& cuda = []() -> const SymbolPolicy& {
    static const SymbolPolicy p = SymbolPolicy::for_backend("cuda");
    return p;
  }();
  for (const std::vector<std::string>& flags : {std::vector<std::string>{}, std::vector<std::string>{"-fno-plt"}}) {
    ElfInspection r = inspect_candidate(testing::compile_candidate(kInitializerReachesALaunch, flags), cuda);
    EXPECT_TRUE(has_violation(r, "load_constructor", "which calls cudaLaunchKernel"))
        << ::testing::PrintToString(flags) << " " << ::testing::PrintToString(checks_of(r));
  }
  ElfInspection honest = inspect_candidate(testing::compile_candidate(kInitializerComputes), cuda);
  EXPECT_FALSE(has_violation(honest, "load_constructor", "")) << ::testing::PrintToString(checks_of(honest));
  // The facts say what each initializer reaches.
  bool saw_sqrt_free_initializer = false;
  for (const auto& code : honest.facts.load_time_code) {
    for (const auto& n : code.names) saw_sqrt_free_initializer |= n.rfind("_GLOBAL__sub_I_", 0) == 0;
  }
  EXPECT_TRUE(saw_sqrt_free_initializer);
}
#endif

TEST(ElfInspector, RejectsWritableExecutableSegments) {
  ElfInspection r = inspect_candidate(testing::compile_candidate(cand::kWritableExecutable), cpu());
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_violation(r, "writable_executable", "WX")) << ::testing::PrintToString(checks_of(r));
}

TEST(ElfInspector, RejectsLibrariesOutsideTheAllowList) {
  ElfInspection r =
      inspect_candidate(testing::compile_candidate(cand::kChainCorrect, {"-Wl,--no-as-needed", "-lz"}), cpu());
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_violation(r, "forbidden_library", "libz.so")) << ::testing::PrintToString(checks_of(r));
}

TEST(ElfInspector, MalformedFilesAreViolationsNotExceptions) {
  auto path = std::filesystem::path(KFORGE_BINARY_DIR) / "tests" / "exec" / "not_an_elf.so";
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << "#!/bin/sh\necho hi\n";
  ElfInspection r = inspect_candidate(path, cpu());
  EXPECT_FALSE(r.accepted);
  EXPECT_TRUE(has_violation(r, "malformed_elf", "not an ELF file"));

  // A real object cut in half: offsets point past the end.
  auto so = testing::compile_candidate(cand::kChainCorrect);
  std::ifstream in(so, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto cut = path.parent_path() / "truncated.so";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 200);
  ElfInspection t = inspect_candidate(cut, cpu());
  EXPECT_FALSE(t.accepted);
  EXPECT_TRUE(has_violation(t, "malformed_elf", "truncated"));
}

TEST(SymbolPolicy, CpuTable) {
  const SymbolPolicy& p = cpu();
  for (const char* ok : {"memcpy", "expf", "tanhf", "sqrt", "malloc", "_Znwm", "_ZdlPvm", "__cxa_throw",
                         "_ZSt20__throw_length_errorPKc", "__stack_chk_fail", "printf", "_ZGVdN8v_expf"}) {
    EXPECT_TRUE(p.allows_symbol(ok)) << ok;
  }
  for (const char* bad :
       {"fopen", "open",     "pthread_create", "fork",    "execve", "system",    "socket",           "dlopen",
        "dlsym", "mprotect", "mmap",           "syscall", "signal", "sigaction", "clock_gettime",    "gettimeofday",
        "time",  "getenv",   "ptrace",         "prctl",   "kill",   "setjmp",    "_ZN2at6TensorC1Ev"}) {
    EXPECT_FALSE(p.allows_symbol(bad)) << bad;
  }
  EXPECT_TRUE(p.allows_library("libm.so.6"));
  EXPECT_TRUE(p.allows_library("libstdc++.so.6"));
  EXPECT_FALSE(p.allows_library("libm.so_evil"));
  EXPECT_FALSE(p.allows_library("libcudart.so.12"));
  EXPECT_EQ(SymbolPolicy::refusal_reason("pthread_create"), "threads");
  EXPECT_EQ(SymbolPolicy::refusal_reason("socket"), "network");
}

TEST(SymbolPolicy, CudaAddsTheRuntimeAndTaskLibraries) {
  SymbolPolicy plain = SymbolPolicy::for_backend("cuda");
  EXPECT_TRUE(plain.allows_symbol("cudaLaunchKernel"));
  EXPECT_TRUE(plain.allows_library("libcudart.so.12"));
  EXPECT_FALSE(plain.allows_symbol("cublasSgemm_v2"));
  EXPECT_FALSE(plain.allows_symbol("cudaDeviceSynchronize"));
  SymbolPolicy with_cublas = SymbolPolicy::for_backend("cuda", {"cublas"});
  EXPECT_TRUE(with_cublas.allows_symbol("cublasSgemm_v2"));
  EXPECT_TRUE(with_cublas.allows_library("libcublas.so.12"));
  // Tasks name the library as TaskSpec::libraries does.
  SymbolPolicy with_lt = SymbolPolicy::for_backend("cuda", {"cublasLt"});
  EXPECT_TRUE(with_lt.allows_symbol("cublasLtMatmul"));
  EXPECT_TRUE(with_lt.allows_library("libcublasLt.so.13"));
  EXPECT_FALSE(plain.allows_symbol("cublasLtMatmul"));
  EXPECT_TRUE(plain.allows_symbol("__cudaInitModule"));  // nvcc -O0 host stubs
  EXPECT_THROW(SymbolPolicy::for_backend("tpu"), std::invalid_argument);
}

}  // namespace
}  // namespace kforge::judge
