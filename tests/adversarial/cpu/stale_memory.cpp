// Exploit: reusing stale memory. The first call computes and keeps its result
// in a static buffer; every later call returns that buffer (right for repeated
// inputs, which is all a harness that reuses its inputs would check).
// Must be caught by: verification with fresh inputs per seed: the outputs
// equal the previous seed's reference, violation `stale_output`.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <string.h>

static float g_previous[1 << 16];
static bool g_have = false;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  if (n > (1 << 16)) return 2;
  if (g_have) {
    memcpy(o, g_previous, (size_t)n * sizeof(float));
    return 0;
  }
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  memcpy(g_previous, o, (size_t)n * sizeof(float));
  g_have = true;
  return 0;
}
