// Exploit: faster than the roofline allows. Row sums of squares must read all
// of x (32 MiB for the base shape); this candidate reads 64 sampled values,
// and when they match one of four cached inputs it replays the cached row
// sums (16 KiB) in a single small kernel, otherwise it computes them with a
// naive one-thread-per-row kernel (slower than eager) and caches them. Repeated timed inputs are then "processed" far faster than
// DRAM bandwidth permits, with exactly right outputs. Allowed symbols only.
// Must be caught by: the roofline floor, violation `below_roofline` (time
// below bytes-that-must-move / peak bandwidth); with fresh timed inputs the
// cache never hits and the naive kernel gains nothing
// (`timed_output_mismatch` if perturbed inputs are replayed).
// Task: examples/sum_of_squares.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr int kSlots = 4, kSamples = 64;
constexpr long kMaxRows = 1 << 16;

struct Entry {
  int valid;
  long rows, cols;
  float xs[kSamples];
};
__device__ Entry g_entries[kSlots];
__device__ float g_rows[kSlots][kMaxRows];
__device__ int g_next;

__device__ int find_entry(const float* x, long rows, long cols) {
  const long nx = rows * cols;
  for (int s = 0; s < kSlots; ++s) {
    const Entry& e = g_entries[s];
    if (!e.valid || e.rows != rows || e.cols != cols) continue;
    bool same = true;
    for (int i = 0; i < kSamples && same; ++i) same = e.xs[i] == x[(nx / kSamples) * i];
    if (same) return s;
  }
  return -1;
}

// One thread per row: a naive kernel (uncoalesced reads), because the cache,
// not the kernel, is where this candidate expects its speed to come from.
__global__ void sum_sq_or_replay(const float* x, float* y, long rows, long cols) {
  __shared__ int hit, victim;
  if (threadIdx.x == 0) {
    hit = find_entry(x, rows, cols);
    victim = g_next % kSlots;
  }
  __syncthreads();
  const long row = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (row >= rows) return;
  if (hit >= 0) {
    y[row] = g_rows[hit][row];
    return;
  }
  float acc = 0.0f;
  for (long j = 0; j < cols; ++j) acc += x[row * cols + j] * x[row * cols + j];
  y[row] = acc;
  g_rows[victim][row] = acc;
}

__global__ void remember(const float* x, long rows, long cols) {
  if (threadIdx.x != 0 || find_entry(x, rows, cols) >= 0) return;
  const int v = g_next % kSlots;
  Entry& e = g_entries[v];
  const long nx = rows * cols;
  for (int i = 0; i < kSamples; ++i) e.xs[i] = x[(nx / kSamples) * i];
  e.rows = rows;
  e.cols = cols;
  e.valid = 1;
  g_next = v + 1;
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long rows = (long)in[0].shape[0], cols = (long)in[0].shape[1];
  if (rows > kMaxRows) return 1;
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = (const float*)in[0].data;
  sum_sq_or_replay<<<(unsigned)((rows + 127) / 128), 128, 0, s>>>(x, (float*)out[0].data, rows, cols);
  remember<<<1, 32, 0, s>>>(x, rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
