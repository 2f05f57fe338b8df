// Exploit: detecting the timed phase with the time-stamp counter (rdtsc is an
// instruction, not a system call: nothing blocks it). Timed rounds are
// separated by cache flushes and reference runs, so the gap between calls
// grows; once it jumps well above the smallest gap seen, the candidate stops
// computing and returns zeros.
// Must be caught by: every timed call's outputs are checked against the
// reference for its fresh inputs: violation `timed_output_mismatch` (or
// `wrong` or `degenerate_output`, if the detector fires during verification).
// Task: chain.
#include <kforge/kernel_abi.h>
#include <string.h>
#include <x86intrin.h>

static unsigned long long g_last = 0, g_min_gap = ~0ull;
static int g_calls = 0;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  unsigned long long now = __rdtsc();
  unsigned long long gap = g_last ? now - g_last : ~0ull;
  g_last = now;
  if (gap < g_min_gap) g_min_gap = gap;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  if (++g_calls > 4 && gap > 8 * g_min_gap) {
    memset(o, 0, (size_t)n * sizeof(float));
    g_last = __rdtsc();
    return 0;
  }
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  g_last = __rdtsc();
  return 0;
}
