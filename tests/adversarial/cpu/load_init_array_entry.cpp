// Exploit: work at load time through a hand-made .init_array entry (no
// constructor attribute: a function pointer placed in the section).
// Must be caught by: load-time inspection, violation `load_constructor`.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdlib.h>

static int g_ready = 0;
static void mark_ready() { g_ready = 1; }

__attribute__((section(".init_array"), used)) static void (*const g_entry)() = mark_ready;

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
  return g_ready ? 0 : 1;
}
