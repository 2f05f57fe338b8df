// kforge_kernel_timer TASK.json CANDIDATE.so [CALLS] [read|memset]: calls a
// candidate's kf_forward CALLS times (default 30) on device buffers shaped for
// the task's base shape, each call after an L2 flush of 2x the device's L2
// (the harness's read flush by default, or a memset that leaves the L2 dirty)
// and timed with CUDA events on its own stream, and prints {"calls", "flush",
// "event_median_ms"}.
//
// It exists for bench_cuda's agreement check: Nsight Compute profiles this
// process (a plain one, without the judge, the runner or their sandbox) and
// its gpu__time_duration of the candidate's kernels is compared with what the
// harness measured. Inputs hold small pseudo-random floats (the timing of the
// kernels benchmarked does not depend on the values).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_timing/read_flush.h"
#include "kforge/core/op_registry.h"
#include "kforge/core/task_spec.h"
#include "kforge/kernel_abi.h"

namespace {

using Forward = int (*)(const kf_tensor*, int, kf_tensor*, int, void*);

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kforge_kernel_timer: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

kf_tensor make_tensor(const std::vector<int64_t>& shape, kforge::DType dtype, bool fill, uint32_t* rng) {
  kf_tensor t{};
  t.dtype = static_cast<int32_t>(dtype);
  t.ndim = static_cast<int32_t>(shape.size());
  int64_t n = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    t.shape[i] = shape[i];
    t.stride[i] = n;
    n *= shape[i];
  }
  size_t bytes = static_cast<size_t>(n) * kforge::dtype_size(dtype);
  check(cudaMalloc(&t.data, std::max<size_t>(bytes, 1)), "cudaMalloc");
  if (fill && dtype == kforge::DType::kFloat32) {
    std::vector<float> host(static_cast<size_t>(n));
    for (auto& v : host) {
      *rng = *rng * 1664525u + 1013904223u;
      v = static_cast<float>(*rng >> 8) / static_cast<float>(1u << 24) - 0.5f;
    }
    check(cudaMemcpy(t.data, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  } else {
    check(cudaMemset(t.data, 0, bytes), "cudaMemset");
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kforge_kernel_timer TASK.json CANDIDATE.so [CALLS] [read|memset]\n");
    return 2;
  }
  const int calls = argc > 3 ? std::atoi(argv[3]) : 30;
  const std::string flush_kind = argc > 4 ? argv[4] : "read";
  if (flush_kind != "read" && flush_kind != "memset") {
    std::fprintf(stderr, "kforge_kernel_timer: the flush is 'read' or 'memset', not '%s'\n", flush_kind.c_str());
    return 2;
  }
  kforge::TaskSpec task = kforge::load_task(argv[1]);
  void* lib = ::dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "kforge_kernel_timer: %s\n", ::dlerror());
    return 1;
  }
  auto forward = reinterpret_cast<Forward>(::dlsym(lib, "kf_forward"));
  if (forward == nullptr) return 1;

  uint32_t rng = 12345;
  std::vector<kf_tensor> inputs, outputs;
  for (const auto& spec : task.kernel_inputs()) inputs.push_back(make_tensor(spec.shape, spec.dtype, true, &rng));
  for (const auto& type : kforge::infer_outputs(task))
    outputs.push_back(make_tensor(type.shape, type.dtype, false, &rng));

  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  size_t flush_bytes = 2 * static_cast<size_t>(l2 > 0 ? l2 : 64 << 20);
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc (flush)");
  kforge::cuda_timing::ReadFlush read_flush(flush_bytes);
  if (flush_kind == "read" && !read_flush.reads()) {
    std::fprintf(stderr, "kforge_kernel_timer: %s\n", read_flush.method().c_str());
    return 1;
  }
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");

  std::vector<float> ms;
  for (int i = 0; i < calls; ++i) {
    if (flush_kind == "read") {
      check(read_flush.run(stream), "L2 flush");
    } else {
      check(cudaMemsetAsync(flush, i & 0xff, flush_bytes, stream), "L2 flush");
    }
    check(cudaStreamSynchronize(stream), "L2 flush");
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    int rc = forward(inputs.data(), static_cast<int>(inputs.size()), outputs.data(), static_cast<int>(outputs.size()),
                     stream);
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaStreamSynchronize(stream), "kf_forward");
    if (rc != 0) {
      std::fprintf(stderr, "kforge_kernel_timer: kf_forward returned %d\n", rc);
      return 1;
    }
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("{\"calls\": %d, \"flush\": \"%s\", \"event_median_ms\": %.6f}\n", calls, flush_kind.c_str(),
              ms.empty() ? 0.0 : ms[ms.size() / 2]);
  return 0;
}
