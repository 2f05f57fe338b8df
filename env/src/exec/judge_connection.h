// The env host's handle on one judge process: start it and wait for its
// hello, exchange frames under deadlines, and stop it (politely, then
// SIGKILL). Any failure of the judge surfaces as JudgeFailure with a message
// that says what happened, for the report of the request that was in flight.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "ipc/child_process.h"
#include "ipc/deadline.h"
#include "kforge/core/unique_fd.h"

namespace kforge::exec {

class JudgeFailure : public std::runtime_error {
 public:
  explicit JudgeFailure(const std::string& what, bool timed_out = false)
      : std::runtime_error(what), timed_out_(timed_out) {}
  // The judge did not answer within the request's deadline (and was killed).
  bool timed_out() const { return timed_out_; }

 private:
  bool timed_out_ = false;
};

struct JudgeLaunch {
  std::filesystem::path judge, runner, scratch;
  std::string backend = "cpu";
  int device = 0;
  double startup_timeout_ms = 60000;
  uint64_t trim_above_bytes = uint64_t{1} << 30;
  uint64_t retire_above_bytes = uint64_t{4} << 30;
  uint64_t device_trim_above_bytes = uint64_t{8} << 30;
  std::filesystem::path gate_dir;   // the GPU gate's lock files; empty: none
  int cpu = -1;                     // the core to pin the judge (and its runners) to; -1: none
  int runner_spares = 0;            // ExecutorConfig::runner_spares; 0: the judge's default
  int runner_cuda_connections = 0;  // ExecutorConfig::runner_cuda_connections; 0: the driver's default
  int profiler_spares = 0;          // ExecutorConfig::profiler_spares; 0: the judge reads its environment
  // The lane's share of its GPU's memory (cuda; judge/lane_memory_budget.h):
  // the budget (0: an even share), the reserve, the pool's lanes on the GPU.
  uint64_t lane_device_memory_bytes = 0;
  uint64_t device_memory_reserve_bytes = uint64_t{2} << 30;
  int lanes_on_device = 1;
};

class JudgeConnection {
 public:
  // How long a starting judge may queue for the GPU gate (behind other
  // judges' exclusive parts) before its start-up limit begins.
  static constexpr double kGateWaitLimitMs = 600000;
  JudgeConnection() = default;
  ~JudgeConnection() { stop(); }
  JudgeConnection(const JudgeConnection&) = delete;
  JudgeConnection& operator=(const JudgeConnection&) = delete;

  // Spawns the judge and reads its hello. JudgeFailure if it does not start,
  // or starts and reports that its device is unusable (`fatal()` then says so).
  void start(const JudgeLaunch& launch);
  nlohmann::json exchange(const nlohmann::json& message, ipc::Deadline deadline);
  // Asks the judge to exit, waits briefly, then kills it; reaps it either way.
  void stop();
  // Makes a blocked exchange() on another thread fail at once (for shutdown).
  void interrupt();

  bool running() const { return child_.running(); }
  pid_t pid() const { return child_.pid(); }
  const std::string& device_name() const { return device_name_; }
  // What the judge's measurements depend on (JudgeDevice::versions()).
  const nlohmann::json& versions() const { return versions_; }
  // Devices of the backend the judge reported in its last hello, also when it
  // could not use the one asked for; -1 before any hello.
  int device_count() const { return device_count_; }
  // The device itself is unusable (e.g. CUDA backend not built), or the judge
  // is of another build: restarting helps nothing. `fatal_reason()` says why.
  bool fatal() const { return fatal_; }
  const std::string& fatal_reason() const { return fatal_reason_; }

 private:
  [[noreturn]] void fail(const std::string& what, bool timed_out = false);
  void refuse_another_build(const JudgeLaunch& launch, const nlohmann::json& hello);

  ipc::ChildProcess child_;
  UniqueFd control_;
  std::mutex control_mutex_;  // guards interrupt() against reset of control_
  std::string device_name_;
  nlohmann::json versions_ = nlohmann::json::object();
  int device_count_ = -1;
  bool fatal_ = false;
  std::string fatal_reason_;
};

}  // namespace kforge::exec
