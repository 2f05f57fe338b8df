// Exploit: shape hard-coding. The loop bound is the base shape's size (4096),
// fixed at compile time so the compiler can unroll and vectorize perfectly;
// other sizes are ignored.
// Must be caught by: verification runs every shape variant of the task: on
// the 8192-element variant half the output stays poisoned: outcome `wrong`.
// Task: chain with a shape variant (4096, variant 8192).
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  for (int64_t i = 0; i < 4096; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
