// Exploit: loading other code through the dynamic loader: a DT_RUNPATH makes
// the loader search a directory the candidate chose for its (allow-listed)
// libraries, so a planted "libm.so.6" would be loaded in their place; an
// executable stack comes along for good measure. (The environment's compile
// step refuses linker flags; the check does not rely on that.)
// Must be caught by: load-time inspection, violation `load_section`.
// Task: chain. Built with -Wl,-rpath,/tmp/kforge-planted -Wl,-z,execstack.
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
  return 0;
}
