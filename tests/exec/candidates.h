// Candidate sources for the execution tests, one per behaviour. Each is a
// complete translation unit compiled by test_support's compile_candidate().
// Most implement the elementwise chain out = relu(x * y + z) (elementwise_chain_task).
#pragma once

namespace kforge::testing::candidates {

// Correct: a fused single pass.
inline constexpr const char* kChainCorrect = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data; const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data; float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) { float v = x[i] * y[i] + z[i]; o[i] = v > 0.f ? v : 0.f; }
  return 0;
}
)";

// Correct but not bit-reproducible: every other call adds 1e-6 to each output,
// far inside the tolerance, as a reduction whose order varies between calls
// would move its last bits.
inline constexpr const char* kChainJitter = R"(
#include <kforge/kernel_abi.h>
static int calls = 0;
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data; const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data; float* o = (float*)out[0].data;
  const float jitter = (calls++ % 2) ? 1e-6f : 0.f;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) { float v = x[i] * y[i] + z[i]; o[i] = (v > 0.f ? v : 0.f) + jitter; }
  return 0;
}
)";

// Wrong: forgets the relu.
inline constexpr const char* kChainNoRelu = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data; const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data; float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) o[i] = x[i] * y[i] + z[i];
  return 0;
}
)";

// Hard-codes the base shape (4096 elements): wrong on a larger variant.
inline constexpr const char* kChainFixedShape = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data; const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data; float* o = (float*)out[0].data;
  for (int64_t i = 0; i < 4096; ++i) { float v = x[i] * y[i] + z[i]; o[i] = v > 0.f ? v : 0.f; }
  return 0;
}
)";

// Computes correctly, then zeroes an input.
inline constexpr const char* kChainMutatesInput = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  float* x = (float*)in[0].data; const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data; float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) { float v = x[i] * y[i] + z[i]; o[i] = v > 0.f ? v : 0.f; }
  x[0] = 0.f;
  return 0;
}
)";

// Caches its result keyed on the input pointer and replays it.
inline constexpr const char* kChainPointerCache = R"(
#include <kforge/kernel_abi.h>
#include <stdlib.h>
#include <string.h>
static const void* g_key = 0;
static float* g_cache = 0;
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  int64_t n = kf_numel(&out[0]);
  float* o = (float*)out[0].data;
  if (g_key == in[0].data && g_cache) { memcpy(o, g_cache, n * sizeof(float)); return 0; }
  const float* x = (const float*)in[0].data; const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  for (int64_t i = 0; i < n; ++i) { float v = x[i] * y[i] + z[i]; o[i] = v > 0.f ? v : 0.f; }
  free(g_cache);
  g_cache = (float*)malloc(n * sizeof(float));
  memcpy(g_cache, o, n * sizeof(float));
  g_key = in[0].data;
  return 0;
}
)";

// --- faults -----------------------------------------------------------------

inline constexpr const char* kSegfault = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  *(volatile int*)8 = 1;
  return 0;
}
)";

inline constexpr const char* kAbort = R"(
#include <kforge/kernel_abi.h>
#include <stdlib.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { abort(); }
)";

inline constexpr const char* kHang = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  for (;;) asm volatile("");
}
)";

inline constexpr const char* kExit3 = R"(
#include <kforge/kernel_abi.h>
#include <stdlib.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { exit(3); }
)";

// Allocates (and touches) without bound: runs into the address-space limit.
inline constexpr const char* kUnboundedAllocation = R"(
#include <kforge/kernel_abi.h>
#include <vector>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  std::vector<std::vector<char>> hog;
  for (;;) hog.emplace_back(16 << 20, 1);
}
)";

// Writes 256 bytes past the end of its output: the guard page.
inline constexpr const char* kOutOfBoundsWrite = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) o[i] = 0.f;
  ((volatile float*)o)[n + 64] = 1.f;
  return 0;
}
)";

inline constexpr const char* kReturnsSeven = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return 7; }
)";

// --- escapes ------------------------------------------------------------------

inline constexpr const char* kUsesFopen = R"(
#include <kforge/kernel_abi.h>
#include <stdio.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  FILE* f = fopen("/etc/hostname", "r");
  return f ? 0 : 1;
}
)";

inline constexpr const char* kUsesPthread = R"(
#include <kforge/kernel_abi.h>
#include <pthread.h>
static void* work(void*) { return 0; }
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  pthread_t t;
  pthread_create(&t, 0, work, 0);
  return 0;
}
)";

// openat(AT_FDCWD, "/etc/hostname", O_RDONLY) through the syscall instruction,
// bypassing libc (and so the symbol allow-list).
inline constexpr const char* kRawOpenat = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  static const char path[] = "/etc/hostname";
  long ret;
  register long r10 __asm__("r10") = 0;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(257L), "D"(-100L), "S"(path), "d"(0L), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret >= 0 ? 0 : 1;
}
)";

// symlinkat("/etc/passwd", AT_FDCWD, "/tmp/kforge-link") through the syscall
// instruction: the report must name the link it tried to make.
inline constexpr const char* kRawSymlinkat = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  static const char target[] = "/etc/passwd";
  static const char link[] = "/tmp/kforge-link";
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(266L), "D"(target), "S"(-100L), "d"(link)
                   : "rcx", "r11", "memory");
  return ret >= 0 ? 0 : 1;
}
)";

// socket(AF_INET, SOCK_STREAM, 0) through the syscall instruction.
inline constexpr const char* kRawSocket = R"(
#include <kforge/kernel_abi.h>
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(41L), "D"(2L), "S"(1L), "d"(0L) : "rcx", "r11", "memory");
  return ret >= 0 ? 0 : 1;
}
)";

// A static constructor that tries to open a socket while the candidate is
// being loaded (raw syscall: the loading-phase filter must catch it).
inline constexpr const char* kConstructorSocket = R"(
#include <kforge/kernel_abi.h>
__attribute__((constructor)) static void grab() {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(41L), "D"(2L), "S"(1L), "d"(0L) : "rcx", "r11", "memory");
}
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return 0; }
)";

// No entry point at all.
inline constexpr const char* kNoEntryPoint = R"(
extern "C" int kf_forwards(void) { return 0; }
)";

// A segment that is writable and executable.
inline constexpr const char* kWritableExecutable = R"(
#include <kforge/kernel_abi.h>
__asm__(".section .wxdata,\"awx\",@progbits\n.byte 0xc3\n.previous\n");
extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) { return 0; }
)";

}  // namespace kforge::testing::candidates
