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
#include <optional>
#include <string>
#include <vector>

#include "judge/arena_layout.h"
#include "judge/lane_memory_budget.h"
#include "judge/symbol_policy.h"

namespace kforge::judge {

using json = nlohmann::json;

// Memory shared between the judge and one runner: the candidate's inputs and
// outputs, nothing else (references stay in the judge's private memory).
class SharedArena {
 public:
  virtual ~SharedArena() = default;
  virtual const ArenaLayout& layout() const = 0;
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
  // Whether evaluations asked for a profile get the profile stage (energy,
  // kernel attribution, counters: profile.h). CUDA only.
  virtual bool has_profile_stage() const { return backend() == "cuda"; }
  // Where inputs, references and comparisons live.
  virtual at::Device device() const = 0;
  virtual uint64_t page_size() const = 0;
  virtual std::unique_ptr<SharedArena> create_arena(const ArenaLayout& layout) = 0;

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
  // Whether the device's clock has ramped up to its working speed, so that a
  // warm-up may end before EvalOptions::warmup_ms (timing_protocol.h). False
  // where there is no such reading (the CPU: warm-up by time only).
  virtual bool clocks_at_speed() { return false; }
  // Whether the work runs on the host CPU, so that CPU time consumed (the
  // runner's, read from its kernel-kept CPU clock; the judge thread's for the
  // reference) measures it. True on CPU; on GPUs the CPU only launches work.
  virtual bool work_is_host_cpu_time() const { return false; }
  // An upper bound on the memory bandwidth a kernel can reach, in bytes per
  // second, for the roofline check (roofline.h); 0 = unknown, and the check
  // is skipped and says so. Overestimating only weakens the check;
  // underestimating flags honest kernels, so implementations must err high.
  // Cheap: called once per timed request, never measured there.
  virtual double peak_memory_bytes_per_s() const { return 0; }
  // What a task's tensors may occupy on this device, and upper bounds on
  // its arithmetic and memory rates (task_fit.h: a task that cannot fit or
  // cannot finish is refused before it runs). Fixed per machine, never
  // measured, so that the refusal does not depend on load.
  struct PeakRates {
    double flops_per_s = 0;
    double bytes_per_s = 0;
  };
  virtual uint64_t task_memory_bytes() const = 0;
  virtual PeakRates peak_rates() const = 0;

  // Whether the runner's `done` reply carries the candidate's device time
  // (`device_ns`: CUDA events on the runner's stream around kf_forward). The
  // timing phase then uses it as the primary clock, cross-checked against the
  // judge's own round trip, which the candidate cannot influence (timing_tamper.h).
  virtual bool runner_times_on_device() const { return false; }
  // Start alignment of tensors in the arena. GPUs move memory in 128-byte
  // lines, and the reference's tensors come from an allocator that aligns to
  // 512 bytes: a less aligned candidate tensor would make the comparison unfair.
  virtual uint64_t arena_alignment() const { return 64; }
  // Device facts for Executor::health() (free device memory, live arenas).
  virtual json health() { return json::object(); }
  // The software a measurement on this device depends on ({"torch", and on
  // GPUs "cuda_runtime", "cuda_driver", "compute_capability"}): with name(),
  // the key of cached baselines (docs/execution.md, "Baseline cache").
  virtual json versions() const;
  // Memory in use on a device that is not the host (CUDA: total - free, all
  // processes), for the judge's memory bound (memory_bound.h); 0 on the CPU,
  // whose memory the resident set already counts.
  virtual uint64_t device_memory_in_use() { return 0; }
  // The device's own memory (CUDA: the card's total); 0 for the host's.
  virtual uint64_t memory_bytes() const { return 0; }
  // This lane's share of the device's memory (lane_memory_budget.h), set at
  // judge start on GPUs; task_fit.h then counts tasks against it. The CUDA
  // device also caps its allocator's cache at what the lane has for tasks.
  const std::optional<LaneMemoryBudget>& lane_memory() const { return lane_memory_; }
  virtual void set_lane_memory(const LaneMemoryBudget& budget) { lane_memory_ = budget; }
  // Before a candidate of this lane starts: memory the judge's allocator keeps
  // cached beyond `bytes` (what the task's own tensors need) goes back to the
  // device, so that the lane's candidate finds what its budget promised.
  virtual void keep_cached_memory_within(uint64_t bytes) { (void)bytes; }
  // Gives device memory that the judge's allocator keeps cached back to the
  // device (CUDA: PyTorch's caching allocator); false where there is none.
  virtual bool release_cached_memory() { return false; }
  // "" while the judge's own device context is usable, else why not (a sticky
  // CUDA error). Checked after every request; the judge then exits so that the
  // Executor starts a fresh one for the next request.
  virtual std::string context_error() { return ""; }
  // The device's cumulative energy counter in millijoules, if it has one.
  virtual std::optional<uint64_t> energy_mj() { return std::nullopt; }
  // Undefined symbols a candidate for this device may import.
  SymbolPolicy symbol_policy(const std::vector<std::string>& task_libraries) const {
    return SymbolPolicy::for_backend(backend(), task_libraries);
  }

 private:
  std::optional<LaneMemoryBudget> lane_memory_;
};

// Throws std::runtime_error with a clear message for a backend that is not
// built ("CUDA backend not built into kforge-judge").
std::unique_ptr<JudgeDevice> make_judge_device(const std::string& backend, int index);

// The name of the GPU gate (judge/gpu_gate.h) of device `index`: one per
// physical GPU, whatever CUDA_VISIBLE_DEVICES makes its index ("gpu-" and the
// PCI bus id; found without creating a context, so that it can be taken before
// the judge's own context is created). "" for backends without a gate.
std::string gpu_gate_key(const std::string& backend, int index);
// Devices of `backend` this judge could use (the CPU backend has one), sent
// in the hello so that the environment can refuse a device index that does
// not exist with a clear message at start. -1 for an unknown backend.
int judge_device_count(const std::string& backend);

}  // namespace kforge::judge
