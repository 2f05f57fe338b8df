// Exploit: batch-and-skip across calls. Even calls compute, odd calls replay
// the previous call's result. Verification runs every input twice in a row,
// so the replayed call always matches; timed calls would cost half.
// Must be caught by: every timed call gets fresh inputs and is checked
// against their reference: violation `timed_output_mismatch`.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <string.h>

static float g_last[1 << 16];
static int g_calls = 0;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  if (n > (1 << 16)) return 2;
  if (g_calls++ % 2 == 1) {
    memcpy(o, g_last, (size_t)n * sizeof(float));
    return 0;
  }
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  memcpy(g_last, o, (size_t)n * sizeof(float));
  return 0;
}
