// DevicePool (kforge/env/device_pool.h): lanes over every configured device,
// routing, failing devices taken out, retries elsewhere. The requests
// themselves (with the once-per-task reference check and the baseline cache)
// are in device_pool_requests.cpp, the pool's status in device_pool_status.cpp.
#include "kforge/env/device_pool.h"

#include <sched.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "exec/baseline_cache.h"
#include "exec/device_pool_lanes.h"
#include "exec/judge_lane.h"
#include "exec/tool_paths.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"

namespace kforge::env {
namespace {

std::filesystem::path make_private_scratch() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kforge-exec-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw SystemError("cannot create a scratch dir under " + std::filesystem::temp_directory_path().string());
  }
  return pattern;
}

std::filesystem::path default_gate_dir() {
  if (const char* env = std::getenv("KFORGE_GATE_DIR"); env != nullptr && *env != '\0') return env;
  return std::filesystem::temp_directory_path() / "kforge-gpu-gate";
}

// The cores this process may run on, in order.
std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  return cores;
}

}  // namespace

namespace internal {

Pool::Pool(const ExecutorConfig& config) : config_(config) {
  std::vector<int> indices;
  const bool cuda = config.backend == BackendKind::kCuda;
  if (cuda) {
    indices = config.all_devices ? visible_gpu_indices() : config.devices;
    if (indices.empty() && !config.all_devices) indices = {config.device};
  } else {
    for (int s = 0; s < std::max(config.cpu_slots, 1); ++s) indices.push_back(s);
  }
  exec::JudgeLaunch base;
  base.backend = backend_name(config.backend);
  base.startup_timeout_ms = config.judge_startup_timeout_ms;
  base.trim_above_bytes = config.judge_trim_above_bytes;
  base.retire_above_bytes = config.judge_retire_above_bytes;
  base.device_trim_above_bytes = config.judge_device_trim_above_bytes;
  base.runner_spares = config.runner_spares;
  base.profiler_spares = config.profiler_spares;
  base.lane_device_memory_bytes = config.lane_device_memory_bytes;
  base.device_memory_reserve_bytes = config.device_memory_reserve_bytes;
  try {
    if (indices.empty()) {
      throw SystemError(
          "placement devices: all found no GPU (CUDA_VISIBLE_DEVICES is unset or empty and "
          "/proc/driver/nvidia/gpus lists none)");
    }
    exec::ToolPaths tools = exec::resolve_tool_paths(config.tools_dir);
    base.judge = tools.judge;
    base.runner = tools.runner;
    if (config.scratch_dir.empty()) {
      scratch_ = make_private_scratch();
      own_scratch_ = true;
    } else {
      scratch_ = config.scratch_dir;
      std::filesystem::create_directories(scratch_);
    }
    if (cuda && config.gpu_gate) base.gate_dir = config.gate_dir.empty() ? default_gate_dir() : config.gate_dir;
    if (cuda) base.runner_cuda_connections = resolved_runner_cuda_connections(config);
    if (!config.baseline_cache_dir.empty()) baselines_.emplace(config.baseline_cache_dir);
  } catch (const std::exception& e) {
    setup_error_ = e.what();
    return;
  }
  // CPU slots are pinned one per core when the process may use that many.
  const std::vector<int> cores = cuda ? std::vector<int>{} : allowed_cores();
  const bool pin = !cuda && static_cast<int>(cores.size()) >= static_cast<int>(indices.size()) && indices.size() > 1;
  const int lanes_per_device = cuda ? std::max(config.lanes_per_device, 1) : 1;
  for (size_t d = 0; d < indices.size(); ++d) {
    Device dev;
    dev.index = indices[d];
    dev.label = cuda ? "cuda:" + std::to_string(indices[d]) : "cpu slot " + std::to_string(indices[d]);
    for (int l = 0; l < lanes_per_device; ++l) {
      auto lane = std::make_unique<Lane>();
      lane->device = d;
      lane->number = l;
      exec::JudgeLaunch launch = base;
      launch.device = cuda ? indices[d] : 0;
      launch.cpu = pin ? cores[d] : -1;
      launch.lanes_on_device = lanes_per_device;
      launch.scratch = scratch_ / ("dev" + std::to_string(indices[d]) + "-lane" + std::to_string(l));
      lane->judge = std::make_unique<JudgeLane>(launch, launch.gate_dir.empty() ? 1 : lanes_per_device);
      dev.lanes.push_back(lanes_.size());
      lanes_.push_back(std::move(lane));
    }
    devices_.push_back(std::move(dev));
  }
  for (size_t i = 0; i < lanes_.size(); ++i) lanes_[i]->thread = std::thread([this, i] { lane_loop(i); });
}

Pool::~Pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& lane : lanes_) lane->judge->interrupt();
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
  std::vector<JobPtr> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& dev : devices_) {
      left.insert(left.end(), dev.queue.begin(), dev.queue.end());
      dev.queue.clear();
    }
    for (auto& lane : lanes_) {
      left.insert(left.end(), lane->pinned.begin(), lane->pinned.end());
      lane->pinned.clear();
    }
  }
  for (auto& job : left) job->abandon("executor is shutting down");
  lanes_.clear();  // stops any judge still running
  if (own_scratch_) remove_tree(scratch_);
}

void Pool::lane_loop(size_t lane_index) {
  Lane& lane = *lanes_[lane_index];
  Device& dev = devices_[lane.device];
  // The judge starts eagerly, so that device_name() and the first request do
  // not wait for libtorch.
  std::string error;
  LaneFault fault = LaneFault::kNone;
  const bool started = lane.judge->ensure_judge(&error, &fault);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++lanes_started_;
    if (!started) {
      ++dev.errors_in_a_row;
      dev.last_fault = error;
      if (fault == LaneFault::kUnusable || dev.errors_in_a_row >= config_.max_system_errors) {
        take_out_locked(lane.device, std::string(exec::lane_fault_name(fault)) + ": " + error);
      }
    }
  }
  started_cv_.notify_all();
  cv_.notify_all();

  while (true) {
    JobPtr job;
    bool pinned = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !lane.pinned.empty() || !dev.in_service || !dev.queue.empty(); });
      if (stopping_) break;
      if (!lane.pinned.empty()) {
        job = std::move(lane.pinned.front());
        lane.pinned.pop_front();
        pinned = true;
      } else if (!dev.in_service) {
        break;
      } else {
        job = std::move(dev.queue.front());
        dev.queue.pop_front();
      }
    }
    const LaneFault f = job->attempt(*lane.judge);
    Deliveries deliveries;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pinned) {
        deliveries.push_back(job->deliver);
      } else {
        --dev.outstanding;
        settle_locked(lane.device, job, f, &deliveries);
      }
    }
    cv_.notify_all();
    for (auto& d : deliveries) d();
  }
  std::deque<JobPtr> left;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lane.active = false;
    left.swap(lane.pinned);
    why = stopping_ ? "executor is shutting down" : "device out of service: " + dev.out_reason;
  }
  for (auto& job : left) job->abandon(why);
  lane.judge->stop();
}

void Pool::settle_locked(size_t d, const JobPtr& job, LaneFault fault, Deliveries* deliveries) {
  Device& dev = devices_[d];
  if (fault == LaneFault::kNone || stopping_) {
    if (fault == LaneFault::kNone) dev.errors_in_a_row = 0;
    ++dev.completed;
    deliveries->push_back(job->deliver);
    return;
  }
  ++dev.errors_in_a_row;
  dev.last_fault = exec::lane_fault_name(fault);
  if (fault == LaneFault::kUnusable || dev.errors_in_a_row >= config_.max_system_errors) {
    take_out_locked(d, fault == LaneFault::kUnusable
                           ? std::string("its judge cannot use the device")
                           : std::to_string(dev.errors_in_a_row) +
                                 " system errors in a row, the last: " + exec::lane_fault_name(fault));
  }
  // A broken context is noticed after the report, which is the candidate's
  // verdict: delivered as it is.
  if (fault != LaneFault::kRetired && job->retryable && job->failed_on < 0 && other_device_in_service_locked(d)) {
    job->failed_on = static_cast<int>(d);
    ++dev.retried_elsewhere;
    ++retries_;
    route_locked(job, static_cast<int>(d));
    cv_.notify_all();
    return;
  }
  ++dev.completed;
  deliveries->push_back(job->deliver);
}

bool Pool::other_device_in_service_locked(size_t d) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (i != d && devices_[i].in_service) return true;
  }
  return false;
}

void Pool::take_out_locked(size_t d, const std::string& reason) {
  Device& dev = devices_[d];
  if (!dev.in_service) return;
  if (!other_device_in_service_locked(d)) {
    // Nowhere else to go: it keeps serving, and its failures are the
    // requests' system errors, as with a single device.
    dev.last_fault = reason;
    return;
  }
  dev.in_service = false;
  dev.out_reason = reason;
  std::fprintf(stderr, "kforge: device %s taken out of the pool: %s; its queued requests move to the others\n",
               dev.label.c_str(), reason.c_str());
  std::deque<JobPtr> queued;
  queued.swap(dev.queue);
  for (auto& job : queued) {
    --dev.outstanding;
    route_locked(job, static_cast<int>(d));
  }
  cv_.notify_all();
}

void Pool::route_locked(const JobPtr& job, int exclude) {
  int best = -1;
  const size_t n = devices_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_route_ + k) % n;
    if (!devices_[i].in_service || static_cast<int>(i) == exclude) continue;
    if (best < 0 || devices_[i].outstanding < devices_[static_cast<size_t>(best)].outstanding)
      best = static_cast<int>(i);
  }
  if (best < 0) best = exclude >= 0 ? exclude : 0;  // the last device in service
  next_route_ = (static_cast<size_t>(best) + 1) % n;
  Device& dev = devices_[static_cast<size_t>(best)];
  dev.queue.push_back(job);
  ++dev.outstanding;
}

void Pool::enqueue(JobPtr job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_ && setup_error_.empty()) {
      route_locked(job, -1);
      cv_.notify_all();
      return;
    }
  }
  job->abandon(setup_error_.empty() ? "executor is shutting down" : setup_error_);
}

}  // namespace internal

int resolved_runner_cuda_connections(const ExecutorConfig& config) {
  if (config.runner_cuda_connections > 0) return config.runner_cuda_connections;
  const char* env = std::getenv("KFORGE_RUNNER_CUDA_CONNECTIONS");
  if (env == nullptr || *env == '\0') return kDefaultRunnerCudaConnections;
  const std::string value = env;
  const int n = value.size() <= 2 && value.find_first_not_of("0123456789") == std::string::npos ? std::stoi(value) : -1;
  if (n < 0 || n > 32) {
    throw InputError("KFORGE_RUNNER_CUDA_CONNECTIONS is \"" + value.substr(0, 32) +
                     "\": give a number of hardware queues from 1 to 32, 0 for the driver's own default, or unset "
                     "it for the default of " +
                     std::to_string(kDefaultRunnerCudaConnections));
  }
  return n;
}

std::vector<int> visible_gpu_indices() {
  std::vector<int> out;
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES"); env != nullptr) {
    // One index per entry (ids or UUIDs); an empty or "-1" list hides them all.
    std::string list = env;
    int n = 0;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item.empty() || item == "-1") break;
      out.push_back(n++);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    (void)e;
    out.push_back(n++);
  }
  return out;
}

std::unique_ptr<DevicePool> make_device_pool(const ExecutorConfig& config) {
  return std::make_unique<internal::Pool>(config);
}

}  // namespace kforge::env
