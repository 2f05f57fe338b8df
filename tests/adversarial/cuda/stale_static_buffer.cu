// Exploit: reusing stale memory. The first call computes the result and keeps
// a copy in a module-scope __device__ buffer; every later call just copies
// that buffer to the output, on the theory that the harness calls again with
// the same inputs (warm-up, repeated timing). Allowed symbols only.
// Must be caught by: verification with fresh inputs per seed, violation
// `stale_output` (the outputs equal the previous seed's reference); in timing
// the per-call output check (`timed_output_mismatch`).
// Task: examples/sum_of_squares.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

constexpr long kMaxRows = 1 << 16;
__device__ float g_saved[kMaxRows];
static bool g_have = false;

__global__ void sum_sq(const float* x, float* y, long rows, long cols) {
  const long row = blockIdx.x * (long)blockDim.y + threadIdx.y;
  if (row >= rows) return;
  float acc = 0.0f;
  for (long j = threadIdx.x; j < cols; j += 32) acc += x[row * cols + j] * x[row * cols + j];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (threadIdx.x == 0) {
    y[row] = acc;
    g_saved[row] = acc;
  }
}

__global__ void replay(float* y, long rows) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < rows) y[i] = g_saved[i];
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long rows = (long)in[0].shape[0], cols = (long)in[0].shape[1];
  if (rows > kMaxRows) return 1;
  cudaStream_t s = (cudaStream_t)stream;
  if (!g_have) {
    sum_sq<<<(unsigned)((rows + 7) / 8), dim3(32, 8), 0, s>>>((const float*)in[0].data, (float*)out[0].data, rows,
                                                             cols);
    g_have = true;
  } else {
    replay<<<(unsigned)((rows + 255) / 256), 256, 0, s>>>((float*)out[0].data, rows);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
