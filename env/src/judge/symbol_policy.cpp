#include "judge/symbol_policy.h"

#include <fnmatch.h>

#include <stdexcept>
#include <utility>

namespace kforge::judge {
namespace {

// What pure computation on host memory needs from libc. Deliberately absent:
// anything that reaches the outside world or the harness (files, sockets,
// processes, threads, signals, timers, dynamic loading, memory protection,
// environment). The runner's seccomp filter backs this up at run time.
const char* const kLibcMemory[] = {
    "memcpy",        "memmove",      "memset",         "memcmp",        "memchr",       "bzero",   "__memcpy_chk",
    "__memmove_chk", "__memset_chk", "strlen",         "strnlen",       "strcmp",       "strncmp", "strchr",
    "strrchr",       "strcpy",       "strncpy",        "strcat",        "__strcpy_chk", "malloc",  "calloc",
    "realloc",       "free",         "posix_memalign", "aligned_alloc", "memalign",     "qsort",   "bsearch",
    "abs",           "labs",         "llabs",          "div",           "ldiv",         "strtod",  "strtof",
    "strtol",        "strtoll",      "strtoul",        "strtoull",      "atoi",         "atof",    "atol",
};

// Orderly failure: these end the runner, which the judge reports as a crash
// with the exit code or signal (plus the stack protector's canary).
const char* const kLibcExit[] = {"abort", "exit", "_exit", "__assert_fail", "__stack_chk_fail", "__stack_chk_guard"};

// Printing goes to a bounded file in the runner's scratch dir; the report
// carries its tail, which helps the policy debug.
const char* const kLibcPrint[] = {
    "printf",        "fprintf",       "sprintf",        "snprintf",        "vprintf",        "vfprintf",
    "vsprintf",      "vsnprintf",     "puts",           "putchar",         "fputs",          "fputc",
    "putc",          "fwrite",        "fflush",         "stdout",          "stderr",         "__printf_chk",
    "__fprintf_chk", "__sprintf_chk", "__snprintf_chk", "__vsnprintf_chk", "__vfprintf_chk", "__vprintf_chk",
};

// libm: base names; the float (f) and long double (l) variants are added when
// the table is expanded.
const char* const kLibmBase[] = {
    "sin",       "cos",     "tan",    "asin",     "acos",      "atan",       "atan2",     "sinh",   "cosh",   "tanh",
    "asinh",     "acosh",   "atanh",  "exp",      "exp2",      "exp10",      "expm1",     "log",    "log2",   "log10",
    "log1p",     "logb",    "pow",    "sqrt",     "cbrt",      "hypot",      "erf",       "erfc",   "lgamma", "tgamma",
    "fabs",      "fmax",    "fmin",   "fdim",     "fma",       "floor",      "ceil",      "round",  "trunc",  "rint",
    "nearbyint", "lrint",   "llrint", "lround",   "llround",   "fmod",       "remainder", "remquo", "frexp",  "ldexp",
    "scalbn",    "scalbln", "modf",   "copysign", "nextafter", "nexttoward", "ilogb",     "sincos", "nan",
};

// Vectorized libm (GCC emits these with -ffast-math) and glibc's internal
// aliases of the same functions.
const char* const kLibmPatterns[] = {"_ZGV*", "__*_finite", "signgam"};

// The C++ runtime: allocation, exceptions, guards for function-local statics,
// RTTI/vtables of standard types, std::string, iostream output.
const char* const kCxxRuntime[] = {
    "__cxa_*",
    "__gxx_personality_v0",
    "_Unwind_Resume",
    "_Znw*",    // operator new, all overloads
    "_Zna*",    // operator new[]
    "_ZdlPv*",  // operator delete
    "_ZdaPv*",  // operator delete[]
    "_ZSt*__throw_*",
    "_ZSt9terminatev",
    "_ZSt7nothrow",
    "_ZTISt*",  // typeinfo of std types
    "_ZTSSt*",
    "_ZTVSt*",  // vtables of std types
    "_ZTIN10__cxxabiv1*",
    "_ZTVN10__cxxabiv1*",
    "_ZNSt9exception*",
    "_ZNSt9bad_alloc*",
    "_ZNSt13runtime_error*",
    "_ZNSt11logic_error*",
    "_ZNSt12length_error*",
    "_ZNSt12out_of_range*",
    "_ZNSt16invalid_argument*",
    "_ZNKSt9exception*",
    "_ZNKSt13runtime_error*",
    "_ZNKSt11logic_error*",
    "_ZNSt7__cxx1112basic_string*",
    "_ZNKSt7__cxx1112basic_string*",
    "_ZSt4cout",
    "_ZSt4cerr",
    "_ZNSo*",  // std::ostream members
    "_ZStlsI*",
    "_ZSt4endl*",
    "_ZNKSt5ctypeIcE13_M_widen_initEv",  // std::endl widens '\n' through the stream's locale
    "_ZSt16__ostream_insert*",
    "_ZNSt8ios_base4Init*",
};

// Weak references every GCC-built shared object carries; nothing calls them
// unless a profiler or transactional memory runtime is present.
const char* const kToolchain[] = {"__libc_single_threaded",  // libstdc++ reads it to skip atomics in shared_ptr
                                  "__gmon_start__", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable"};

const char* const kHostLibraries[] = {
    "libc.so", "libm.so", "libmvec.so", "libstdc++.so", "libgcc_s.so", "ld-linux-x86-64.so", "ld-linux-aarch64.so"};

// CUDA backend additions: kernel launch and registration through the runtime
// API, error queries and stream-ordered operations on the given stream. Host
// synchronization, device management, graphs and other streams are left out.
const char* const kCudaRuntime[] = {
    "__cudaRegisterFatBinary",
    "__cudaRegisterFatBinaryEnd",
    "__cudaUnregisterFatBinary",
    "__cudaRegisterFunction",
    "__cudaRegisterVar",
    "__cudaPushCallConfiguration",
    "__cudaPopCallConfiguration",
    // CUDA 13's host stubs for <<<...>>> launch through these two instead of
    // cudaLaunchKernel; every nvcc-built kernel imports them.
    "__cudaGetKernel",
    "__cudaLaunchKernel",
    // Emitted by host_runtime.h's static helper when nvcc builds at -O0.
    "__cudaInitModule",
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "cudaGetErrorString",
    "cudaGetErrorName",
    "cudaFuncSetAttribute",
    "cudaFuncGetAttributes",
    "cudaMemsetAsync",
    "cudaMemcpyAsync",
    // Stream-ordered scratch memory on the given stream (torch_ext's
    // torch::empty and friends; workspaces in cuda mode). The runner reserves
    // and configures the pool; it dies with the runner (one candidate each).
    "cudaMallocAsync",
    "cudaFreeAsync",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaGetDevice",
    "cudaDeviceGetAttribute",
};
const char* const kCudaLibraries[] = {"libcudart.so"};

struct LibraryGroup {
  const char* name;  // as written in TaskSpec::libraries
  std::vector<const char*> symbols;
  std::vector<const char*> libraries;
};

const std::vector<LibraryGroup>& cuda_library_groups() {
  static const std::vector<LibraryGroup> kGroups = {
      {"cublas", {"cublas*"}, {"libcublas.so", "libcublasLt.so"}},
      // Spelled as TaskSpec::libraries and the nvcc compiler spell it.
      {"cublasLt", {"cublasLt*"}, {"libcublasLt.so"}},
      {"cudnn", {"cudnn*"}, {"libcudnn.so"}},
  };
  return kGroups;
}

template <typename Array>
void append(std::vector<std::string>* out, const Array& items) {
  for (const char* s : items) out->emplace_back(s);
}

std::vector<std::string> host_symbol_patterns() {
  std::vector<std::string> v;
  append(&v, kLibcMemory);
  append(&v, kLibcExit);
  append(&v, kLibcPrint);
  for (const char* base : kLibmBase) {
    v.emplace_back(base);
    v.emplace_back(std::string(base) + "f");
    v.emplace_back(std::string(base) + "l");
  }
  append(&v, kLibmPatterns);
  append(&v, kCxxRuntime);
  append(&v, kToolchain);
  return v;
}

// Categories for refusal messages, matched in order.
const std::pair<const char*, const char*> kRefusalReasons[] = {
    {"pthread_*", "threads"},
    {"thrd_*", "threads"},
    {"_ZNSt6thread*", "threads"},
    {"clone*", "processes"},
    {"fork", "processes"},
    {"vfork", "processes"},
    {"exec*", "processes"},
    {"system", "processes"},
    {"popen", "processes"},
    {"posix_spawn*", "processes"},
    {"kill", "signals"},
    {"raise", "signals"},
    {"signal", "signals"},
    {"sigaction", "signals"},
    {"sig*", "signals"},
    {"socket", "network"},
    {"connect", "network"},
    {"bind", "network"},
    {"send*", "network"},
    {"recv*", "network"},
    {"getaddrinfo", "network"},
    {"open*", "file access"},
    {"fopen*", "file access"},
    {"creat*", "file access"},
    {"read*", "file access"},
    {"write*", "file access"},
    {"unlink*", "file access"},
    {"stat*", "file access"},
    {"_ZNSt14basic_*fstream*", "file access"},
    {"dlopen", "dynamic loading"},
    {"dlsym", "dynamic loading"},
    {"dlvsym", "dynamic loading"},
    {"mmap*", "memory mapping"},
    {"mprotect", "memory mapping"},
    {"munmap", "memory mapping"},
    {"syscall", "raw system calls"},
    {"ptrace", "process inspection"},
    {"prctl", "process control"},
    {"clock_gettime", "timing"},
    {"gettimeofday", "timing"},
    {"time", "timing"},
    {"clock", "timing"},
    {"rdtsc*", "timing"},
    {"__rdtsc*", "timing"},
    {"getenv", "environment"},
    {"secure_getenv", "environment"},
    {"setjmp", "non-local jumps"},
    {"longjmp", "non-local jumps"},
    {"_setjmp", "non-local jumps"},
    {"sleep", "sleeping"},
    {"usleep", "sleeping"},
    {"nanosleep", "sleeping"},
    {"at::*", "PyTorch"},
    {"_ZN2at*", "PyTorch"},
    {"_ZN3c10*", "PyTorch"},
    {"_ZN5torch*", "PyTorch"},
};

bool glob_match(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

SymbolPolicy SymbolPolicy::for_backend(const std::string& backend, const std::vector<std::string>& task_libraries) {
  SymbolPolicy p;
  p.backend_ = backend;
  p.symbol_patterns_ = host_symbol_patterns();
  append(&p.library_prefixes_, kHostLibraries);
  if (backend == "cpu") return p;  // task libraries are CUDA libraries; none applies on the host
  if (backend != "cuda") throw std::invalid_argument("unknown backend '" + backend + "' (expected cpu or cuda)");
  append(&p.symbol_patterns_, kCudaRuntime);
  append(&p.library_prefixes_, kCudaLibraries);
  for (const auto& lib : task_libraries) {
    for (const auto& group : cuda_library_groups()) {
      if (lib != group.name) continue;
      append(&p.symbol_patterns_, group.symbols);
      append(&p.library_prefixes_, group.libraries);
    }
  }
  return p;
}

bool SymbolPolicy::allows_symbol(const std::string& name) const {
  for (const auto& pattern : symbol_patterns_) {
    if (glob_match(pattern, name)) return true;
  }
  return false;
}

bool SymbolPolicy::allows_library(const std::string& soname) const {
  for (const auto& prefix : library_prefixes_) {
    if (soname.compare(0, prefix.size(), prefix) != 0) continue;
    // "libm.so" allows "libm.so" and "libm.so.6", not "libm.so_evil".
    if (soname.size() == prefix.size() || soname[prefix.size()] == '.') return true;
  }
  return false;
}

std::string SymbolPolicy::refusal_reason(const std::string& name) {
  for (const auto& [pattern, reason] : kRefusalReasons) {
    if (glob_match(pattern, name)) return reason;
  }
  return "";
}

}  // namespace kforge::judge
