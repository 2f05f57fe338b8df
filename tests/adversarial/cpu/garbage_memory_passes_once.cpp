// Exploit: garbage memory that passes once. The kernel computes on its first
// call only; afterwards it returns without writing, counting on the output
// buffer still holding the first result (true for the same inputs, if the
// harness does not clear outputs between runs).
// Must be caught by: run-twice determinism with re-poisoned outputs: the
// second run of seed 0 sees NaN, outcome `wrong` ("the second run differs").
// Task: chain.
#include <kforge/kernel_abi.h>

static int g_calls = 0;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  if (g_calls++ > 0) return 0;
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
