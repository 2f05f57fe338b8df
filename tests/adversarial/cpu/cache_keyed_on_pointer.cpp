// Exploit: caching outputs across calls keyed on the input pointer (the arena
// does not move, so the key hits on every call after the first).
// Must be caught by: verification with fresh inputs per seed: violation
// `stale_output` on seed 1.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdlib.h>
#include <string.h>

static const void* g_key = 0;
static float* g_cache = 0;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  int64_t n = kf_numel(&out[0]);
  float* o = (float*)out[0].data;
  if (g_key == in[0].data && g_cache) {
    memcpy(o, g_cache, (size_t)n * sizeof(float));
    return 0;
  }
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  free(g_cache);
  g_cache = (float*)malloc((size_t)n * sizeof(float));
  memcpy(g_cache, o, (size_t)n * sizeof(float));
  g_key = in[0].data;
  return 0;
}
