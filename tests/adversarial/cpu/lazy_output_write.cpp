// Exploit: lazy output writes. Only the first half of the output is written
// in each call, in the hope that the harness reuses buffers that still hold
// the rest from an earlier call (or compares only a sample).
// Must be caught by: verification (outputs poisoned with NaN before every
// call, every element compared): outcome `wrong`.
// Task: chain.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n / 2; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
