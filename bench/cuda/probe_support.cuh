// What the standalone CUDA probes (start_probe.cu, teardown_probe.cu) share:
// a clock, a kernel that reads and writes a buffer (and its event-timed
// launch), a check that exits on a CUDA error, and a percentile. Header-only:
// each probe is one nvcc call.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define PROBE_CHECK(x)                                              \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                 \
    }                                                               \
  } while (0)

namespace probe {

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Reads and writes every float of x: memory-bound, ~40-60 us for 64 MiB on an H100.
__global__ void touch(float* x, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    x[i] = x[i] * 1.0001f + 1.0f;
}

// Milliseconds of one touch of x (n floats) on stream s, between events a and b.
inline double time_touch(float* x, long n, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
  PROBE_CHECK(cudaEventRecord(a, s));
  touch<<<1056, 256, 0, s>>>(x, n);
  PROBE_CHECK(cudaEventRecord(b, s));
  PROBE_CHECK(cudaEventSynchronize(b));
  float f;
  PROBE_CHECK(cudaEventElapsedTime(&f, a, b));
  return f;
}

// The p-th fraction's value of v (0: the least, 0.5: the median, 1: the largest); 0 if empty.
inline double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace probe
