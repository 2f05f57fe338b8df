#include "judge/cuda_judge_device.h"

#include <cuda_runtime_api.h>

#if KFORGE_TORCH_CUDA_ALLOCATOR
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "cuda_timing/launch_gate.h"
#include "cuda_timing/read_flush.h"
#include "ipc/hex_codec.h"
#include "judge/l2_flush.h"
#include "judge/nvml_monitor.h"

namespace kforge::judge {
namespace {

std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + cuda_error_text(e));
}

int attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  return cudaDeviceGetAttribute(&v, attr, device) == cudaSuccess ? v : 0;
}

// Device memory shared with one runner. Zeroed on creation: cudaMalloc may hand
// back memory that held an earlier request's data, and the candidate can read
// every byte of its arena (guards and padding included).
class IpcArena final : public SharedArena {
 public:
  IpcArena(const ArenaLayout& layout, int device, int* live) : layout_(layout), device_(device), live_(live) {
    cudaError_t e = cudaMalloc(&base_, layout_.size);
    if (e != cudaSuccess) {
      cudaGetLastError();  // out-of-memory is not sticky; leave the context clean
      throw std::runtime_error("cannot allocate the " + std::to_string(layout_.size) +
                               "-byte arena in device memory: " + cuda_error_text(e));
    }
    ++*live_;
    check(cudaMemset(base_, 0, layout_.size), "clearing the arena");
    check(cudaIpcGetMemHandle(&handle_, base_), "cudaIpcGetMemHandle");
  }
  ~IpcArena() override {
    // The runner that mapped it is dead by now (the session kills it first),
    // so freeing cannot pull memory from under a running kernel of ours.
    cudaFree(base_);
    --*live_;
  }

  const ArenaLayout& layout() const override { return layout_; }
  json descriptor() const override {
    json guards = json::array();
    for (const auto& [offset, length] : layout_.guards) guards.push_back({offset, length});
    return {{"kind", "cuda_ipc"},
            {"bytes", layout_.size},
            {"device", device_},
            {"handle", ipc::hex_encode(&handle_, sizeof(handle_))},
            {"guards", guards}};
  }
  std::vector<int> descriptors() const override { return {}; }
  at::Tensor view(uint64_t offset, at::IntArrayRef shape, at::ScalarType type) override {
    // A device index is given, so ATen does not have to ask the driver which
    // device owns the pointer (it is not from its allocator).
    return at::from_blob(static_cast<char*>(base_) + offset, shape,
                         at::TensorOptions().dtype(type).device(at::Device(at::kCUDA, device_)));
  }

 private:
  ArenaLayout layout_;
  int device_;
  int* live_;
  void* base_ = nullptr;
  cudaIpcMemHandle_t handle_{};
};

class CudaJudgeDevice final : public JudgeDevice {
 public:
  explicit CudaJudgeDevice(int index) : index_(index) {
    if (!at::hasCUDA()) {
      throw std::runtime_error("this libtorch has no CUDA support (the CUDA judge needs PyTorch built with CUDA)");
    }
    int count = 0;
    check(cudaGetDeviceCount(&count), "no usable CUDA device");
    if (index < 0 || index >= count) {
      throw std::runtime_error("CUDA device " + std::to_string(index) + " does not exist (" + std::to_string(count) +
                               " visible)");
    }
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaFree(nullptr), "creating the CUDA context");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    name_ = prop.name;
    total_memory_bytes_ = prop.totalGlobalMem;
    sm_count_ = prop.multiProcessorCount;
    cc_ = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    flush_ = plan_l2_flush(attribute(cudaDevAttrL2CacheSize, index));
    cache_flush_ = std::make_unique<cuda_timing::ReadFlush>(flush_.flush_bytes);
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    gate_ = std::make_unique<cuda_timing::LaunchGate>();
    if (!gate_->available()) gate_off_ = gate_->why();

    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), index) == cudaSuccess) {
      nvml_ = NvmlMonitor::open(bus_id, &nvml_error_);
    } else {
      nvml_error_ = "cudaDeviceGetPCIBusId failed";
    }
    bus_width_bits_ = attribute(cudaDevAttrGlobalMemoryBusWidth, index);
    memory_clock_khz_ = attribute(cudaDevAttrMemoryClockRate, index);
  }

  ~CudaJudgeDevice() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  std::string backend() const override { return "cuda"; }
  std::string name() const override { return name_; }
  at::Device device() const override { return at::Device(at::kCUDA, index_); }
  uint64_t page_size() const override { return 4096; }
  uint64_t arena_alignment() const override { return 256; }
  std::unique_ptr<SharedArena> create_arena(const ArenaLayout& layout) override {
    return std::make_unique<IpcArena>(layout, index_, &live_arenas_);
  }

  // On ATen's stream (the legacy default stream), so the flush is ordered
  // before the reference that follows; synchronous, so it is also complete
  // before the runner's call starts in its own process. Reading leaves the
  // L2 clean (cuda_timing/read_flush.h).
  void flush_cache() override {
    check(cache_flush_->run(nullptr), "L2 flush");
    check(cudaStreamSynchronize(nullptr), "L2 flush");
  }
  uint64_t flush_bytes() const override { return flush_.flush_bytes; }
  void synchronize() override { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

  // Events on the legacy default stream, which is where ATen launches the
  // reference: the stop event is recorded as soon as fn() has enqueued its
  // work, like the runner's stop event after kf_forward returns, so both sides
  // exclude the host's synchronization latency.
  //
  // Behind the launch gate (cuda_timing/launch_gate.h), as the runner times
  // the candidate: eager PyTorch's launch gaps are host time, not the
  // reference's device work. If an ATen op waited on the host for the device
  // (the gate then times out), the reference is timed again without the gate,
  // and from then on.
  double time_ms(const std::function<void()>& fn) override {
    const bool gated = gate_ != nullptr && gate_->available() && gate_off_.empty();
    double ms = timed_region(fn, gated);
    if (gated && gate_->timed_out()) {
      gate_off_ = "the reference waited on the host for the device, so it is timed without the launch gate";
      ms = timed_region(fn, false);
    }
    return ms;
  }

  double timed_region(const std::function<void()>& fn, bool gated) {
    if (gated) check(gate_->close(nullptr), "launching the launch gate");
    check(cudaEventRecord(start_, nullptr), "cudaEventRecord");
    fn();
    check(cudaEventRecord(stop_, nullptr), "cudaEventRecord");
    if (gated) gate_->open();
    check(cudaEventSynchronize(stop_), "timing the reference");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

  json clocks() override {
    json j = nvml_ ? nvml_->clocks() : json::object();
    j["launch_gate"] = gate_off_.empty() ? "on" : "off: " + gate_off_;
    if (!nvml_) j["unavailable"] = "clocks unavailable: " + nvml_error_;
    j["l2_bytes"] = flush_.l2_bytes;
    j["l2_source"] = flush_.source;
    j["cache_flush"] = cache_flush_->method();
    j["sm_count"] = sm_count_;
    j["compute_capability"] = cc_;
    return j;
  }

  bool clocks_at_speed() override { return nvml_ && nvml_->sm_clock_at_speed(); }

  bool runner_times_on_device() const override { return true; }

  // Double data rate: two transfers per memory clock over the whole bus.
  double peak_memory_bytes_per_s() const override {
    double mhz = memory_clock_khz_ / 1000.0;
    if (nvml_) {
      if (auto max = nvml_->max_memory_clock_mhz()) mhz = *max;
    }
    return 2.0 * mhz * 1e6 * bus_width_bits_ / 8.0;
  }

  // Without a lane budget (a device made alone, as tests do): all of the
  // card but what the contexts of its judges and runners take (about 0.5 GiB
  // each, several per GPU).
  uint64_t task_memory_bytes() const override {
    constexpr uint64_t kContexts = uint64_t{4} << 30;
    return total_memory_bytes_ > kContexts ? total_memory_bytes_ - kContexts : total_memory_bytes_;
  }
  // Above any rate eager PyTorch reaches on a GPU of this generation (the
  // H200's dense FP8 tensor-core peak is about 2e15); the memory rate from
  // the clock and bus width, as the roofline check reads it.
  PeakRates peak_rates() const override { return {2e15, peak_memory_bytes_per_s()}; }

  json versions() const override {
    json v = JudgeDevice::versions();
    int runtime = 0, driver = 0;
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) v["cuda_runtime"] = runtime;
    if (cudaDriverGetVersion(&driver) == cudaSuccess) v["cuda_driver"] = driver;
    v["compute_capability"] = cc_;
    return v;
  }

  json health() override {
    size_t free_bytes = 0, total_bytes = 0;
    json j = {{"arenas_live", live_arenas_}, {"allocator_capped", allocator_capped_}, {"cache_cuts", cache_cuts_}};
    if (!allocator_cap_error_.empty()) j["allocator_cap_error"] = allocator_cap_error_;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      j["gpu_free_bytes"] = free_bytes;
      j["gpu_total_bytes"] = total_bytes;
    }
    return j;
  }

  bool release_cached_memory() override {
#if KFORGE_TORCH_CUDA_ALLOCATOR
    c10::cuda::CUDACachingAllocator::emptyCache();
    return true;
#else
    return false;
#endif
  }

  uint64_t memory_bytes() const override { return total_memory_bytes_; }

  // PyTorch's caching allocator may reserve at most what the lane has for
  // tasks: past that it frees its cache and retries, then fails (the
  // reference's out-of-memory verdict) rather than take a neighbour lane's
  // memory. The fraction is of the total the allocator sees, the card's.
  void set_lane_memory(const LaneMemoryBudget& budget) override {
    JudgeDevice::set_lane_memory(budget);
#if KFORGE_TORCH_CUDA_ALLOCATOR
    if (budget.device_bytes == 0) return;
    const double fraction = static_cast<double>(budget.task_bytes()) / static_cast<double>(budget.device_bytes);
    try {
      // The allocator exists for a device once ATen has used it: one tiny
      // tensor makes sure (setMemoryFraction refuses a device it has not set up).
      (void)at::empty({1}, at::TensorOptions().device(device()));
      c10::cuda::CUDACachingAllocator::setMemoryFraction(std::min(fraction, 1.0),
                                                         static_cast<c10::DeviceIndex>(index_));
      allocator_capped_ = true;
    } catch (const std::exception& e) {
      // The runners' budgets and the task checks still hold; only the
      // judge's own backstop is missing, which health() says.
      allocator_cap_error_ = e.what();
    }
#endif
  }

  // Blocks a bigger task left cached would be this lane's memory the
  // candidate was promised (LaneMemoryBudget::candidate_bytes).
  void keep_cached_memory_within(uint64_t bytes) override {
#if KFORGE_TORCH_CUDA_ALLOCATOR
    if (!allocator_capped_) return;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index_));
    // reserved_bytes[0]: the aggregate over the allocator's pools.
    if (stats.reserved_bytes[0].current > static_cast<int64_t>(bytes)) {
      c10::cuda::CUDACachingAllocator::emptyCache();
      ++cache_cuts_;
    }
#else
    (void)bytes;
#endif
  }

  uint64_t device_memory_in_use() override {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess || free_bytes > total_bytes) return 0;
    return total_bytes - free_bytes;
  }

  // A runner's fault (illegal address, trap, a kernel killed mid-flight) lives
  // in the runner's own context and cannot poison ours; a device-wide failure
  // (Xid, a GPU that fell off the bus, a hang that needed a reset) can. Real
  // work is run through the context to find out.
  std::string context_error() override {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cache_flush_->run(nullptr);
    if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? "" : "the judge's CUDA context failed: " + cuda_error_text(e);
  }

  std::optional<uint64_t> energy_mj() override {
    if (!nvml_) return std::nullopt;
    return nvml_->energy_mj();
  }

 private:
  int index_;
  std::string name_, cc_;
  int sm_count_ = 0;
  uint64_t total_memory_bytes_ = 0;
  L2FlushPlan flush_;
  std::unique_ptr<cuda_timing::ReadFlush> cache_flush_;
  std::unique_ptr<cuda_timing::LaunchGate> gate_;
  std::string gate_off_;  // why the reference is not gated (empty: it is)
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::unique_ptr<NvmlMonitor> nvml_;
  std::string nvml_error_;
  int bus_width_bits_ = 0;
  int memory_clock_khz_ = 0;
  int live_arenas_ = 0;
  // The lane's cap on PyTorch's allocator (set_lane_memory), and how often a
  // candidate's start emptied its cache (keep_cached_memory_within).
  bool allocator_capped_ = false;
  std::string allocator_cap_error_;
  int cache_cuts_ = 0;
};

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::unique_ptr<JudgeDevice> make_cuda_judge_device(int index) { return std::make_unique<CudaJudgeDevice>(index); }

std::string cuda_gate_key(int index) {
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), index) == cudaSuccess) return std::string("gpu-") + bus_id;
  cudaGetLastError();
  return "cuda-" + std::to_string(index);
}

}  // namespace kforge::judge
