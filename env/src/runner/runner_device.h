// What the runner needs from the device it runs candidates on; everything
// else in the runner (protocol, loading, sandbox) is backend-neutral.
//
// CPU: the arena is a memfd mapped with guard pages, `stream` is NULL and
// nothing needs synchronizing. CUDA (cuda_runner_device.cpp): the arena
// arrives as a CUDA IPC handle, `stream` is a non-blocking stream the runner
// creates, a call is timed with CUDA events on it and followed by checks for
// work left running, and the driver's system calls are added to the sandbox.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "kforge/core/unique_fd.h"
#include "runner/cubin_kernels.h"

namespace kforge::runner {

// A failure of the device caused by the candidate's call (a CUDA fault, a
// pending launch error): the message is reported as the call's runtime error.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CallResult {
  int rc = 0;
  // Device-specific facts merged into the `done` reply (device_ns, ...).
  nlohmann::json extra = nlohmann::json::object();
};

class RunnerDevice {
 public:
  virtual ~RunnerDevice() = default;
  // The device memory the candidate's own allocations may reach (the
  // judge's `setup.limits.device_memory_bytes`; 0: no budget). Given before
  // map_arena(). CUDA: device_allowance.h; the CPU has no device memory.
  virtual void set_device_memory_limit(uint64_t bytes) { (void)bytes; }
  // Maps the arena described by the judge's `setup` message; `fds` are the
  // descriptors that came with it. Runs before any candidate code is loaded
  // and before the sandbox's filters. Throws std::runtime_error.
  virtual void map_arena(const nlohmann::json& arena, std::vector<UniqueFd>* fds) = 0;
  // Address of arena byte `offset` as the candidate sees it (host or device).
  virtual void* arena_address(uint64_t offset) const = 0;
  virtual uint64_t arena_bytes() const = 0;
  virtual void* stream() = 0;
  // Waits until the candidate's work is complete; part of the timed call.
  virtual void synchronize() = 0;
  // System calls the device runtime needs beyond the CPU set, by name
  // ("mprotect" is granted without PROT_EXEC only, "openat"/"open" read-only;
  // "!name" makes the call fail with EPERM instead of stopping the runner).
  virtual std::vector<std::string> extra_syscalls() const = 0;
  // Files the device runtime opens for writing after the filters exist; the
  // sandbox confines writes to them with Landlock and then lets "openat"
  // extras ask for write access (landlock.h). None by default.
  virtual std::vector<std::string> writable_files() const { return {}; }
  // Device files that may take ioctls when opened after the sandbox exists
  // (Landlock refuses device ioctls elsewhere). None by default.
  virtual std::vector<std::string> device_ioctl_files() const { return {}; }
  // Descriptors the device runtime holds or opens on its own, on top of the
  // candidate's RLIMIT_NOFILE allowance.
  virtual int extra_open_files() const { return 0; }
  // How long the runner busy-waits for the next request before sleeping
  // (wire.h, recv_frame): devices whose calls are timed by round trip
  // spin so that the runner's wake-up is not in them.
  virtual int request_spin_us() const { return 0; }
  // An nvrtc candidate's CUBIN image: loads it onto the device and resolves
  // the kernels with these lowered names, in this order (duplicates allowed).
  // Runs in the loading phase, like dlopen for a shared object, so that
  // module loading never happens under the running filter. Throws
  // std::runtime_error; the default has no device to load onto.
  virtual std::unique_ptr<CubinKernels> load_cubin(const std::string& image, const std::vector<std::string>& names);
  // Right after the candidate is loaded, still in the loading phase
  // (CUDA: its modules are loaded onto the device here, so that the running
  // filter never sees module loading). Throws std::runtime_error for a
  // candidate that cannot run on this device; reported as a load failure.
  virtual void after_load() {}
  // New tensors were bound: forget anything tied to the previous ones.
  virtual void on_bind() {}
  // One `call` request: runs `forward` (null for a null call) as `options`
  // say (`repeat`: back-to-back calls; `graph`: CUDA-graph replay) and waits
  // for the work. Throws DeviceError for a device failure the call caused;
  // exceptions escaping kf_forward propagate.
  virtual CallResult run_call(const std::function<int()>* forward, const nlohmann::json& options);
  // A `profile` request (the CUDA profiler runner, or a tracing timing
  // runner): kernel attribution and, in a profiler runner, hardware metrics
  // of calls of `forward`. The default has no profiler.
  virtual nlohmann::json profile(const std::function<int()>& forward, const nlohmann::json& request);
};

struct RunnerDeviceOptions {
  int device = 0;         // GPU index
  bool profiler = false;  // CUDA: set up CUPTI for `profile` requests
  // CUDA: a timing runner that also sets up CUPTI's activity tracing (no
  // counters), so that a `profile` request after its timing traces the
  // candidate in this runner instead of a second one. Its sandbox is a
  // timing runner's: nothing is allowed for the tracer.
  bool tracer = false;
};

// "cpu" -> the host device; "cuda" -> the CUDA device when built with the
// toolkit. Anything else throws std::runtime_error naming what is missing.
std::unique_ptr<RunnerDevice> make_runner_device(const std::string& backend, const RunnerDeviceOptions& options);
std::unique_ptr<RunnerDevice> make_cpu_runner_device();
std::unique_ptr<RunnerDevice> make_cuda_runner_device(const RunnerDeviceOptions& options);

}  // namespace kforge::runner
