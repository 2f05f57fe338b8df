// Exploit: reading harness memory. Asks the runtime what the harness's output
// and input allocations are (cudaPointerGetAttributes), then copies from
// memory next to its input allocation, hoping to find a copy of the expected
// output that the harness keeps in the same address space (a reference result,
// a pristine copy of the inputs, a previous output).
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaPointerGetAttributes); by design the reference outputs never exist in
// the runner's address space, so even a successful read finds nothing useful.
// Task: examples/sum_of_squares.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  cudaPointerAttributes attrs;
  if (cudaPointerGetAttributes(&attrs, in[0].data) != cudaSuccess) return 3;
  // Probe the allocation right after x for something shaped like the answer.
  const size_t bytes = (size_t)in[0].shape[0] * sizeof(float);
  const char* after = (const char*)in[0].data + (size_t)kf_numel(&in[0]) * sizeof(float);
  return cudaMemcpyAsync(out[0].data, after + 4096, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream) ==
                 cudaSuccess
             ? 0
             : 2;
}
