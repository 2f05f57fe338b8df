#include <string>
#include <vector>

#include "exec/device_pool_lanes.h"

namespace kforge::env::internal {

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

}  // namespace kforge::env::internal
