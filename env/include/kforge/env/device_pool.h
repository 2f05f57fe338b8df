// The Executor over every configured device (docs/execution.md, "Lanes and
// the device pool").
//
//   device   a GPU (cuda) or a CPU slot (cpu): what is taken out of the pool
//            when it keeps failing;
//   lane     one judge process and the worker thread that drives it; a GPU
//            has `lanes_per_device` of them, sharing it through the GPU gate
//            (judge/gpu_gate.h), a CPU slot has one, pinned to a core.
//
// Routing: a request goes to the device in service with the fewest
// outstanding requests (queued + running), where the first free lane of that
// device takes it. A device is taken out of service when its judge cannot
// use it (the hello says so) or after `max_system_errors` system errors in a
// row (lost judges, judges that cannot start, a broken device context); the
// last device in service is never taken out. Its queued requests move to the
// other devices, and a request that got a system error from a failing lane
// is run once more on another device; a candidate's own failure is never
// retried. Every future is fulfilled exactly once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kforge/env/executor.h"

namespace kforge::env {

struct LaneStatus {
  int device_index = 0;  // GPU index, or CPU slot number
  int lane = 0;          // within its device
  int judge_pid = 0;     // 0 while no judge runs
  int cpu = -1;          // the core a CPU slot is pinned to, -1 none
};

class DevicePool : public Executor {
 public:
  // Without waiting on any judge: {"backend", "devices": [{"index", "label",
  // "in_service", "out_reason"?, "lanes", "outstanding", "completed",
  // "system_errors_in_a_row", "retried_elsewhere"}], "retries"}.
  virtual json status() const = 0;
  virtual std::vector<LaneStatus> lanes() const = 0;
  // Devices still in service.
  virtual int devices_in_service() const = 0;
};

std::unique_ptr<DevicePool> make_device_pool(const ExecutorConfig& config);

// The hardware queues a CUDA runner's context gets by default: one, since a
// candidate has one stream and a context with one queue is torn down in
// half the time (docs/cuda-backend.md, "One hardware queue per runner").
inline constexpr int kDefaultRunnerCudaConnections = 1;

// The hardware queues each CUDA runner's context gets: the config's
// runner_cuda_connections when set (> 0), else $KFORGE_RUNNER_CUDA_CONNECTIONS
// when set (1-32: an operator's override, as $KFORGE_GATE_DIR is for the
// gate; 0: the runner leaves the variable alone, the driver's own default),
// else kDefaultRunnerCudaConnections. Throws InputError naming the variable
// when it is not a number from 0 to 32.
int resolved_runner_cuda_connections(const ExecutorConfig& config);

// The GPU indices `all_devices` means for this process: CUDA_VISIBLE_DEVICES
// when set (one per entry), else one per /proc/driver/nvidia/gpus entry.
// Empty when there is none.
std::vector<int> visible_gpu_indices();

}  // namespace kforge::env
