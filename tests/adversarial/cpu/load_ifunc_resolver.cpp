// Exploit: work at load time through an IFUNC resolver: the loader calls it
// while relocating the object (before any constructor), so it runs unchecked
// like a constructor does, but is not listed in .init_array.
// Must be caught by: load-time inspection, violation `load_constructor`
// ("IFUNC resolver").
// Task: chain.
#include <kforge/kernel_abi.h>

static int g_ready = 0;

extern "C" int chain_impl(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  return g_ready ? 0 : 1;
}

extern "C" void* resolve_kf_forward() {
  g_ready = 1;  // work done while the object is relocated
  return (void*)chain_impl;
}

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) __attribute__((ifunc("resolve_kf_forward")));
