// The DevicePool implementation's shared declaration (device_pool.cpp: lanes,
// routing and faults; device_pool_requests.cpp: requests and the
// once-per-task reference check; device_pool_status.cpp: names, status and
// health). Internal to those files.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "exec/baseline_cache.h"
#include "exec/judge_lane.h"
#include "kforge/env/device_pool.h"

namespace kforge::env::internal {

using exec::JudgeLane;
using exec::LaneFault;

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

}  // namespace kforge::env::internal
