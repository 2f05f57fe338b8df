// The CUDA device of the runner (docs/cuda-backend.md).
//
// Start-up (while a spare, before any filter): context on the judge's GPU with
// spin-waiting synchronization, a non-blocking stream for the candidate,
// events, and one pass through every runtime path used later (a memset
// kernel, event timing, stream and device synchronization, graph capture and
// launch), so that calls under the running filter need only the system calls
// of steady-state CUDA (ioctl, mmap, futex). A profiler runner also sets up
// CUPTI here. Module loading is EAGER (unless CUDA_MODULE_LOADING says
// otherwise): the candidate's kernels are loaded in after_load(), during the
// loading phase, not at their first launch inside kf_forward.
//
// nvrtc candidates (cuda_cubin_kernels.h): the CUBIN is loaded with the runtime's library API
// (cudaLibraryLoadData, cudaLibraryGetKernel by each kernel's lowered name) in
// the loading phase; its kernels are launched with cudaLaunchKernel on the
// candidate's stream, which takes the cudaKernel_t handle as its function, so
// the runner needs no driver API. Everything below (timing, graphs, faults,
// profiling) treats those launches as one kf_forward.
//
// A call: start event, kf_forward (or a replay of its captured graph), stop
// event, stream synchronization (a fault of the candidate's kernels surfaces
// here), then checks for work the call left behind outside its stream: how
// long cudaDeviceSynchronize still has to wait (`drain_ns`, compared by the
// judge with null calls) and any pending error.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_timing/launch_gate.h"
#include "cuda_timing/read_flush.h"
#include "cupti/activity_trace.h"
#include "cupti/range_metrics.h"
#include "ipc/deadline.h"
#include "ipc/hex_codec.h"
#include "kforge/core/elapsed.h"
#include "runner/cuda_allocation_guard.h"
#include "runner/cuda_call_trace.h"
#include "runner/cuda_cubin_kernels.h"
#include "runner/cuda_errors.h"
#include "runner/cuda_graph.h"
#include "runner/cuda_libraries.h"
#include "runner/landlock.h"
#include "runner/runner_device.h"

namespace kforge::runner {
namespace {

// The work of a null call: one empty kernel on the candidate's stream. A call
// that launches a kernel makes the GPU switch its compute engine from the
// judge's context to the runner's; one that only records events does not.
// Measured on an H200: with event-only null calls, every honest candidate's
// round trip exceeded its device time by 0.08-0.22 ms of that switch, which
// the null calls must carry so that it counts as harness overhead. PTX, so
// that the runner needs no nvcc: the driver compiles it once at start-up.
constexpr const char* kNullKernelPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry kforge_null_kernel()
{
  ret;
}
)";

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

class CudaRunnerDevice final : public RunnerDevice {
 public:
  explicit CudaRunnerDevice(const RunnerDeviceOptions& options) : options_(options) {
    try {
      initialize();
    } catch (const std::exception& e) {
      // Reported on `setup`, where the judge expects failures, rather than by
      // dying as a spare with nobody listening.
      init_error_ = e.what();
    }
  }

  ~CudaRunnerDevice() override {
    // Usually never reached (the judge SIGKILLs runners); kept for runs
    // where the runner exits by itself.
    if (graph_ != nullptr) cudaGraphExecDestroy(graph_);
    if (base_ != nullptr) cudaIpcCloseMemHandle(base_);
  }

  void set_device_memory_limit(uint64_t bytes) override { memory_limit_ = bytes; }

  void map_arena(const nlohmann::json& arena, std::vector<UniqueFd>* fds) override {
    if (!init_error_.empty()) throw std::runtime_error("CUDA set-up in the runner failed: " + init_error_);
    if (arena.value("kind", "") != "cuda_ipc") throw std::runtime_error("cuda runner expects a cuda_ipc arena");
    bytes_ = arena.at("bytes").get<uint64_t>();
    std::vector<uint8_t> raw = ipc::hex_decode(arena.at("handle").get<std::string>(), sizeof(cudaIpcMemHandle_t));
    cudaIpcMemHandle_t handle{};
    std::memcpy(&handle, raw.data(), sizeof(handle));
    check(cudaIpcOpenMemHandle(&base_, handle, cudaIpcMemLazyEnablePeerAccess), "opening the arena's IPC handle");
    fds->clear();
    // Before any filter: reserving device memory opens /dev/nvidiactl, which
    // even the loading filter refuses (seen on the H200).
    warm_up_stream_ordered_memory();
    // From here on, before any candidate code exists, its device memory is
    // counted against its lane's share (device_allowance.h).
    DeviceAllowance allowance(memory_limit_);
    allowance.set_reserves(pool_reserve_, pool_reserve_);
    allocation_guard::arm(std::move(allowance));
  }

  std::unique_ptr<CubinKernels> load_cubin(const std::string& image, const std::vector<std::string>& names) override {
    if (!init_error_.empty()) throw std::runtime_error("CUDA set-up in the runner failed: " + init_error_);
    return load_cuda_cubin(image, names, stream_, options_.device, &local_memory_);
  }

  void after_load() override {
    // The first runtime call after dlopen registers and (EAGER) loads the
    // candidate's modules (a CUBIN was loaded by load_cubin already).
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error("the candidate's CUDA code cannot be loaded: " + error_text(e));
    warm_up_libraries(&library_handles_);
    count_local_memory();
  }

  void* arena_address(uint64_t offset) const override { return static_cast<char*>(base_) + offset; }
  uint64_t arena_bytes() const override { return bytes_; }
  void* stream() override { return stream_; }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  // What the NVIDIA driver does on behalf of runtime calls once a context
  // exists: ioctls on its device files (launches that need memory, event and
  // stream bookkeeping), waits (poll/ppoll, sleeps) when synchronization does
  // not spin, page protections of its own pinned buffers, and queries of the
  // process' CPU set and resources. None reaches a file, socket or process
  // outside the runner. What the set-up needed beyond this (opening
  // /dev/nvidia*, threads) happened before the filters.
  //
  // `write` on any descriptor: after a kernel fault the driver wakes its own
  // helper threads through descriptors it opened before the filters
  // (measured on an H200: an illegal address trapped `write` otherwise). The
  // runner holds no writable file, so this reaches only the driver, stdio and
  // the control socket (which was already writable).
  //
  // A profiler runner also reads files: CUPTI opens its counter and chip
  // tables during the first profiled call. Opens stay read-only (the filter
  // checks the flags); the judge is not dumpable, so /proc/<judge>/mem stays
  // closed to the capability-less runner. docs/threat-model.md.
  std::vector<std::string> extra_syscalls() const override {
    std::vector<std::string> calls = {
        "ioctl",    "poll",    "ppoll",     "epoll_wait", "epoll_pwait", "nanosleep",         "clock_nanosleep",
        "mprotect", "sysinfo", "getrusage", "uname",      "fcntl",       "sched_getaffinity", "write"};
    if (options_.profiler) {
      for (const char* c :
           {"openat", "open", "read", "pread64", "close", "fstat", "stat", "lstat", "newfstatat", "statx", "lseek",
            "readlink", "readlinkat", "getdents64", "access", "faccessat", "faccessat2"}) {
        calls.emplace_back(c);
      }
      // While collecting counters the NVIDIA user-space driver (re)creates
      // the udev-style link of its device node: unlink, then symlink
      // /dev/char/195:0 (seen on the H200, whose VM has no /dev/char). These
      // fail with EPERM instead of stopping the runner: nothing is created
      // or deleted, and the driver carries on as it does when the link
      // cannot be made.
      for (const char* c : {"!unlink", "!unlinkat", "!symlink", "!symlinkat", "!mkdir", "!mkdirat"}) {
        calls.emplace_back(c);
      }
      // CUPTI may load a library while collecting counters: on the H200,
      // at times, the driver's PTX JIT compiler (libnvidia-ptxjitcompiler,
      // named by the profile's libraries_loaded_while_profiling), mapped
      // executable at a fixed address. With file writes confined the filter
      // allows executable mappings of files only. The library's start-up
      // asks for the scheduler's priority range (sched_get_priority_max(
      // SCHED_RR)): a query of two constants, as the loading filter allows
      // for cuBLAS.
      for (const char* c : {"mmap", "sched_get_priority_max", "sched_get_priority_min"}) calls.emplace_back(c);
    }
    return calls;
  }
  // While collecting counters the driver reopens its device node for
  // writing (openat /dev/nvidia0, seen on the H200): a profiler runner may
  // write to the NVIDIA device nodes and nothing else (landlock.h).
  std::vector<std::string> writable_files() const override {
    return options_.profiler ? nvidia_device_paths() : std::vector<std::string>{};
  }
  // Every CUDA runner (timing and profiler) is under Landlock: the driver
  // keeps its ioctls on device nodes it might open late; nothing else on the
  // machine can be written, created or removed (landlock.h).
  std::vector<std::string> device_ioctl_files() const override { return nvidia_device_paths(); }
  // The driver holds a descriptor per device file and per mapping; a few
  // dozen after start-up, more as memory is mapped.
  int extra_open_files() const override { return 1024; }
  // The judge's work between two timed calls (reference, fresh inputs,
  // checks) takes a few ms; see wire.h for why neither end may sleep.
  int request_spin_us() const override { return 20000; }

  void on_bind() override {
    if (graph_ != nullptr) cudaGraphExecDestroy(graph_);
    graph_ = nullptr;
    graph_reason_.clear();
  }

  // A call the candidate's memory makes fail as the runtime would: a kernel
  // whose local memory does not fit its share, an allocation refused during
  // the call (the refusal is the cause of whatever failed after it).
  CallResult run_call(const std::function<int()>* forward, const nlohmann::json& options) override {
    if (forward != nullptr && !local_memory_problem_.empty()) throw DeviceError(local_memory_problem_);
    try {
      CallResult result = run_counted_call(forward, options);
      if (std::string refused = allocation_guard::take_refusal(); !refused.empty()) {
        throw DeviceError(result.rc != 0 ? "kf_forward returned " + std::to_string(result.rc) + " after " + refused
                                         : refused);
      }
      return result;
    } catch (const DeviceError& e) {
      std::string refused = allocation_guard::take_refusal();
      if (refused.empty()) throw;
      throw DeviceError(refused + "; then " + e.what());
    }
  }

  CallResult run_counted_call(const std::function<int()>* forward, const nlohmann::json& options) {
    CallResult result;
    const bool want_graph = forward != nullptr && options.value("graph", false);
    const int repeat = std::max(1, options.value("repeat", 1));
    bool use_graph = false;
    if (want_graph) {
      if (graph_ == nullptr && graph_reason_.empty()) graph_reason_ = capture_graph(stream_, *forward, &graph_);
      use_graph = graph_ != nullptr;
      result.extra["graph"] = {{"used", use_graph}};
      if (!use_graph) result.extra["graph"]["reason"] = graph_reason_;
    }

    // The region between the events, behind the launch gate while it is on
    // (cuda_timing/launch_gate.h): the device then runs the call's work back
    // to back, without the host's launch gaps in the measured time.
    auto timed_region = [&](bool gated) {
      result.rc = 0;
      if (gated) check(gate_->close(stream_), "launching the launch gate");
      check(cudaEventRecord(start_, stream_), "cudaEventRecord");
      if (forward == nullptr) launch_null_work();
      if (forward != nullptr) {
        for (int i = 0; i < repeat && result.rc == 0; ++i) {
          if (use_graph) {
            cudaError_t e = cudaGraphLaunch(graph_, stream_);
            if (e != cudaSuccess) throw DeviceError("replaying the captured graph failed: " + error_text(e));
          } else {
            result.rc = (*forward)();
          }
        }
      }
      cudaError_t recorded = cudaEventRecord(stop_, stream_);
      // Before anything else can finish it: work the call queued elsewhere
      // is still pending now (a kernel takes microseconds to start).
      if (forward != nullptr && foreign_work_pending()) result.extra["foreign_pending"] = true;
      if (gated) gate_->open();
      cudaError_t synced = cudaStreamSynchronize(stream_);
      if (synced != cudaSuccess) throw DeviceError(fault_text(synced, result.rc));
      if (recorded != cudaSuccess) throw DeviceError(fault_text(recorded, result.rc));
    };
    const bool gated = gate_ != nullptr && gate_->available() && gate_off_.empty();
    timed_region(gated);
    if (gated && gate_->timed_out()) {
      // kf_forward waited on the host for work queued behind the gate: this
      // candidate is timed without it from now on, and this call again.
      gate_off_ =
          "kf_forward waited on the host for its own stream (a synchronous copy or API), so its calls "
          "are timed without the launch gate";
      timed_region(false);
    }
    result.extra["launch_gate"] = gated && gate_off_.empty() ? "on" : "off: " + gate_off_;

    // Everything the call put on its stream is complete. Whatever the device
    // still has to do for this process was put elsewhere and outlives the call.
    uint64_t t0 = now_ns();
    cudaError_t drained = cudaDeviceSynchronize();
    uint64_t drain = now_ns() - t0;
    if (drained != cudaSuccess) {
      throw DeviceError(fault_text(drained, result.rc) + "; the failing work was not on the given stream");
    }
    if (cudaError_t pending = cudaGetLastError(); pending != cudaSuccess) {
      throw DeviceError(fault_text(pending, result.rc));
    }
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    result.extra["device_ns"] = static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
    result.extra["drain_ns"] = drain;
    if (forward == nullptr && !null_work_note_.empty()) result.extra["null_work"] = null_work_note_;
    return result;
  }

  nlohmann::json profile(const std::function<int()>& forward, const nlohmann::json& request) override {
    if (!options_.profiler && !options_.tracer) throw std::runtime_error("this runner was not started as a profiler");
    nlohmann::json out = nlohmann::json::object();
    // Where the stage's time goes, for the judge's phase_ms.
    auto t = std::chrono::steady_clock::now();
    if (activity_error_.empty()) {
      out["activity"] = trace_one_call(forward);
    } else {
      out["activity_unavailable"] = activity_error_;
    }
    out["phase_ms"]["trace"] = ms_since(t);
    if (!options_.profiler) {
      out["metrics_unavailable"] = "hardware counters are collected in a profiler runner, not in a timing runner";
      return out;
    }
    const std::vector<std::string> loaded_before = loaded_objects();
    t = std::chrono::steady_clock::now();
    if (request.value("metrics", true)) {
      if (metrics_ && metrics_->available()) {
        try {
          out["metrics"] = metrics_->collect([&] { flush_l2(); },
                                             [&] {
                                               int rc = forward();
                                               cudaError_t e = cudaStreamSynchronize(stream_);
                                               if (e != cudaSuccess) throw DeviceError(fault_text(e, rc));
                                             });
        } catch (const DeviceError&) {
          throw;
        } catch (const std::exception& e) {
          out["metrics_unavailable"] = e.what();
        }
      } else {
        out["metrics_unavailable"] = metrics_ ? metrics_->why_unavailable() : metrics_error_;
      }
      out["phase_ms"]["metrics"] = ms_since(t);
    }
    // An allocation refused while profiling fails it as it fails a call.
    if (std::string refused = allocation_guard::take_refusal(); !refused.empty()) throw DeviceError(refused);
    // Libraries CUPTI loaded while collecting, under the running filter
    // (extra_syscalls() says why that is allowed): reported, so that a new
    // one shows up in the profile rather than only as a blocked system call.
    const std::vector<std::string> loaded_after = loaded_objects();
    if (loaded_after.size() > loaded_before.size()) {
      nlohmann::json added = nlohmann::json::array();
      for (const auto& name : loaded_after) {
        if (std::find(loaded_before.begin(), loaded_before.end(), name) == loaded_before.end()) added.push_back(name);
      }
      out["libraries_loaded"] = added;
    }
    return out;
  }

 private:
  void initialize() {
    if (std::string missing = allocation_guard::install(); !missing.empty()) throw std::runtime_error(missing);
    // EAGER: see the file comment. setenv is harmless before the first
    // runtime call, which is what reads it.
    ::setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
    // Spinning synchronization: lowest latency between the GPU finishing and
    // the reply leaving, and no blocking system calls while waiting.
    cudaSetDeviceFlags(cudaDeviceScheduleSpin);
    check(cudaSetDevice(options_.device), "cudaSetDevice(" + std::to_string(options_.device) + ")");
    check(cudaFree(nullptr), "creating the CUDA context");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    load_null_kernel();
    gate_ = std::make_unique<cuda_timing::LaunchGate>();
    if (!gate_->available()) gate_off_ = gate_->why();
    warm_up();
    if (options_.profiler) {
      initialize_profiler();
    } else if (options_.tracer) {
      initialize_activity();
    }
  }

  void load_null_kernel() {
    cudaError_t e = cudaLibraryLoadData(&null_library_, kNullKernelPtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&null_kernel_, null_library_, "kforge_null_kernel");
    if (e != cudaSuccess) {
      // Without a kernel, a 4-byte memset still puts work on the stream.
      null_kernel_ = nullptr;
      null_work_note_ = "null kernel unavailable (" + error_text(e) + "); null calls use a memset";
      cudaGetLastError();
    }
    check(cudaMalloc(&null_buffer_, 256), "cudaMalloc (null-call buffer)");
  }

  void launch_null_work() {
    if (null_kernel_ != nullptr) {
      check(cudaLaunchKernel(reinterpret_cast<const void*>(null_kernel_), dim3(1), dim3(1), nullptr, 0, stream_),
            "launching the null kernel");
    } else {
      check(cudaMemsetAsync(null_buffer_, 0, 4, stream_), "null-call memset");
    }
  }

  // Work queued or running on the streams other than the harness's that a
  // candidate can reach: the legacy default stream and this thread's
  // per-thread stream (creating a stream is a forbidden import, and the
  // driver's entry points are too). Queried right after kf_forward returns,
  // so a call that put its work there and did not wait for it is seen
  // whatever the work's size (judge/leftover_work.h, foreign_stream). The
  // runner's own work never goes there. Errors are left to the drain, which
  // reports them.
  static bool foreign_work_pending() {
    return cudaStreamQuery(cudaStreamLegacy) == cudaErrorNotReady ||
           cudaStreamQuery(cudaStreamPerThread) == cudaErrorNotReady;
  }

  // One pass through every path a call uses, before the filters exist.
  void warm_up() {
    void* scratch = nullptr;
    check(cudaMalloc(&scratch, 4096), "cudaMalloc");
    if (gate_->available()) check(gate_->close(stream_), "launching the launch gate");
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    check(cudaMemsetAsync(scratch, 0, 4096, stream_), "cudaMemsetAsync");
    launch_null_work();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    if (gate_->available()) gate_->open();
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    run_as_graph(stream_, [&] { check(cudaMemsetAsync(scratch, 1, 4096, stream_), "cudaMemsetAsync (capture)"); });
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    // The per-thread stream is created on first use: here, not under a filter.
    if (foreign_work_pending()) throw DeviceError("the runner's own start-up left work on a default stream");
    check(cudaFree(scratch), "cudaFree");
  }

  // The stream-ordered allocator (cudaMallocAsync: torch_ext's torch::empty,
  // workspaces) reads /proc/self/maps when it first reserves address space,
  // which the running filter refuses (seen on the H200). So the default pool
  // and the graph-memory pool (allocations captured in graph mode) each get a
  // reservation when the arena is mapped, before any filter, and keep it: the pool's
  // release threshold is raised, and graph memory is only trimmed on request.
  // Sized from the arena (inputs and outputs of the largest case): scratch
  // tensors of a few times that are served without new reservations.
  // With a budget, each reservation is at most a quarter of it (the
  // candidate's footprint counts them, device_allowance.h).
  void warm_up_stream_ordered_memory() {
    size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    const size_t reserve = DeviceAllowance::pool_reserve(memory_limit_, free_bytes, bytes_);
    pool_reserve_ = reserve;
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, options_.device), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    void* p = nullptr;
    check(cudaMallocAsync(&p, reserve, stream_), "cudaMallocAsync (pool warm-up)");
    check(cudaFreeAsync(p, stream_), "cudaFreeAsync (pool warm-up)");
    run_as_graph(stream_, [&] {
      check(cudaMallocAsync(&p, reserve, stream_), "cudaMallocAsync (graph memory warm-up)");
      check(cudaFreeAsync(p, stream_), "cudaFreeAsync (graph memory warm-up)");
    });
  }

  // The candidate's kernels' local memory (its nvcc kernels as they
  // registered, or its CUBIN's): the driver backs the largest per-thread
  // need for every thread the GPU holds at once.
  void count_local_memory() {
    for (const auto& kernel : allocation_guard::registered_kernels()) {
      cudaFuncAttributes attributes{};
      if (cudaFuncGetAttributes(&attributes, kernel.host_stub) != cudaSuccess) {
        cudaGetLastError();  // a kernel without code for this GPU; its launch will say so
        continue;
      }
      if (attributes.localSizeBytes > local_memory_.per_thread) {
        local_memory_.kernel = kernel.name;
        local_memory_.per_thread = attributes.localSizeBytes;
      }
    }
    int per_sm = 0, sms = 0;
    cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, options_.device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, options_.device);
    local_memory_.threads = static_cast<uint64_t>(std::max(per_sm, 0)) * static_cast<uint64_t>(std::max(sms, 0));
    allocation_guard::set_local_memory(local_memory_);
    local_memory_problem_ = allocation_guard::local_memory_problem();
  }

  void initialize_profiler() {
    int l2 = 0;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, options_.device);
    flush_bytes_ = 2 * static_cast<size_t>(l2 > 0 ? l2 : 64 << 20);
    flush_ = std::make_unique<cuda_timing::ReadFlush>(flush_bytes_);
    initialize_activity();
    const char* metrics = std::getenv("KFORGE_PROFILER_METRICS");
    if (metrics != nullptr && std::string(metrics) == "0") {
      metrics_error_ = "hardware metrics disabled (KFORGE_PROFILER_METRICS=0)";
      return;
    }
    metrics_ = std::make_unique<cupti::RangeMetrics>(options_.device, cupti::default_metric_names());
  }

  // CUPTI's activity tracing, enabled and disabled once here, before the
  // sandbox exists (cupti/activity_trace.h says why).
  void initialize_activity() {
    activity_error_ = cupti::ActivityTrace::initialize();
    if (activity_error_.empty()) {
      if (auto id = cupti::ActivityTrace::stream_id(stream_)) {
        stream_id_ = *id;
      } else {
        activity_error_ = "cuptiGetStreamIdEx failed for the candidate's stream";
      }
    }
  }

  // As the judge flushes before timed calls (cuda_timing/read_flush.h).
  void flush_l2() {
    check(flush_->run(stream_), "L2 flush");
    check(cudaStreamSynchronize(stream_), "L2 flush");
  }

  // One call under CUPTI tracing (cuda_call_trace.h), after an untraced call
  // and an L2 flush. The untraced call first makes the traced one as
  // warm as a timed call: a profiler runner is a fresh process, and its first
  // call ran the H200's kernel at half the speed of later ones (CUPTI 1.92x
  // Nsight Compute's duration, on an H200). A tracing timing runner is warm
  // from its timed calls, and the judge flushed the L2 before the request,
  // as before every timed call: it traces at once.
  nlohmann::json trace_one_call(const std::function<int()>& forward) {
    if (options_.profiler) {
      int warm_rc = forward();
      if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) throw DeviceError(fault_text(e, warm_rc));
      flush_l2();
    }
    std::string started = cupti::ActivityTrace::start();
    if (!started.empty() && metrics_) {
      // Attribution matters more than counters (it catches foreign streams):
      // if tracing cannot start beside the enabled range profiler, drop the
      // profiler and try again.
      metrics_.reset();
      metrics_error_ = "range profiler dropped: CUPTI tracing could not start beside it (" + started + ")";
      started = cupti::ActivityTrace::start();
    }
    if (!started.empty()) return {{"error", started}};
    return trace_started_call(forward, {stream_, start_, stop_, stream_id_});
  }

  RunnerDeviceOptions options_;
  std::string init_error_;
  // The candidate's device memory (device_allowance.h): its limit, the pool
  // reservations counted in it, its kernels' local memory and, when that
  // does not fit, why every call fails.
  uint64_t memory_limit_ = 0;
  uint64_t pool_reserve_ = 0;
  DeviceAllowance::LocalMemory local_memory_;
  std::string local_memory_problem_;
  std::vector<void*> library_handles_;  // kept alive: see warm_up_libraries()
  cudaLibrary_t null_library_ = nullptr;
  cudaKernel_t null_kernel_ = nullptr;
  void* null_buffer_ = nullptr;
  std::string null_work_note_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
  cudaGraphExec_t graph_ = nullptr;
  std::string graph_reason_;
  std::unique_ptr<cuda_timing::LaunchGate> gate_;
  std::string gate_off_;  // why calls are not gated (empty: they are)
  // Profiler runner only.
  std::unique_ptr<cuda_timing::ReadFlush> flush_;
  size_t flush_bytes_ = 0;
  // Profiler and tracing timing runners.
  std::string activity_error_;
  uint32_t stream_id_ = 0;
  std::unique_ptr<cupti::RangeMetrics> metrics_;
  std::string metrics_error_;
};

}  // namespace

std::unique_ptr<RunnerDevice> make_cuda_runner_device(const RunnerDeviceOptions& options) {
  return std::make_unique<CudaRunnerDevice>(options);
}

}  // namespace kforge::runner
