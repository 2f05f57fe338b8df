// Exploit: mutating inputs. The kernel uses input z as scratch space (writes
// the result there too, saving a buffer), which would corrupt the harness's
// next use of the inputs and can hide a later cheat.
// Must be caught by: the bitwise input check after every call: violation
// `input_mutation`.
// Task: chain.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  float* z = (float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) {
    z[i] = x[i] * y[i] + z[i];
    o[i] = z[i] > 0.f ? z[i] : 0.f;
  }
  return 0;
}
