// What the judge needs from the device candidates run on. The verification
// and timing code is written against these two interfaces only, so the CUDA
// backend plugs in by implementing them (arena = device memory shared through
// CUDA IPC, views = CUDA tensors over it, time_ms = CUDA events, flush_cache =
// an L2-sized write) without touching the generic code.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/arena_layout.h"
#include "common/symbol_policy.h"

namespace kforge::judge {

using json = nlohmann::json;

// Memory shared between the judge and one runner: the candidate's inputs and
// outputs, nothing else (references stay in the judge's private memory).
class SharedArena {
 public:
  virtual ~SharedArena() = default;
  virtual const exec::ArenaLayout& layout() const = 0;
  // How the runner maps it (the `arena` field of the setup message) and the
  // descriptors that travel with that message.
  virtual json descriptor() const = 0;
  virtual std::vector<int> descriptors() const = 0;
  // A tensor aliasing arena bytes from `offset` with the given shape (a
  // device tensor on GPUs). Valid while the arena lives.
  virtual at::Tensor view(uint64_t offset, at::IntArrayRef shape, at::ScalarType type) = 0;
};

class JudgeDevice {
 public:
  virtual ~JudgeDevice() = default;
  virtual std::string backend() const = 0;  // "cpu", "cuda"
  virtual std::string name() const = 0;     // CPU model or GPU name, for reports
  // Where inputs, references and comparisons live.
  virtual at::Device device() const = 0;
  virtual uint64_t page_size() const = 0;
  virtual std::unique_ptr<SharedArena> create_arena(const exec::ArenaLayout& layout) = 0;

  // Arena contents. The defaults use ATen ops on arena views, which work for
  // any device whose views are ordinary tensors of that device.
  virtual void copy_into(at::Tensor& arena_view, const at::Tensor& source);
  // Floats become NaN; other types the byte pattern 0xA5, so an output the
  // candidate did not write cannot pass.
  virtual void poison(at::Tensor& arena_view);

  // Evicts the last-level cache (L2 on GPUs) so every timed sample starts cold.
  virtual void flush_cache() = 0;
  virtual uint64_t flush_bytes() const = 0;
  virtual void synchronize() = 0;
  // Duration of fn() as the device experiences it, in milliseconds.
  virtual double time_ms(const std::function<void()>& fn) = 0;
  // Clock state to record with timings (CPU MHz, SM/memory clocks on GPUs).
  virtual json clocks() = 0;
  // Whether the work runs on the host CPU, so that CPU time consumed (the
  // runner's, read from its kernel-kept CPU clock; the judge thread's for the
  // reference) measures it. True on CPU; on GPUs the CPU only launches work.
  virtual bool work_is_host_cpu_time() const { return false; }
  // Undefined symbols a candidate for this device may import.
  exec::SymbolPolicy symbol_policy(const std::vector<std::string>& task_libraries) const {
    return exec::SymbolPolicy::for_backend(backend(), task_libraries);
  }
};

// Throws std::runtime_error with a clear message for a backend that is not
// built ("CUDA backend not built into kforge-judge").
std::unique_ptr<JudgeDevice> make_judge_device(const std::string& backend, int index);

}  // namespace kforge::judge
