// An L2 flush that leaves the cache clean. The usual flush (nvbench's, ours
// until 2026-12) memsets a buffer twice the L2's size: the cache then holds
// the buffer's last L2-worth of *dirty* lines, and the next timed kernel pays
// to write them back to DRAM as its own misses evict them, tens of
// megabytes on an H200, which Nsight Compute's `--cache-control all` (flush
// and invalidate before each kernel) does not charge. Reading the buffer
// instead evicts the same lines and leaves clean ones in their place: the
// timed kernel starts from a cold, clean L2, as under Nsight Compute.
//
//   ReadFlush flush(bytes);        // allocates and zeroes the buffer once
//   flush.run(stream);             // enqueues the reading kernel
//
// When the kernel cannot be loaded, run() memsets the buffer instead (a new
// byte value each time, so that the writes are not elided), and method()
// says so: "read", or "memset (read flush unavailable: <why>)".
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace kforge::cuda_timing {

// The flush kernel as PTX, exposed for the ptxas check in the tests.
const char* read_flush_ptx();

class ReadFlush {
 public:
  // Needs a current device. `bytes` is rounded down to 16-byte vectors.
  explicit ReadFlush(size_t bytes);
  ~ReadFlush();
  ReadFlush(const ReadFlush&) = delete;
  ReadFlush& operator=(const ReadFlush&) = delete;

  bool reads() const { return kernel_ != nullptr; }
  std::string method() const { return reads() ? "read" : "memset (read flush unavailable: " + why_ + ")"; }
  size_t bytes() const { return bytes_; }

  // Enqueues the flush of the whole buffer on `stream`.
  cudaError_t run(cudaStream_t stream);

 private:
  size_t bytes_;
  std::string why_;
  void* buffer_ = nullptr;
  void* sink_ = nullptr;  // written only if the buffer's XOR is a magic value: never
  unsigned char memset_round_ = 0;
  unsigned blocks_ = 0;
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
};

}  // namespace kforge::cuda_timing
