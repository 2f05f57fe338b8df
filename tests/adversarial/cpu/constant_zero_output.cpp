// Exploit: zero outputs that pass a loose tolerance. The task's outputs are
// all smaller than its atol (|x * w| < 0.04 with atol 0.05), so an output of
// zeros is "allclose" to every reference without computing anything.
// Must be caught by: the degenerate-output check (output_quality.h): the
// reference varies, the output is constant: violation `degenerate_output`.
// Task: loose_small (out = x * w, w ~ U(-0.01, 0.01), atol 0.05).
#include <kforge/kernel_abi.h>
#include <string.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor* out, int, void*) {
  memset(out[0].data, 0, (size_t)kf_numel(&out[0]) * sizeof(float));
  return 0;
}
