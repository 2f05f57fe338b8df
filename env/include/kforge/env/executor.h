// The evaluation service (docs/architecture.md#isolation).
//
// The environment host never loads candidate code. An Executor owns
// long-lived judge processes (libtorch: inputs, reference, comparison, timing
// of the reference), each of which drives sandboxed runner processes (no
// libtorch) that load the candidate and call kf_forward on buffers shared
// with the judge (shared memory on CPU, CUDA IPC on GPU).
//
// make_executor() builds a DevicePool (device_pool.h): one or more judges
// ("lanes") per configured GPU or CPU slot, requests routed to the least busy
// device. Lanes of one GPU overlap compilation, runner start-up and
// verification, while timing and profiling hold the GPU alone (the GPU gate),
// so timings do not interfere; many episodes can queue. A runner that
// crashes, hangs or exceeds its limits is killed and respawned and the
// request gets a failure report; a judge that dies is respawned too, and a
// device that keeps failing is taken out of the pool. Nothing leaks:
// processes, fds, shared memory.
#pragma once

#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kforge/env/eval.h"
#include "kforge/env/reference_probe.h"

namespace kforge::env {

// More spare profiler runners than this per judge is a typo (ExecutorConfig::profiler_spares).
inline constexpr int kMaxProfilerSpares = 4;
// Spare profiler runners per judge when neither the config nor the operator
// says: measured on an H100 (bench_rollout, one lane, half its steps
// profiled), one spare left profiles waiting 250 ms for a start-up, two 54 ms
// (3.41 against 3.61 steps/s), four 42 ms (3.66).
inline constexpr int kDefaultProfilerSpares = 2;

enum class BackendKind { kCpu, kCuda };
const std::string& backend_name(BackendKind kind);
BackendKind parse_backend(const std::string& name);  // InputError if unknown

struct ExecutorConfig {
  BackendKind backend = BackendKind::kCpu;
  int device = 0;
  // Placement (docs/execution.md, "Lanes and the device pool").
  // GPUs (cuda); empty: {device}. all_devices: every GPU this process sees.
  std::vector<int> devices;
  bool all_devices = false;
  // Judge processes per GPU, sharing it through the GPU gate (cuda).
  int lanes_per_device = 1;
  // Judge processes of the CPU backend, each pinned to its own core when the
  // process may use at least that many cores.
  int cpu_slots = 1;
  // System errors in a row (lost judges, judges that cannot start, a broken
  // device context) after which a device is taken out of the pool, its
  // queued work moving to the others. The last device in service stays.
  int max_system_errors = 3;
  // The GPU gate's lock files: shared by every kforge process on the machine
  // that uses the same directory. Empty: $KFORGE_GATE_DIR, else
  // <temp>/kforge-gpu-gate. gpu_gate false: no gate (a judge alone on its
  // GPU, or measurements of what the gate prevents).
  std::filesystem::path gate_dir;
  bool gpu_gate = true;
  // Spare timing runners each judge keeps started, so that no candidate
  // waits for a runner's start-up (judge/runner_pool.h). 0: the backend's
  // default (cuda 3: a CUDA runner takes 0.4-0.6 s to start, a candidate can
  // be judged in ~0.2 s; cpu 1). Each CUDA spare holds a context's device
  // memory.
  int runner_spares = 0;
  // The hardware work queues of each CUDA runner's context
  // (CUDA_DEVICE_MAX_CONNECTIONS, set by the runner before its context
  // exists); 0: the driver's default, 8. A context's teardown unbinds each
  // queue from the GPU: on an H100 a runner's took 76.8 ms with 8 and 35.6
  // with 1 (bench/cuda/teardown_probe), and the judge waits for it once per
  // candidate. One queue serializes only work on different streams, and a
  // candidate has one stream: the symbol allow-list gives it no other
  // (docs/cuda-backend.md, "One hardware queue per runner"). 0: the
  // operator's $KFORGE_RUNNER_CUDA_CONNECTIONS, else one queue
  // (resolved_runner_cuda_connections, device_pool.h); 8 is the driver's own.
  int runner_cuda_connections = 0;
  // Spare profiler runners each CUDA judge keeps started, so that a profile
  // does not wait for a CUPTI start-up (~0.9 s on an H100, against profiles
  // ~0.3 s apart when one lane serves many episodes). 1 to
  // kMaxProfilerSpares; 0: the operator's $KFORGE_PROFILER_SPARES, else
  // kDefaultProfilerSpares (read by the judge: judge/judge_loop.h). Each holds a context's device
  // memory, counted in the lane's budget.
  int profiler_spares = 0;
  // Timed references (baselines) kept on disk per task content, device model
  // and software versions (docs/execution.md, "Baseline cache"). Empty: none.
  std::filesystem::path baseline_cache_dir;
  // Directory with kforge-judge and kforge-runner; default: $KFORGE_TOOLS_DIR,
  // then next to the running executable, then the build tree's bin/.
  std::filesystem::path tools_dir;
  // Scratch space for runners (one sub-directory each, removed afterwards).
  // Default: a fresh directory under the system temp dir, removed with the
  // Executor.
  std::filesystem::path scratch_dir;
  // How long the judge may take to start (load libtorch, probe the device).
  double judge_startup_timeout_ms = 60000.0;
  // The judge's memory across tasks (docs/execution.md, "The judge's
  // memory"): above `judge_trim_above_bytes` of resident memory after a
  // request it returns freed memory to the system (after its first trim,
  // only once it has grown by 64 MiB since that trim); still above
  // `judge_retire_above_bytes` after that, it retires and the next request
  // starts a fresh judge. With device memory in use grown by more than
  // `judge_device_trim_above_bytes` since its first request, the CUDA judge
  // empties PyTorch's caching allocator.
  uint64_t judge_trim_above_bytes = uint64_t{1} << 30;
  uint64_t judge_retire_above_bytes = uint64_t{4} << 30;
  uint64_t judge_device_trim_above_bytes = uint64_t{8} << 30;
  // Each lane's share of its GPU's memory (docs/execution.md, "Device memory
  // per lane"): `lane_device_memory_bytes`, or 0 for an even share of the
  // card less `device_memory_reserve_bytes` among its lanes_per_device. It
  // covers the lane's judge, runners and candidate; a task that cannot fit is
  // refused at reset, a candidate allocating past its share gets its own
  // out-of-memory verdict. Whole MiB; cuda only.
  uint64_t lane_device_memory_bytes = 0;
  uint64_t device_memory_reserve_bytes = uint64_t{2} << 30;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Queues a request; the future is always fulfilled with a report (a system
  // failure becomes a report with a summary), never an exception.
  virtual std::future<EvalReport> submit(EvalRequest request) = 0;
  // Queues a run of the task's reference alone (reference_probe.h: check
  // and/or time), served in turn with evaluations, so that its timing never
  // overlaps another timed request. Always fulfilled; a system failure is a
  // report with status error.
  virtual std::future<ReferenceReport> submit_reference(ReferenceRequest request) = 0;
  // The reference check of `task` (check only; `options` gives its deadline),
  // run at most once per task content (sha256 of the task's JSON) for the
  // Executor's lifetime: every caller for the same content shares the first
  // one's result, finished or still running. A report with status error (the
  // judge could not answer) is not kept: the next call checks again.
  virtual std::shared_future<ReferenceReport> check_task(const TaskSpec& task, const EvalOptions& options) = 0;
  // Reference checks check_task() has sent to the judge (cache misses), for
  // monitoring and tests.
  virtual int reference_checks() const = 0;
  virtual BackendKind backend() const = 0;
  // Description of the device, e.g. "NVIDIA H200" (after the judge started).
  virtual std::string device_name() = 0;
  // What the judge said when it first started: the device's name (empty if
  // it could not start), how many devices of the backend it sees (-1 when it
  // never answered) and why it could not start. Waits for that first start,
  // like device_name().
  struct StartReport {
    std::string device_name;
    int device_count = -1;
    std::string error;
  };
  virtual StartReport start_report() { return {device_name(), -1, ""}; }
  // Number of judge/runner restarts so far, for monitoring and leak tests.
  virtual int restarts() const = 0;
  // The judge's process id (0 while none runs), for monitoring and
  // fault-injection tests; of the first lane when there are several.
  virtual int judge_pid() const = 0;
  // The judges' own view of their resources, queued behind pending requests:
  // per lane {"pid", "open_fds", "memfds", "spare_runners", "scratch_entries",
  //  "evaluations", "runner_faults", "reference_requests", "profiler_start"
  //  and "profiler_spares" (how its spare profiler runners start, and how
  //  many it keeps: judge_loop.h), "memory":
  //  {"rss_bytes", "peak_rss_bytes", "trims", ...}} ({"error": "..."} if it
  // cannot answer) under "lanes", the pool's state under "devices"; with a
  // single lane its fields are also at the top level.
  virtual json health() = 0;
};

// A DevicePool (device_pool.h) with the config's placement.
std::unique_ptr<Executor> make_executor(const ExecutorConfig& config);

}  // namespace kforge::env
