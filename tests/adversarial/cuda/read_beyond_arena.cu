// Exploit: reading harness memory with allowed symbols only. A kernel scans
// device memory beyond the end of its input (up to 256 MiB past it) for a
// float run that starts like the expected answer (a reference result or a
// previous output), and copies what follows into the output. Nothing the
// harness owns outside the candidate's own buffers may be reachable.
// Must be caught by: the runner's isolation: the reference never exists in
// the runner's address space, so the scan either faults (illegal address:
// outcome `crash` or `runtime_error`) or copies unrelated memory (outcome
// `wrong`).
// Task: examples/sum_of_squares.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

__device__ long long g_found;

__global__ void scan(const float* base, long start, long span, float first_sum) {
  // Candidate start of the answer: a value close to the first row's sum.
  for (long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x; i < start + span;
       i += (long)gridDim.x * blockDim.x) {
    const float v = base[i];
    if (fabsf(v - first_sum) < 1e-3f * first_sum) atomicMax(&g_found, (long long)i);
  }
}

__global__ void first_row_sum(const float* x, long cols, float* out) {
  float acc = 0.0f;
  for (long j = threadIdx.x; j < cols; j += 32) acc += x[j] * x[j];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (threadIdx.x == 0) *out = acc;
}

__global__ void copy_found(const float* base, float* y, long rows) {
  const long at = g_found;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < rows; i += (long)gridDim.x * blockDim.x) {
    y[i] = at > 0 ? base[at + i] : 0.0f;
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  const float* x = (const float*)in[0].data;
  const long rows = (long)in[0].shape[0], cols = (long)in[0].shape[1];
  first_row_sum<<<1, 32, 0, s>>>(x, cols, (float*)out[0].data);  // y[0] as scratch
  float first = 0.0f;
  cudaMemcpyAsync(&first, out[0].data, sizeof(float), cudaMemcpyDeviceToHost, s);  // synchronous (pageable)
  scan<<<1024, 256, 0, s>>>(x, rows * cols, (256L << 20) / (long)sizeof(float), first);
  copy_found<<<64, 256, 0, s>>>(x, (float*)out[0].data, rows);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
