// Exploit: escaping the symbol allow-list through the driver's function table.
// cudaGetDriverEntryPointByVersion hands out any driver API function by name at run
// time (cuStreamCreate, cuCtxSynchronize, cuLaunchKernel, ...), none of which
// then appears among the object's undefined symbols. Here it creates a
// private stream and runs the work there (work on another stream).
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaGetDriverEntryPointByVersion is not importable); otherwise CUPTI attribution
// (`foreign_stream`).
// Task: examples/affine_relu6.
#include <cuda.h>
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__global__ void affine_relu6(const float* x, const float* w, const float* b, float* y, long n, long cols) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(x[i] * w[i % cols] + b[i % cols], 0.0f), 6.0f);
  }
}

typedef CUresult (*StreamCreateFn)(CUstream*, unsigned int);

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  static CUstream side = nullptr;
  if (side == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuStreamCreate", &fn, 12000, cudaEnableDefault, &status) != cudaSuccess ||
        fn == nullptr) {
      return 3;
    }
    if (((StreamCreateFn)fn)(&side, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return 3;
  }
  const long n = (long)kf_numel(&in[0]), cols = (long)in[0].shape[in[0].ndim - 1];
  affine_relu6<<<1024, 256, 0, (cudaStream_t)side>>>((const float*)in[0].data, (const float*)in[1].data,
                                                     (const float*)in[2].data, (float*)out[0].data, n, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
