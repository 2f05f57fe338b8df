// The runner's allocation guard as the dynamic loader binds it
// (runner/cuda_allocation_guard.h), on any machine with the CUDA toolkit: this
// test executable defines and exports the guard's entry points exactly as
// kforge-runner does (the same exports.list), and loads a candidate built by
// nvcc that calls the CUDA runtime. The candidate's references reach the
// guard, not libcudart: its kernels' registrations are recorded and an
// allocation past the allowance is refused with cudaErrorMemoryAllocation,
// which libcudart itself never answers without a GPU (here it has none, or
// the runtime answers for a real one). What the driver then does with
// admitted allocations is the GPU tests' (tests/cuda/cuda_lane_memory_test.cpp).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kforge/core/process.h"
#include "runner/cuda_allocation_guard.h"

namespace kforge::runner {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCandidate = R"(
#include <cuda_runtime.h>
__global__ void big_frame(float* out, int k) {
  volatile float buf[4096];
  buf[k] = 1.f;
  out[0] = buf[(k * 7) % 4096];
}
extern "C" int try_allocate(size_t bytes, void** p) { return (int)cudaMallocAsync(p, bytes, 0); }
extern "C" int try_free(void* p) { return (int)cudaFreeAsync(p, 0); }
)";

fs::path build_candidate() {
  const fs::path dir = fs::path(KFORGE_BINARY_DIR) / "tests" / "runner" / "allocation_guard";
  fs::create_directories(dir);
  std::ofstream(dir / "candidate.cu") << kCandidate;
  const fs::path so = dir / "candidate.so";
  ProcessOptions options;
  options.output_file = dir / "log";
  const ProcessResult r = run_process({KFORGE_NVCC, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o",
                                       so.string(), (dir / "candidate.cu").string()},
                                      options);
  if (!r.ok()) ADD_FAILURE() << "nvcc failed; see " << (dir / "log");
  return so;
}

TEST(AllocationGuard, ACandidatesCudaCallsReachTheGuardBeforeTheRuntime) {
  ASSERT_EQ(allocation_guard::install(), "") << "libcudart's own definitions are found behind ours";
  const fs::path so = build_candidate();
  DeviceAllowance allowance(uint64_t{1} << 20);  // 1 MiB, no reservations
  allocation_guard::arm(std::move(allowance));

  void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  // Its static constructor registered the kernel through the guard.
  const auto kernels = allocation_guard::registered_kernels();
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_NE(kernels[0].name.find("big_frame"), std::string::npos) << kernels[0].name;
  EXPECT_NE(kernels[0].host_stub, nullptr);

  using Allocate = int (*)(size_t, void**);
  auto try_allocate = reinterpret_cast<Allocate>(::dlsym(handle, "try_allocate"));
  ASSERT_NE(try_allocate, nullptr);
  // Past the allowance: refused by the guard, with the figures, before the runtime.
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(try_allocate(size_t{2} << 20, &p), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  const std::string refusal = allocation_guard::take_refusal();
  EXPECT_EQ(refusal.rfind("cudaMallocAsync of 2 MiB refused with cudaErrorMemoryAllocation (out of memory): the "
                          "candidate's device memory would reach 2 MiB (0 bytes allocated now), and it may use 1 MiB",
                          0),
            0u)
      << refusal;
  EXPECT_EQ(allocation_guard::take_refusal(), "") << "taken once";
  // Within it: passed on to the runtime, which answers for itself (no GPU
  // here: not the guard's out-of-memory, and nothing refused).
  p = nullptr;
  const int within = try_allocate(4096, &p);
  EXPECT_NE(within, cudaErrorMemoryAllocation);
  EXPECT_EQ(allocation_guard::take_refusal(), "");
  if (within == cudaSuccess) {
    using Free = int (*)(void*);
    auto try_free = reinterpret_cast<Free>(::dlsym(handle, "try_free"));
    ASSERT_NE(try_free, nullptr);
    EXPECT_EQ(try_free(p), cudaSuccess);
  }
  ::dlclose(handle);
}

}  // namespace
}  // namespace kforge::runner
