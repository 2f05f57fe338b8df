#include <future>
#include <memory>
#include <string>
#include <utility>

#include "exec/device_pool_lanes.h"
#include "kforge/core/sha256.h"

namespace kforge::env::internal {
namespace {

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

}  // namespace

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

}  // namespace kforge::env::internal
