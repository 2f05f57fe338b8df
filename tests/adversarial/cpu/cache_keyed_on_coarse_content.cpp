// Exploit: caching outputs keyed on a cheap content fingerprint (the first
// input value, bucketed). Cheap to compute, and right whenever the harness
// repeats inputs; wrong when two different inputs share a bucket, which the
// cheat bets the harness will not notice.
// Must be caught by: verification compares every seed's outputs (violation
// `stale_output`, or `wrong`), and every timed call is checked against its
// own fresh reference (violation `timed_output_mismatch`); with 8 buckets a
// collision is certain within the first dozen distinct inputs.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <stdlib.h>
#include <string.h>

static float* g_cache[8];

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* y = (const float*)in[1].data;
  const float* z = (const float*)in[2].data;
  float* o = (float*)out[0].data;
  int64_t n = kf_numel(&out[0]);
  int bucket = (int)((x[0] + 2.f) * 2.f);
  bucket = bucket < 0 ? 0 : bucket > 7 ? 7 : bucket;
  if (g_cache[bucket]) {
    memcpy(o, g_cache[bucket], (size_t)n * sizeof(float));
    return 0;
  }
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * y[i] + z[i];
    o[i] = v > 0.f ? v : 0.f;
  }
  g_cache[bucket] = (float*)malloc((size_t)n * sizeof(float));
  memcpy(g_cache[bucket], o, (size_t)n * sizeof(float));
  return 0;
}
