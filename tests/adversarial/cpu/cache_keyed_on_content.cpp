// Exploit: caching outputs across calls keyed on (sampled) input contents.
// The matmul is computed naively (slowly); its result is remembered together
// with the first 64 values of each input, and an input that starts the same
// gets the remembered result: a memcpy instead of a matmul. Against a harness
// that rotates a few fixed input sets through its timed calls, every timed
// call after the first round is a hit, exactly right, and "20x faster".
// Must be caught by: fresh inputs for every timed call (timing_inputs.h): the
// cache never hits while timed, so the candidate is measured doing its slow
// matmul: correct, with no speedup (the no-gain outcome). A collision would
// return another input's result: `stale_output` / `timed_output_mismatch`.
// Task: matmul x[128,512] @ w[512,64].
#include <kforge/kernel_abi.h>
#include <string.h>

static const int kSample = 64;
struct Entry {
  float x[kSample], w[kSample];
  float result[128 * 64];
};
static Entry g_cache[16];
static int g_entries = 0, g_next = 0;

extern "C" int kf_forward(const kf_tensor* in, int, kf_tensor* out, int, void*) {
  const float* x = (const float*)in[0].data;
  const float* w = (const float*)in[1].data;
  float* o = (float*)out[0].data;
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  if (m * n > 128 * 64) return 2;
  for (int e = 0; e < g_entries; ++e) {
    if (memcmp(g_cache[e].x, x, sizeof(g_cache[e].x)) == 0 && memcmp(g_cache[e].w, w, sizeof(g_cache[e].w)) == 0) {
      memcpy(o, g_cache[e].result, (size_t)(m * n) * sizeof(float));
      return 0;
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * w[p * n + j];
      o[i * n + j] = acc;
    }
  }
  Entry& slot = g_cache[g_next];
  g_next = (g_next + 1) % 16;
  if (g_entries < 16) ++g_entries;
  memcpy(slot.x, x, sizeof(slot.x));
  memcpy(slot.w, w, sizeof(slot.w));
  memcpy(slot.result, o, (size_t)(m * n) * sizeof(float));
  return 0;
}
