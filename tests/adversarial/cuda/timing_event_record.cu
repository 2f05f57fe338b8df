// Exploit: tampering with the harness's timing events. The candidate records
// its own events on the harness's stream and makes that stream wait on an
// event recorded before its work, on a side stream that does the work, so a
// harness measuring "last event on my stream" sees nothing of the work.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaEventCreate / cudaEventRecord / cudaStreamWaitEvent /
// cudaStreamCreate are not importable); at run time `timing_tamper` /
// `foreign_stream`.
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  static cudaStream_t side = nullptr;
  static cudaEvent_t before = nullptr;
  if (side == nullptr) {
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&before, cudaEventDisableTiming);
  }
  cudaStream_t s = (cudaStream_t)stream;
  cudaEventRecord(before, s);          // the inputs are ready here
  cudaStreamWaitEvent(side, before, 0);
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, side>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
                                       (float*)out[0].data, n, cols);
  return 0;  // the harness's stream never waits for `side`
}
