// What the runner needs from the device it runs candidates on; everything
// else in the runner (protocol, loading, sandbox, timing) is backend-neutral.
//
// CPU: the arena is a memfd mapped with guard pages, `stream` is NULL and
// nothing needs synchronizing. CUDA (later): the arena arrives as a CUDA IPC
// handle, `stream` is a stream the runner creates, synchronize() waits for it,
// and the driver's system calls are added to the sandbox.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace kforge::runner {

class RunnerDevice {
 public:
  virtual ~RunnerDevice() = default;
  // Maps the arena described by the judge's `setup` message; `fds` are the
  // descriptors that came with it. Runs in the loading phase of the sandbox
  // (mmap/mprotect allowed). Throws std::runtime_error.
  virtual void map_arena(const nlohmann::json& arena, std::vector<exec::UniqueFd>* fds) = 0;
  // Address of arena byte `offset` as the candidate sees it (host or device).
  virtual void* arena_address(uint64_t offset) const = 0;
  virtual uint64_t arena_bytes() const = 0;
  virtual void* stream() = 0;
  // Waits until the candidate's work is complete; part of the timed call.
  virtual void synchronize() = 0;
  // System calls the device runtime needs beyond the CPU set, by name.
  virtual std::vector<std::string> extra_syscalls() const = 0;
};

// "cpu" -> the host device; anything else throws std::runtime_error naming
// what is missing (the CUDA runner device is not built yet).
std::unique_ptr<RunnerDevice> make_runner_device(const std::string& backend);

}  // namespace kforge::runner
