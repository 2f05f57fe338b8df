// DevicePool (kforge/env/device_pool.h): lanes over every configured device,
// routing, failing devices taken out, retries elsewhere, the once-per-task
// reference check and the baseline cache.
#include "kforge/env/device_pool.h"

#include <sched.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "exec/baseline_cache.h"
#include "exec/judge_lane.h"
#include "exec/tool_paths.h"
#include "kforge/core/error.h"
#include "kforge/core/remove_tree.h"
#include "kforge/core/sha256.h"

namespace kforge::env {
namespace {

using exec::JudgeLane;
using exec::LaneFault;

// check_task results kept; a report is small next to the reference run it saves.
constexpr size_t kMaxCachedChecks = 65536;

EvalReport system_report(const std::string& message) {
  EvalReport r;
  r.outcome = Outcome::kNotRun;
  r.summary = "system error: " + message;
  return r;
}

ReferenceReport reference_system_report(const std::string& message) {
  ReferenceReport r;
  r.status = ReferenceStatus::kError;
  r.problem = "system error: " + message;
  return r;
}

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

class Pool final : public DevicePool {
 public:
  explicit Pool(const ExecutorConfig& config);
  ~Pool() override;

  std::future<EvalReport> submit(EvalRequest request) override;
  std::future<ReferenceReport> submit_reference(ReferenceRequest request) override;
  std::shared_future<ReferenceReport> check_task(const TaskSpec& task, const EvalOptions& options) override;
  int reference_checks() const override { return reference_checks_.load(); }
  BackendKind backend() const override { return config_.backend; }
  std::string device_name() override;
  StartReport start_report() override;
  int restarts() const override;
  int judge_pid() const override { return lanes_.empty() ? 0 : lanes_.front()->judge->judge_pid(); }
  json health() override;
  json status() const override;
  std::vector<LaneStatus> lanes() const override;
  int devices_in_service() const override;

 private:
  // A queued request. `attempt` runs it on a lane and keeps its result (a
  // retry runs it again); `deliver` fulfils the promise with what was kept;
  // `abandon` fulfils it with a system error when it never runs. Exactly one
  // of deliver/abandon is called, once.
  struct Job {
    std::function<LaneFault(JudgeLane&)> attempt;
    std::function<void()> deliver;
    std::function<void(const std::string&)> abandon;
    bool retryable = true;  // false for health probes, which belong to one lane
    int failed_on = -1;     // the device whose lane failed it, once retried
  };
  using JobPtr = std::shared_ptr<Job>;
  using Deliveries = std::vector<std::function<void()>>;

  struct Device {
    int index = 0;
    std::string label;
    std::deque<JobPtr> queue;
    std::vector<size_t> lanes;
    int outstanding = 0;  // queued + running
    int completed = 0;
    int errors_in_a_row = 0;
    int retried_elsewhere = 0;
    bool in_service = true;
    std::string out_reason;
    std::string last_fault;  // kept in service as the last device, but failing
  };

  struct Lane {
    size_t device = 0;
    int number = 0;
    std::unique_ptr<JudgeLane> judge;
    std::deque<JobPtr> pinned;  // health probes for this lane
    bool active = true;         // its thread still serves
    std::thread thread;
  };

  void lane_loop(size_t lane_index);
  void enqueue(JobPtr job);
  // Puts the job on the device in service with the fewest outstanding
  // requests other than `exclude` (or `exclude` itself when it is the only one).
  void route_locked(const JobPtr& job, int exclude);
  void settle_locked(size_t device, const JobPtr& job, LaneFault fault, Deliveries* deliveries);
  void take_out_locked(size_t device, const std::string& reason);
  bool other_device_in_service_locked(size_t device) const;

  ExecutorConfig config_;
  std::filesystem::path scratch_;
  bool own_scratch_ = false;
  std::string setup_error_;  // tools not found, ...: every request reports it
  std::optional<exec::BaselineCache> baselines_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<Device> devices_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  size_t next_route_ = 0;  // rotates ties between equally busy devices
  int retries_ = 0;
  size_t lanes_started_ = 0;  // lanes that made their first judge start attempt
  std::condition_variable started_cv_;

  std::mutex checks_mutex_;
  std::map<std::string, std::shared_future<ReferenceReport>> checks_;
  std::deque<std::string> check_order_;
  std::atomic<int> reference_checks_{0};
};

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

std::future<EvalReport> Pool::submit(EvalRequest request) {
  auto promise = std::make_shared<std::promise<EvalReport>>();
  auto result = std::make_shared<EvalReport>();
  auto req = std::make_shared<EvalRequest>(std::move(request));
  auto job = std::make_shared<Job>();
  job->attempt = [req, result](JudgeLane& lane) { return lane.eval(*req, result.get()); };
  job->deliver = [promise, result] { promise->set_value(std::move(*result)); };
  job->abandon = [promise](const std::string& why) { promise->set_value(system_report(why)); };
  std::future<EvalReport> future = promise->get_future();
  enqueue(std::move(job));
  return future;
}

std::future<ReferenceReport> Pool::submit_reference(ReferenceRequest request) {
  auto promise = std::make_shared<std::promise<ReferenceReport>>();
  auto result = std::make_shared<ReferenceReport>();
  auto req = std::make_shared<ReferenceRequest>(std::move(request));
  auto job = std::make_shared<Job>();
  exec::BaselineCache* cache = baselines_ ? &*baselines_ : nullptr;
  job->attempt = [req, result, cache](JudgeLane& lane) {
    if (cache == nullptr || !req->time) return lane.reference(*req, result.get());
    // The key needs the device and versions this lane's judge reported.
    std::string error;
    LaneFault fault = LaneFault::kNone;
    if (!lane.ensure_judge(&error, &fault)) {
      *result = reference_system_report(error);
      return fault;
    }
    const std::string key = exec::BaselineCache::key(*req, lane.device_name(), lane.versions());
    if (std::optional<ReferenceReport> hit = cache->load(key)) {
      *result = std::move(*hit);
      (*result->timing)["cache"] = {{"hit", true}, {"key", key}};
      return LaneFault::kNone;
    }
    fault = lane.reference(*req, result.get());
    if (fault == LaneFault::kNone && result->ok() && result->timing) {
      cache->store(key, *result);
      (*result->timing)["cache"] = {{"hit", false}, {"key", key}};
    }
    return fault;
  };
  job->deliver = [promise, result] { promise->set_value(std::move(*result)); };
  job->abandon = [promise](const std::string& why) { promise->set_value(reference_system_report(why)); };
  std::future<ReferenceReport> future = promise->get_future();
  enqueue(std::move(job));
  return future;
}

std::shared_future<ReferenceReport> Pool::check_task(const TaskSpec& task, const EvalOptions& options) {
  const std::string key = sha256_hex(to_json(task).dump());
  {
    std::lock_guard<std::mutex> lock(checks_mutex_);
    if (auto it = checks_.find(key); it != checks_.end()) return it->second;
  }
  auto promise = std::make_shared<std::promise<ReferenceReport>>();
  std::shared_future<ReferenceReport> future = promise->get_future().share();
  {
    std::lock_guard<std::mutex> lock(checks_mutex_);
    // Another caller may have asked between the two locks: theirs wins.
    if (auto it = checks_.find(key); it != checks_.end()) return it->second;
    checks_.emplace(key, future);
    check_order_.push_back(key);
    while (check_order_.size() > kMaxCachedChecks) {
      checks_.erase(check_order_.front());
      check_order_.pop_front();
    }
  }
  // A system error says nothing about the task: forget it before anyone can
  // see it, so that the next call asks a judge again.
  auto deliver = [this, promise, key](ReferenceReport report) {
    if (report.status == ReferenceStatus::kError) {
      std::lock_guard<std::mutex> lock(checks_mutex_);
      checks_.erase(key);
    }
    promise->set_value(std::move(report));
  };
  auto result = std::make_shared<ReferenceReport>();
  auto req = std::make_shared<ReferenceRequest>();
  req->task = task;
  req->check = true;
  req->time = false;
  req->options = options;
  auto job = std::make_shared<Job>();
  job->attempt = [this, req, result](JudgeLane& lane) {
    ++reference_checks_;
    return lane.reference(*req, result.get());
  };
  job->deliver = [deliver, result] { deliver(std::move(*result)); };
  job->abandon = [deliver](const std::string& why) { deliver(reference_system_report(why)); };
  enqueue(std::move(job));
  return future;
}

std::string Pool::device_name() {
  std::unique_lock<std::mutex> lock(mutex_);
  started_cv_.wait(lock, [this] { return lanes_started_ >= lanes_.size(); });
  for (const auto& dev : devices_) {
    if (!dev.in_service) continue;
    for (size_t l : dev.lanes) {
      std::string name = lanes_[l]->judge->device_name();
      if (!name.empty()) return name;
    }
  }
  return "";
}

Executor::StartReport Pool::start_report() {
  std::unique_lock<std::mutex> lock(mutex_);
  started_cv_.wait(lock, [this] { return lanes_started_ >= lanes_.size(); });
  StartReport r;
  if (!setup_error_.empty()) {
    r.error = setup_error_;
    return r;
  }
  // The first device in service that started names the pool (as
  // device_name()); the count is the same for every judge of the machine.
  for (const auto& dev : devices_) {
    for (size_t l : dev.lanes) {
      const JudgeLane& judge = *lanes_[l]->judge;
      if (r.device_count < 0) r.device_count = judge.device_count();
      if (r.device_name.empty() && dev.in_service) r.device_name = judge.device_name();
      if (r.error.empty()) r.error = judge.start_error();
    }
  }
  if (!r.device_name.empty()) r.error.clear();
  return r;
}

int Pool::restarts() const {
  int n = 0;
  for (const auto& lane : lanes_) n += lane->judge->restarts();
  return n;
}

json Pool::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  json devices = json::array();
  for (const auto& dev : devices_) {
    json d = {{"index", dev.index},
              {"label", dev.label},
              {"in_service", dev.in_service},
              {"lanes", dev.lanes.size()},
              {"outstanding", dev.outstanding},
              {"completed", dev.completed},
              {"system_errors_in_a_row", dev.errors_in_a_row},
              {"retried_elsewhere", dev.retried_elsewhere}};
    if (!dev.in_service) d["out_reason"] = dev.out_reason;
    if (dev.in_service && dev.errors_in_a_row > 0) d["last_fault"] = dev.last_fault;
    devices.push_back(d);
  }
  json s = {{"backend", backend_name(config_.backend)}, {"devices", devices}, {"retries", retries_}};
  if (!setup_error_.empty()) s["error"] = setup_error_;
  return s;
}

std::vector<LaneStatus> Pool::lanes() const {
  std::vector<LaneStatus> out;
  for (const auto& lane : lanes_) {
    out.push_back({devices_[lane->device].index, lane->number, lane->judge->judge_pid(), lane->judge->cpu()});
  }
  return out;
}

int Pool::devices_in_service() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int n = 0;
  for (const auto& dev : devices_) n += dev.in_service;
  return n;
}

json Pool::health() {
  if (!setup_error_.empty()) return {{"error", setup_error_}};
  std::vector<std::future<json>> answers;
  std::vector<size_t> asked;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < lanes_.size(); ++i) {
      Lane& lane = *lanes_[i];
      if (!lane.active || stopping_) continue;
      auto promise = std::make_shared<std::promise<json>>();
      auto result = std::make_shared<json>();
      auto job = std::make_shared<Job>();
      job->retryable = false;
      job->attempt = [result](JudgeLane& l) {
        *result = l.health();
        return LaneFault::kNone;
      };
      job->deliver = [promise, result] { promise->set_value(std::move(*result)); };
      job->abandon = [promise](const std::string& why) { promise->set_value({{"error", why}}); };
      answers.push_back(promise->get_future());
      asked.push_back(i);
      lane.pinned.push_back(std::move(job));
    }
  }
  cv_.notify_all();
  json out = status();
  json lanes = json::array();
  size_t a = 0;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    json h;
    if (a < asked.size() && asked[a] == i) {
      h = answers[a++].get();
    } else {
      h = {{"error", "device out of service: " + devices_[lanes_[i]->device].out_reason}};
    }
    h["device_index"] = devices_[lanes_[i]->device].index;
    h["lane"] = lanes_[i]->number;
    lanes.push_back(h);
  }
  if (lanes.size() == 1) {
    for (const auto& [k, v] : lanes[0].items()) out[k] = v;
  }
  out["lanes"] = lanes;
  return out;
}

}  // namespace

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

std::unique_ptr<DevicePool> make_device_pool(const ExecutorConfig& config) { return std::make_unique<Pool>(config); }

}  // namespace kforge::env
