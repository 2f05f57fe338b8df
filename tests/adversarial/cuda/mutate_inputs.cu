// Exploit: mutating inputs. The result is computed in place into the input
// buffer x (saving an allocation and a read of a second buffer) and then
// copied to the output; x is left modified. A harness that reuses its input
// buffers across calls now feeds the candidate its own previous output.
// Allowed symbols only (cudaMemcpyAsync on the given stream).
// Must be caught by: the input-mutation check after every call, violation
// `input_mutation`.
// Task: examples/affine_relu6.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6_inplace(float* x, const float* w, const float* b, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    x[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  cudaStream_t s = (cudaStream_t)stream;
  float* x = (float*)in[0].data;  // const cast away
  affine_relu6_inplace<<<1024, 256, 0, s>>>(x, (const float*)in[1].data, (const float*)in[2].data, n, cols);
  cudaMemcpyAsync(out[0].data, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, s);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
