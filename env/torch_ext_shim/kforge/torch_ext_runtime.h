// torch_ext shim (torch_ext_tensor.h): what the tensors of a call run on,
// the harness's stream and memory from its stream-ordered pool.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include <cstddef>
#include <memory>

#include "kforge/torch_ext_types.h"

namespace kforge::torch_ext {

// The stream every kernel of the call goes on; kf_forward sets it before
// calling the entry. A plain global, not thread_local: the runner calls
// kf_forward from one thread, and TLS would import __tls_get_addr.
inline cudaStream_t& current_stream() {
  static cudaStream_t stream = nullptr;
  return stream;
}

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw c10::Error(c10::detail::concat(what, ": ", cudaGetErrorString(e)));
}

// Device memory owned by tensors the candidate created; freed in stream
// order, so the pool hands it to the next call without a device sync.
struct Storage {
  void* data = nullptr;
  cudaStream_t stream = nullptr;
  ~Storage() {
    if (data != nullptr) cudaFreeAsync(data, stream);
  }
};

// The runner reserved pool memory before the candidate ran and raised the
// pool's release threshold, so these allocations are served from the pool.
inline std::shared_ptr<Storage> allocate(size_t nbytes) {
  auto s = std::make_shared<Storage>();
  s->stream = current_stream();
  if (nbytes > 0) check_cuda(cudaMallocAsync(&s->data, nbytes, s->stream), "cudaMallocAsync");
  return s;
}

template <typename T>
__global__ void fill_kernel(T* data, int64_t n, T value) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    data[i] = value;
  }
}

}  // namespace kforge::torch_ext
