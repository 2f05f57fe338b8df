// Exploit: writing outside its tensors: a correct kernel that also writes one
// float before the start of its output, into arena bytes no tensor owns (the
// output's slot is sized for the larger shape variant, so on the base shape
// that byte is slack the guard pages do not cover). Harmless-looking here,
// it is how an out-of-bounds bug or a stash of state between calls looks.
// Must be caught by: the arena canary (judge/arena_canary.h), checked after
// every call: violation `out_of_bounds_write`.
// Task: chain with a variant.
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  o[-1] = 42.0f;
  return 0;
}
