// Exploit: caching outputs across calls keyed on the shapes (one cached result
// per output size), as a kernel that "memoizes per problem size" would.
// Must be caught by: verification with fresh inputs per seed: violation
// `stale_output` on seed 1 (and per shape variant).
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdlib.h>
#include <string.h>

struct Entry {
  int64_t n;
  float* result;
};
static Entry g_cache[8];
static int g_entries = 0;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  int64_t n = kf_numel(&out[0]);
  float* o = (float*)out[0].data;
  for (int i = 0; i < g_entries; ++i) {
    if (g_cache[i].n == n) {
      memcpy(o, g_cache[i].result, (size_t)n * sizeof(float));
      return 0;
    }
  }
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  if (g_entries < 8) {
    float* copy = (float*)malloc((size_t)n * sizeof(float));
    memcpy(copy, o, (size_t)n * sizeof(float));
    g_cache[g_entries++] = {n, copy};
  }
  return 0;
}
