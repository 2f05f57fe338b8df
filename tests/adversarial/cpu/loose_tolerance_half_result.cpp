// Exploit: a result that is only roughly right, exploiting atol: half of the
// true value everywhere (e.g. a dropped term, or a crude approximation) is
// within atol of every reference value when outputs are small.
// Must be caught by: the relative-L2 bound (output_quality.h): error 0.5
// against a bound of 0.05: verification fails (`wrong`, check
// relative_error).
// Task: loose_small.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* w = (const float*)in[1].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) o[i] = 0.5f * x[i] * w[i];
  return 0;
}
