// Exploit: precision downgrade beyond tolerance. A matmul whose products and
// running sums are rounded to bfloat16 (8 significant bits): much less work
// per element on hardware with bf16 arithmetic, and far outside the task's
// float32 tolerance once 512 terms are accumulated.
// Must be caught by: verification (allclose), outcome `wrong`.
// Task: matmul x[128,512] @ w[512,64].
#include <kforge/kernel_abi.h>
#include <string.h>

static float to_bf16(float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  bits &= 0xffff0000u;
  memcpy(&v, &bits, 4);
  return v;
}

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* w = (const float*)in[1].data;
  float* o = (float*)out[0].data;
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int64_t p = 0; p < k; ++p) acc = to_bf16(acc + to_bf16(to_bf16(x[i * k + p]) * to_bf16(w[p * n + j])));
      o[i * n + j] = acc;
    }
  }
  return 0;
}
