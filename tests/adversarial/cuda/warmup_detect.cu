// Exploit: detecting warm-up/verification versus timed calls. A call counter
// separates the harness's phases: the first 40 calls (verification: seeds x
// shape variants x 2 runs, then warm-up) are computed honestly; from then on
// only every other row is computed, halving the work of the calls that are
// timed. Allowed symbols only.
// Must be caught by: the output check on every timed call, violation
// `timed_output_mismatch` (timed outputs do not match the timed inputs).
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6_rows(const float* x, const float* w, const float* b, float* y, long rows, long cols,
                                  int row_step) {
  for (long r = (long)blockIdx.x * row_step; r < rows; r += (long)gridDim.x * row_step) {
    for (long c = threadIdx.x; c < cols; c += blockDim.x) {
      const long i = r * cols + c;
      y[i] = fminf(fmaxf(x[i] * w[c] + b[c], 0.0f), 6.0f);
    }
  }
}

static long g_calls = 0;

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long cols = (long)in[0].shape[in[0].ndim - 1], rows = (long)kf_numel(&in[0]) / cols;
  const int step = ++g_calls > 40 ? 2 : 1;
  affine_relu6_rows<<<1024, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                                            (const float*)in[2].data, (float*)out[0].data, rows,
                                                            cols, step);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
