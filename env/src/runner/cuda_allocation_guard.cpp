#include "runner/cuda_allocation_guard.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>
#include <utility>

namespace kforge::runner::allocation_guard {
namespace {

using MallocAsyncFn = cudaError_t (*)(void**, size_t, cudaStream_t);
using FreeAsyncFn = cudaError_t (*)(void*, cudaStream_t);
using MallocFn = cudaError_t (*)(void**, size_t);
using FreeFn = cudaError_t (*)(void*);
using RegisterFunctionFn = void (*)(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*);

constexpr size_t kMaxKernelNameBytes = 256;

// The runtime's own definitions, behind ours in the lookup order.
struct Runtime {
  MallocAsyncFn malloc_async = nullptr;
  FreeAsyncFn free_async = nullptr;
  MallocFn malloc = nullptr;
  FreeFn free = nullptr;
  RegisterFunctionFn register_function = nullptr;
};

template <typename Fn>
Fn next_definition(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

// Resolved on first use as well as by install(): the runtime may be called
// before main (static constructors of the libraries the runner links).
Runtime& runtime() {
  static Runtime r = [] {
    Runtime found;
    found.malloc_async = next_definition<MallocAsyncFn>("cudaMallocAsync");
    found.free_async = next_definition<FreeAsyncFn>("cudaFreeAsync");
    found.malloc = next_definition<MallocFn>("cudaMalloc");
    found.free = next_definition<FreeFn>("cudaFree");
    found.register_function = next_definition<RegisterFunctionFn>("__cudaRegisterFunction");
    return found;
  }();
  return r;
}

struct State {
  std::mutex mutex;
  bool armed = false;
  DeviceAllowance allowance;
  std::string refusal;
  std::vector<RegisteredKernel> kernels;
};

State& state() {
  static State s;
  return s;
}

// One allocation through the guard. Under the lock for the real call too,
// so that the count is exact; the candidate has one thread.
template <typename PoolOf, typename Call>
cudaError_t guarded_allocation(const char* name, void** ptr, size_t bytes, PoolOf which_pool, Call call) {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!s.armed) {
    lock.unlock();
    return call();
  }
  const DeviceAllowance::Pool pool = which_pool();
  if (!s.allowance.admits(pool, bytes)) {
    if (s.refusal.empty()) s.refusal = s.allowance.refusal(name, pool, bytes);
    if (ptr != nullptr) *ptr = nullptr;
    return cudaErrorMemoryAllocation;
  }
  const cudaError_t e = call();
  if (e == cudaSuccess && ptr != nullptr && *ptr != nullptr) s.allowance.allocated(*ptr, pool, bytes);
  return e;
}

void note_free(const void* ptr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.armed) s.allowance.freed(ptr);
}

// Captured allocations become graph memory (device_allowance.h).
DeviceAllowance::Pool pool_of(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive) {
    return DeviceAllowance::Pool::kGraph;
  }
  return DeviceAllowance::Pool::kStream;
}

}  // namespace

std::string install() {
  const Runtime& r = runtime();
  if (r.malloc_async == nullptr || r.free_async == nullptr || r.malloc == nullptr || r.free == nullptr ||
      r.register_function == nullptr) {
    return "the CUDA runtime's allocation entry points were not found behind the runner's (dlsym RTLD_NEXT)";
  }
  return "";
}

void arm(DeviceAllowance allowance) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allowance = std::move(allowance);
  s.refusal.clear();
  s.kernels.clear();
  s.armed = true;
}

void set_local_memory(DeviceAllowance::LocalMemory local) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allowance.set_local_memory(std::move(local));
}

std::string local_memory_problem() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.allowance.local_memory_problem();
}

std::vector<RegisteredKernel> registered_kernels() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.kernels;
}

std::string take_refusal() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return std::exchange(s.refusal, std::string());
}

}  // namespace kforge::runner::allocation_guard

namespace guard = kforge::runner::allocation_guard;

// The definitions the candidate's references bind to (cuda_allocation_guard.h).
extern "C" {

cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  const auto real = guard::runtime().malloc_async;
  if (real == nullptr) return cudaErrorInitializationError;
  return guard::guarded_allocation(
      "cudaMallocAsync", ptr, size, [&] { return guard::pool_of(stream); }, [&] { return real(ptr, size, stream); });
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  const auto real = guard::runtime().free_async;
  if (real == nullptr) return cudaErrorInitializationError;
  const cudaError_t e = real(ptr, stream);
  if (e == cudaSuccess) guard::note_free(ptr);
  return e;
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  const auto real = guard::runtime().malloc;
  if (real == nullptr) return cudaErrorInitializationError;
  return guard::guarded_allocation(
      "cudaMalloc", ptr, size, [] { return kforge::runner::DeviceAllowance::Pool::kStream; },
      [&] { return real(ptr, size); });
}

cudaError_t cudaFree(void* ptr) {
  const auto real = guard::runtime().free;
  if (real == nullptr) return cudaErrorInitializationError;
  const cudaError_t e = real(ptr);
  if (e == cudaSuccess && ptr != nullptr) guard::note_free(ptr);
  return e;
}

void __cudaRegisterFunction(void** fat_cubin_handle, const char* host_fun, char* device_fun, const char* device_name,
                            int thread_limit, uint3* tid, uint3* bid, dim3* block_dim, dim3* grid_dim, int* warp_size) {
  guard::runtime().register_function(fat_cubin_handle, host_fun, device_fun, device_name, thread_limit, tid, bid,
                                     block_dim, grid_dim, warp_size);
  guard::State& s = guard::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.armed) return;
  std::string name = device_name != nullptr ? device_name : "?";
  if (name.size() > guard::kMaxKernelNameBytes) name = name.substr(0, guard::kMaxKernelNameBytes) + "...";
  s.kernels.push_back({host_fun, std::move(name)});
}

}  // extern "C"
