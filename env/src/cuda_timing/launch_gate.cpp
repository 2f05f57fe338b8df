#include "cuda_timing/launch_gate.h"

#include <atomic>

#include "cuda_timing/error_text.h"

namespace kforge::cuda_timing {
namespace {

// Spins on a volatile load of words[0] (host-mapped memory) until it is
// non-zero or %globaltimer says timeout_ns have passed; then records in
// words[1] whether it gave up.
constexpr const char* kGatePtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry kforge_launch_gate(.param .u64 words, .param .u64 timeout_ns)
{
  .reg .pred %p<3>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [words];
  ld.param.u64 %rd2, [timeout_ns];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u64 %rd3, %globaltimer;
LOOP:
  ld.volatile.global.u32 %r1, [%rd1];
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  mov.u64 %rd4, %globaltimer;
  sub.u64 %rd5, %rd4, %rd3;
  setp.lt.u64 %p2, %rd5, %rd2;
  @%p2 bra LOOP;
  mov.u32 %r2, 1;
  st.volatile.global.u32 [%rd1+4], %r2;
DONE:
  ret;
}
)";

}  // namespace

const char* launch_gate_ptx() { return kGatePtx; }

LaunchGate::LaunchGate(uint64_t timeout_ns) : timeout_ns_(timeout_ns) {
  void* host = nullptr;
  cudaError_t e = cudaHostAlloc(&host, 2 * sizeof(uint32_t), cudaHostAllocMapped);
  if (e != cudaSuccess) {
    why_ = error_text("cudaHostAlloc", e);
    cudaGetLastError();
    return;
  }
  words_ = static_cast<volatile uint32_t*>(host);
  words_[0] = words_[1] = 0;
  e = cudaHostGetDevicePointer(&device_words_, host, 0);
  if (e == cudaSuccess) e = cudaLibraryLoadData(&library_, kGatePtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e == cudaSuccess) e = cudaLibraryGetKernel(&kernel_, library_, "kforge_launch_gate");
  if (e != cudaSuccess) {
    why_ = error_text("loading the launch gate", e);
    kernel_ = nullptr;
    cudaGetLastError();
  }
}

LaunchGate::~LaunchGate() {
  if (library_ != nullptr) cudaLibraryUnload(library_);
  if (words_ != nullptr) cudaFreeHost(const_cast<uint32_t*>(words_));
}

cudaError_t LaunchGate::close(cudaStream_t stream) {
  words_[0] = 0;
  words_[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  void* args[] = {&device_words_, &timeout_ns_};
  return cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(1), dim3(1), args, 0, stream);
}

void LaunchGate::open() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  words_[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool LaunchGate::timed_out() const { return words_[1] != 0; }

}  // namespace kforge::cuda_timing
