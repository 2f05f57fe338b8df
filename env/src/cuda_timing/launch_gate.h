// A launch gate: nvbench's "blocking kernel". The device time of a region
// bracketed by two events includes every gap in which the device waited for
// the host to enqueue the next launch (a few microseconds each, and jittery:
// they come from the host's scheduling, not from the kernels). To time only
// the device's work, a gate kernel is enqueued first; it spins until the host
// opens it, so the start event, the region's launches and the stop event all
// queue up behind it and then run back to back.
//
//   gate.close(stream);           // the gate kernel, spinning
//   cudaEventRecord(start, stream);
//   ... enqueue the region ...
//   cudaEventRecord(stop, stream);
//   gate.open();                  // host store: the queue drains
//   cudaEventSynchronize(stop);
//   if (gate.timed_out()) ...     // the region waited on the device itself
//
// A region that waits for its own stream on the host (a synchronous copy, a
// synchronizing API) would wait for the gate forever, so the gate gives up
// after a timeout and says so; callers then stop using it (their samples
// with a timed-out gate include the spin and are discarded).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace kforge::cuda_timing {

// The gate kernel as PTX (loaded with cudaLibraryLoadData, so that host
// compilers build its users). Exposed for a ptxas check in the tests.
const char* launch_gate_ptx();

class LaunchGate {
 public:
  static constexpr uint64_t kDefaultTimeoutNs = 100'000'000;  // 100 ms

  // Loads the kernel and maps two host words; on failure available() is
  // false and why() says what failed. Needs a current device.
  explicit LaunchGate(uint64_t timeout_ns = kDefaultTimeoutNs);
  ~LaunchGate();
  LaunchGate(const LaunchGate&) = delete;
  LaunchGate& operator=(const LaunchGate&) = delete;

  bool available() const { return kernel_ != nullptr; }
  const std::string& why() const { return why_; }

  // Enqueues the gate kernel on `stream`. Returns the launch error, if any.
  cudaError_t close(cudaStream_t stream);
  // Lets the gate kernel finish.
  void open();
  // After the stream has passed the gate: whether it gave up waiting.
  bool timed_out() const;

 private:
  uint64_t timeout_ns_;
  std::string why_;
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
  volatile uint32_t* words_ = nullptr;  // [0] open flag, [1] timed out (pinned, mapped)
  void* device_words_ = nullptr;
};

}  // namespace kforge::cuda_timing
