// Exploit: a near-constant output that passes a loose tolerance: zeros plus a
// faint trace of one input (a millionth of x), so that the output is not exactly
// constant and a check for "all values equal" would pass.
// Must be caught by: the degenerate-output check, which compares spreads
// (standard deviation below 1% of the reference's): violation
// `degenerate_output`.
// Task: loose_small.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) o[i] = 1e-6f * x[i];
  return 0;
}
