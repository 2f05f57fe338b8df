// Exploit: detecting warm-up vs timed phases by counting calls. Verification
// makes 2 calls per seed and shape (10 with 5 seeds on one shape); from the
// 11th call on the candidate assumes it is being timed and writes zeros.
// Must be caught by: warm-up and timed calls are checked like verification
// calls, against the reference of their fresh inputs: violation
// `timed_output_mismatch`.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <string.h>

static int g_calls = 0;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  if (++g_calls > 10) {
    memset(o, 0, (size_t)n * sizeof(float));
    return 0;
  }
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
