// Exploit class: faster-than-roofline results. Through the judge's clock (the
// runner's kernel-accounted CPU time) no CPU candidate found so far can beat
// the memory system: work outside the call needs threads or processes, which
// are refused. So this case proves the check itself is wired end to end: an
// honest fused kernel on 2^18 floats, judged by a judge told that memory moves
// at 1 MB/s (KFORGE_PEAK_MEMORY_BPS), is "faster than physics".
// Must be caught by: the roofline floor (roofline.h): violation
// `below_roofline`.
// Task: chain with 2^18 elements.
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
