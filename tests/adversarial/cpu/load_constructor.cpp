// Exploit: work at load time. A constructor runs while dlopen() loads the
// object: outside every timed and checked call, under the looser loading
// filter (read-only opens, executable mappings). Here it precomputes a table
// and probes for files; anything done there is never measured.
// Must be caught by: load-time inspection, violation `load_constructor`.
// Task: chain.
#include <kforge/kernel_abi.h>

static float g_table[4096];

__attribute__((constructor)) static void precompute_at_load() {
  for (int i = 0; i < 4096; ++i) g_table[i] = (float)i * 0.5f;
}

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i] + g_table[0];
    o[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
