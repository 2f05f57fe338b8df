// Exploit: work that runs after the call returns, on a CUDA-owned host thread.
// cudaLaunchHostFunc enqueues a host callback on the harness's stream; the
// callback (run later by the driver's callback thread) computes the output on
// the host from a host copy of x taken during the call and writes it into a
// result the next call publishes: work outside the timed call that a kernel
// trace never shows.
// Must be caught by: the load-time allow-list, violation `forbidden_symbol`
// (cudaLaunchHostFunc is not importable); at run time the output of each call
// would be the previous call's (verification failure / `stale_output`).
// Task: examples/sum_of_squares.
#include <cuda_runtime.h>
#include <kforge/kernel_abi.h>

#include <vector>

static std::vector<float> g_x, g_y;

static void CUDART_CB compute_on_host(void*) {
  const size_t rows = g_y.size(), cols = rows ? g_x.size() / rows : 0;
  for (size_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (size_t c = 0; c < cols; ++c) acc += g_x[r * cols + c] * g_x[r * cols + c];
    g_y[r] = acc;
  }
}

extern "C" int kf_forward(const kf_tensor* in, int ni, kf_tensor* out, int no, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  const size_t rows = (size_t)in[0].shape[0], cols = (size_t)in[0].shape[1];
  if (g_y.size() == rows) {
    // Publish what the callback of the previous call computed.
    cudaMemcpyAsync(out[0].data, g_y.data(), rows * sizeof(float), cudaMemcpyHostToDevice, s);
  }
  g_x.resize(rows * cols);
  g_y.resize(rows);
  cudaMemcpyAsync(g_x.data(), in[0].data, rows * cols * sizeof(float), cudaMemcpyDeviceToHost, s);
  return cudaLaunchHostFunc(s, compute_on_host, nullptr) == cudaSuccess ? 0 : 2;
}
