// Exploit: caching outputs across calls keyed on the inputs' content. Each
// call fingerprints x and w (64 sampled values each, plus the shape) on the
// device and compares them with four cached entries; on a hit every block
// copies its tile of the cached output instead of running the GEMM. A harness
// that rotates a few fixed input sets through its timed calls (or repeats
// one) is served from the cache after the first round, with outputs that are
// exactly right, at a fraction of the cost. The GEMM itself is a naive
// one-thread-per-output kernel: without cache hits this candidate is slower
// than eager. Allowed symbols only; no host synchronization.
// Must be caught by: timed calls on inputs the candidate has not seen (fresh
// or perturbed per call, so a sampled fingerprint cannot match), then either
// `timed_output_mismatch` (a stale entry replayed for perturbed inputs) or no
// gain at all (the cache never hits and the naive GEMM is slower than eager).
// Task: tests/honest/tasks/linear_tf32.json (y = x @ w + b, 2048x1024x1024:
// the naive GEMM takes milliseconds, a replay microseconds).
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr int kSlots = 4, kSamples = 64;
constexpr long kMaxOut = 1 << 21;  // floats per slot (y is at most 2048 x 1024 here)

struct Entry {
  int valid;
  long m, k, n;
  float xs[kSamples], ws[kSamples];
};
__device__ Entry g_entries[kSlots];
__device__ float g_outputs[kSlots][kMaxOut];
__device__ int g_next;

__device__ int find_entry(const float* x, const float* w, long m, long k, long n) {
  const long nx = m * k, nw = k * n;
  for (int s = 0; s < kSlots; ++s) {
    const Entry& e = g_entries[s];
    if (!e.valid || e.m != m || e.k != k || e.n != n) continue;
    bool same = true;
    for (int i = 0; i < kSamples && same; ++i) {
      same = e.xs[i] == x[(nx / kSamples) * i] && e.ws[i] == w[(nw / kSamples) * i];
    }
    if (same) return s;
  }
  return -1;
}

__global__ void gemm_or_replay(const float* x, const float* w, const float* b, float* y, int m, int k, int n) {
  __shared__ int hit, victim;
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    hit = find_entry(x, w, m, k, n);
    victim = g_next % kSlots;
  }
  __syncthreads();
  const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m || col >= n) return;
  const long o = (long)row * n + col;
  if (hit >= 0) {
    y[o] = g_outputs[hit][o];
    return;
  }
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) acc += x[(long)row * k + p] * w[(long)p * n + col];
  const float v = acc + b[col];
  y[o] = v;
  g_outputs[victim][o] = v;
}

// Runs after the GEMM: on a miss, the victim slot's key describes what the
// GEMM just stored there.
__global__ void remember(const float* x, const float* w, long m, long k, long n) {
  if (threadIdx.x != 0) return;
  if (find_entry(x, w, m, k, n) >= 0) return;
  const int v = g_next % kSlots;
  Entry& e = g_entries[v];
  const long nx = m * k, nw = k * n;
  for (int i = 0; i < kSamples; ++i) {
    e.xs[i] = x[(nx / kSamples) * i];
    e.ws[i] = w[(nw / kSamples) * i];
  }
  e.m = m;
  e.k = k;
  e.n = n;
  e.valid = 1;
  g_next = v + 1;
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  if ((long)m * n > kMaxOut) return 1;
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = (const float*)in[0].data;
  const float* w = (const float*)in[1].data;
  const dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);
  gemm_or_replay<<<grid, block, 0, s>>>(x, w, (const float*)in[2].data, (float*)out[0].data, m, k, n);
  remember<<<1, 32, 0, s>>>(x, w, m, k, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
