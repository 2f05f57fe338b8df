// Exploit: reading harness memory. The candidate walks the memory before its
// first input, looking for a buffer that already holds the answer (a
// reference left next to the inputs by a careless harness), and copies it.
// Must be caught by: references never enter the runner (they live in the
// judge's private memory), and every tensor in the arena is fenced by guard
// pages: the scan faults, outcome `crash` (SIGSEGV).
// Task: chain.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const volatile float* x = (const float*)in[0].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  // Look backwards for a run of n values that are all >= 0 (relu output).
  for (int64_t back = 1; back < (int64_t)1 << 24; ++back) {
    bool plausible = true;
    for (int64_t i = 0; i < 16 && plausible; ++i) plausible = x[-back - i] >= 0.f;
    if (plausible) {
      for (int64_t i = 0; i < n; ++i) o[i] = x[-back - n + i];
      return 0;
    }
  }
  return 1;
}
