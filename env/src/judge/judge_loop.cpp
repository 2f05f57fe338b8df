#include "judge/judge_loop.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "ipc/build_identity.h"
#include "ipc/wire.h"
#include "judge/evaluation.h"
#include "judge/gpu_gate.h"
#include "judge/json_fields.h"
#include "judge/judge_device.h"
#include "judge/reference_cache.h"
#include "judge/reference_request.h"
#include "judge/runner_pool.h"
#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"
#include "kforge/env/eval.h"
#include "kforge/env/reference_probe.h"

namespace kforge::judge {
namespace {
// Up to 20 ms: longer than the judge's work between two timed calls of an
// L1-sized task, so that neither end of a timed exchange sleeps.
constexpr int kCudaReplySpinUs = 20000;
// Spare timing runners of a CUDA judge: a start-up takes 0.4-0.6 s alone and
// longer when several lanes start runners at once (8 at once: 1.9 s on an
// H100), while a candidate can be judged in ~0.2 s; three ready spares keep
// take() from waiting at that pace. Each holds a CUDA context (device memory:
// docs/cuda-backend.md, "Pools"); JudgeLoopConfig::runner_spares overrides.
constexpr int kDefaultCudaSpares = 3;

using ipc::Deadline;
using nlohmann::json;

// The executor is always reading when we answer; this only bounds a broken one.
constexpr double kSendDeadlineMs = 30000;

// On the GPU a timing runner starts beside timed work (runner_pool.h). On
// the CPU its start-up would run on the core the candidate is timed on (a
// slot's judge and runners share one pinned core), so it waits until the
// timing is over, as a profiler runner does; a CPU runner starts in
// milliseconds, so nothing waits for it in practice.
RunnerPool::StartUp timing_runner_start_up(const std::string& backend) {
  return backend == "cuda" ? RunnerPool::StartUp::kBesideTiming : RunnerPool::StartUp::kOutsideTiming;
}

void send(int fd, const json& body) { ipc::send_frame(fd, body, Deadline::after_ms(kSendDeadlineMs)); }

json health(const JudgeLoopConfig& config, const RunnerPool& pool, const EvaluationCounters& counters,
            int reference_requests, JudgeDevice* device, const MemoryBound& memory, const ReferenceCache& references) {
  int open_fds = 0, memfds = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    ++open_fds;
    std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (target.rfind("/memfd:", 0) == 0) ++memfds;
  }
  int scratch_entries = 0;
  for (auto it = std::filesystem::directory_iterator(config.scratch, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    ++scratch_entries;
  }
  json reply = {{"type", "health"},
                {"pid", ::getpid()},
                {"open_fds", open_fds - 1},  // minus the directory iterator's own descriptor
                {"memfds", memfds},
                {"spare_runners", pool.spares()},
                {"scratch_entries", scratch_entries},
                {"evaluations", counters.evaluations},
                {"runner_faults", counters.runner_faults},
                {"reference_requests", reference_requests},
                {"profiler_start", config.profiler_starts_beside_timing ? "beside_timing" : "outside_timing"},
                {"profiler_spares", config.profiler_spares},
                {"trace_in_timing_runner", config.trace_in_timing_runner}};
  reply["device"] = device->health();
  reply["memory"] = memory.to_json();
  reply["reference_cache"] = references.to_json();
  if (const auto& lane = device->lane_memory()) reply["device_memory"] = lane->to_json();
  return reply;
}

// Between requests: returns once the executor has sent something (or closed
// the channel). While spares are still starting, the judge holds a share of
// the GPU gate on their behalf, so no judge on this GPU times anything beside
// their start-up, and reads their `started` as it arrives; once none is
// starting it holds nothing.
void wait_between_requests(int control_fd, GpuGate* gate, RunnerPool* pool, RunnerPool* profilers) {
  constexpr int kPollMs = 1000;  // also how often a spare that never starts is checked
  while (true) {
    std::vector<int> fds = pool->collect_started();
    if (profilers != nullptr) {
      std::vector<int> more = profilers->collect_started();
      fds.insert(fds.end(), more.begin(), more.end());
    }
    if (fds.empty()) {
      gate->release();
      return;
    }
    gate->shared();
    std::vector<pollfd> p = {{control_fd, POLLIN, 0}};
    for (int fd : fds) p.push_back({fd, POLLIN, 0});
    if (::poll(p.data(), p.size(), kPollMs) > 0 && p[0].revents != 0) return;
  }
}

env::EvalReport system_failure(const std::string& message) {
  env::EvalReport r;
  r.outcome = Outcome::kNotRun;
  r.summary = "system error: " + message;
  return r;
}

// Spare timing runners the judge keeps ready (RunnerPool; kDefaultCudaSpares).
int spare_runners(const JudgeLoopConfig& config) {
  if (config.runner_spares > 0) return config.runner_spares;
  return config.backend == "cuda" ? kDefaultCudaSpares : 1;
}

// The judge's device and the GPU gate it shares with other judges on it;
// `error` says why there is no device.
struct OpenedDevice {
  std::unique_ptr<JudgeDevice> device;
  std::string error;
  std::string gate_key;
};

OpenedDevice open_device(const JudgeLoopConfig& config, int control_fd, GpuGate* gate) {
  OpenedDevice opened;
  try {
    if (!config.gate_dir.empty()) opened.gate_key = gpu_gate_key(config.backend, config.device);
    if (!opened.gate_key.empty()) *gate = GpuGate(config.gate_dir, opened.gate_key);
    // Creating our context is GPU work like a runner's start-up. Queueing
    // for the gate can take several other candidates' timings: the executor
    // hears that we wait, so that the wait does not count as our start-up.
    if (gate->enabled()) send(control_fd, {{"type", "waiting"}, {"for", "gpu_gate"}});
    gate->shared();
    opened.device = make_judge_device(config.backend, config.device);
    if (config.backend == "cuda") {
      // The lane's share of the card (lane_memory_budget.h): a placement
      // whose lanes cannot fit is this device's start-up error.
      opened.device->set_lane_memory(plan_lane_memory(config.lane_memory, opened.device->name(),
                                                      opened.device->memory_bytes(), opened.device->flush_bytes(),
                                                      lane_contexts(spare_runners(config), config.profiler_spares)));
    }
  } catch (const std::exception& e) {
    opened.device.reset();
    opened.error = e.what();
  }
  return opened;
}

json hello_message(const JudgeLoopConfig& config, const OpenedDevice& opened, const GpuGate& gate) {
  json hello = {
      {"type", "hello"},
      {"ok", opened.device != nullptr},
      {"protocol", ipc::announced_protocol_version(ipc::kJudgeProtocolVersion, ipc::kTestOnlyJudgeProtocolVariable)},
      {"build", ipc::build_id()},
      {"backend", config.backend},
      {"pid", ::getpid()},
      {"device_count", judge_device_count(config.backend)}};
  if (opened.device) {
    hello["device"] = opened.device->name();
    hello["versions"] = opened.device->versions();
    // Which lock files: judges that print the same name share the GPU.
    hello["gate"] = gate.enabled() ? (config.gate_dir / GpuGate::file_key(opened.gate_key)).string() : "";
    if (const auto& lane = opened.device->lane_memory()) hello["device_memory"] = lane->to_json();
  } else {
    hello["error"] = opened.error;
  }
  return hello;
}

// While a request waits for the GPU gate (other judges' timings), the
// executor hears `waiting {for: gpu_gate, id, ms}` every kNoticeEveryMs and
// moves the request's deadline by `ms`, as the judge moves its own
// (evaluation.cpp, add_gate_wait); without it, a judge queued behind other
// processes' timings was killed as hung (judge_connection.cpp).
class QueueNotices {
 public:
  static constexpr double kNoticeEveryMs = 2000;
  QueueNotices(GpuGate* gate, int control_fd, json id) : gate_(gate) {
    gate_->set_wait_notice(
        [control_fd, id = std::move(id)](double ms) {
          try {
            send(control_fd, {{"type", "waiting"}, {"for", "gpu_gate"}, {"id", id}, {"ms", ms}});
          } catch (const std::exception&) {
            // The executor is gone or not reading: the request's reply will
            // fail the same way, and that ends the judge.
          }
        },
        kNoticeEveryMs);
  }
  ~QueueNotices() { gate_->set_wait_notice(nullptr, 0); }
  QueueNotices(const QueueNotices&) = delete;
  QueueNotices& operator=(const QueueNotices&) = delete;

 private:
  GpuGate* gate_;
};

// Requests, one at a time, on an open device: the runner pools, the counters
// the executor reads and the memory bound that retires the judge.
class RequestServer {
 public:
  RequestServer(const JudgeLoopConfig& config, int control_fd, JudgeDevice* device, GpuGate* gate)
      : control_fd_(control_fd),
        device_(device),
        gate_(gate),
        config_(config),
        // CUDA exchanges spin for their replies (RunnerProcess::Config::reply_spin_us);
        // CPU ones sleep: there the judge's spinning would take a core from the
        // candidate, and the CPU clock, not the round trip, is what is timed.
        reply_spin_us_(config.backend == "cuda" ? kCudaReplySpinUs : 0),
        pool_({config.runner, config.scratch, config.backend, config.device, false, reply_spin_us_,
               config.runner_cuda_connections, config.trace_in_timing_runner},
              spare_runners(config), timing_runner_start_up(config.backend)),
        memory_(config.memory) {}

  // Serves until the executor goes or says shutdown; the exit code.
  int serve();

 private:
  // Each returns the exit code when the judge must end after the request.
  std::optional<int> serve_eval(const json& msg);
  std::optional<int> serve_reference(const json& msg);
  // After a request's own work, before its reply is sent: why this judge
  // must retire (memory_bound.h), if it must, given the request's context
  // check. Which of the two it is matters to the device pool: a broken
  // context counts against the device, a judge grown too big does not.
  std::string retirement(std::string context_error, bool* device_broken);
  // The judge's own context (JudgeDevice::context_error) checked under a
  // share of the gate, the one the request holds if it still holds one: the
  // check runs work on the GPU, which never goes beside another judge's
  // timing. The share is let go before the next request (wait_between_requests).
  std::string context_check();
  static std::optional<int> exit_if_retired(const std::string& broken);
  // Before timing anything, every spare of this judge must have started.
  void settle_all(ipc::Deadline deadline) {
    pool_.settle(deadline);
    if (profilers_) profilers_->settle(deadline);
  }

  int control_fd_;
  JudgeDevice* device_;
  GpuGate* gate_;
  const JudgeLoopConfig& config_;
  const int reply_spin_us_;
  RunnerPool pool_;
  std::unique_ptr<RunnerPool> profilers_;
  EvaluationCounters counters_;
  MemoryBound memory_;
  // Inputs and references kept for the next candidates of a task
  // (reference_cache.h); each request bounds it (task_fit.h).
  ReferenceCache references_;
  int reference_requests_ = 0;
  double last_refill_ms_ = 0;
};

int RequestServer::serve() {
  pool_.refill();
  // CUDA profile requests run CUPTI in runners of their own (profile.h).
  // Their spares (JudgeLoopConfig::profiler_spares) start now, so that the
  // first profile does not wait for a CUPTI start-up, and each is replaced
  // during the profile that takes it.
  if (config_.backend == "cuda") {
    profilers_ = std::make_unique<RunnerPool>(
        RunnerProcess::Config{config_.runner, config_.scratch, config_.backend, config_.device, true, reply_spin_us_,
                              config_.runner_cuda_connections},
        config_.profiler_spares,
        config_.profiler_starts_beside_timing ? RunnerPool::StartUp::kBesideTiming
                                              : RunnerPool::StartUp::kOutsideTiming);
    profilers_->refill();
  }
  while (true) {
    if (gate_->enabled()) wait_between_requests(control_fd_, gate_, &pool_, profilers_.get());
    ipc::Frame frame;
    try {
      frame = ipc::recv_frame(control_fd_, Deadline::never());
    } catch (const ipc::WireError&) {
      return 0;  // executor gone
    }
    const json& msg = frame.body;
    const std::string type = string_or(msg, "type", "");
    try {
      std::optional<int> exit_code;
      if (type == "eval" || type == "reference") {
        QueueNotices notices(gate_, control_fd_, msg.value("id", json(0)));
        exit_code = type == "eval" ? serve_eval(msg) : serve_reference(msg);
      } else if (type == "health") {
        send(control_fd_, health(config_, pool_, counters_, reference_requests_, device_, memory_, references_));
      } else if (type == "shutdown") {
        return 0;
      } else {
        send(control_fd_, {{"type", "error"}, {"message", "unknown message type '" + type + "'"}});
      }
      if (exit_code) return *exit_code;
    } catch (const ipc::WireError&) {
      return 0;
    }
  }
}

std::optional<int> RequestServer::serve_eval(const json& msg) {
  env::EvalReport report;
  // Checked by the evaluation under its share of the gate; where it threw
  // instead, here.
  std::optional<std::string> context_error;
  try {
    std::string checked;
    report = evaluate(env::eval_request_from_json(msg.at("request")), device_, &pool_, &counters_, profilers_.get(),
                      gate_, &references_, &checked);
    context_error = std::move(checked);
  } catch (const InputError& e) {
    report = system_failure(std::string("invalid request: ") + e.what());
  } catch (const std::exception& e) {
    report = system_failure(e.what());
  }
  if (!context_error) context_error = context_check();
  // The previous request's work after its report (topping up the spares)
  // delayed this one: said here, where the next request waits for it.
  report.phase_ms["refill_after_previous"] = last_refill_ms_;
  // A device failure that outlives the request (the judge's own CUDA
  // context is gone) ends this judge once the report is out; the
  // Executor starts a fresh one for the next request.
  bool device_broken = false;
  const auto memory_check_start = std::chrono::steady_clock::now();
  const std::string broken = retirement(*context_error, &device_broken);
  // After `total`: the memory bound's check (and trim) is the judge's work
  // between its evaluation and its report.
  report.phase_ms["memory_check"] = ms_since(memory_check_start);
  json reply = {{"type", "report"},
                {"id", integer_or(msg, "id", 0)},
                {"report", env::to_json(report)},
                {"runner_faults", counters_.runner_faults},
                {"evaluations", counters_.evaluations}};
  if (!broken.empty()) {
    reply["retire"] = broken;
    reply["retire_kind"] = device_broken ? "device" : "memory";
  }
  try {
    send(control_fd_, reply);
  } catch (const ipc::WireError& e) {
    // A report too large for a frame must not end the judge (and with
    // it every env on the device); the request gets a system error.
    if (e.kind() != ipc::WireError::Kind::kMalformed) throw;
    reply["report"] = env::to_json(system_failure(std::string("the report could not be sent: ") + e.what()));
    send(control_fd_, reply);
  }
  if (std::optional<int> code = exit_if_retired(broken)) return code;
  // Tops up the spares. On the GPU, timing runners' start-up needs no share
  // of the gate (runner_pool.h); elsewhere there is no gate.
  const auto refill_start = std::chrono::steady_clock::now();
  pool_.refill();
  last_refill_ms_ = ms_since(refill_start);
  return std::nullopt;
}

std::optional<int> RequestServer::serve_reference(const json& msg) {
  ++reference_requests_;
  env::ReferenceReport report;
  try {
    env::ReferenceRequest request = env::reference_request_from_json(msg.at("request"));
    // A timed reference is a measurement: alone on the GPU, like a
    // candidate's timing; a check only runs the graph.
    if (request.time) {
      settle_all(ipc::Deadline::after_ms(request.options.eval_timeout_ms));
      gate_->exclusive();
    } else {
      gate_->shared();
    }
    report = probe_reference(request, device_, &references_);
  } catch (const InputError& e) {
    report.problem = std::string("system error: invalid request: ") + e.what();
  } catch (const std::exception& e) {
    report.problem = std::string("system error: ") + e.what();
  }
  report.device = device_->name();
  // A huge task's reference grows the judge like an evaluation does.
  bool device_broken = false;
  const std::string broken = retirement(context_check(), &device_broken);
  json reply = {{"type", "reference_report"},
                {"id", msg.value("id", 0)},
                {"report", env::to_json(report)},
                {"reference_requests", reference_requests_}};
  if (!broken.empty()) {
    reply["retire"] = broken;
    reply["retire_kind"] = device_broken ? "device" : "memory";
  }
  send(control_fd_, reply);
  return exit_if_retired(broken);
}

std::string RequestServer::context_check() {
  if (gate_->hold() == GpuGate::Hold::kNone) {
    try {
      gate_->shared();
    } catch (const std::exception& e) {
      // The lock files failed, not the device: the check still runs, and
      // the next request meets the gate's error.
      std::fprintf(stderr, "kforge-judge: %s\n", e.what());
    }
  }
  return device_->context_error();
}

std::string RequestServer::retirement(std::string context_error, bool* device_broken) {
  std::string broken = std::move(context_error);
  *device_broken = !broken.empty();
  if (broken.empty()) broken = memory_.after_request(device_);
  return broken;
}

std::optional<int> RequestServer::exit_if_retired(const std::string& broken) {
  if (broken.empty()) return std::nullopt;
  std::fprintf(stderr, "kforge-judge: %s; exiting so that the executor starts a new judge\n", broken.c_str());
  return 3;
}

}  // namespace

std::string profiler_start_setting(JudgeLoopConfig* config) {
  const char* value = std::getenv(kProfilerStartVariable);
  const std::string v = value == nullptr ? "" : value;
  if (v.empty() || v == "beside_timing") {
    config->profiler_starts_beside_timing = true;
  } else if (v == "outside_timing") {
    config->profiler_starts_beside_timing = false;
  } else {
    return std::string(kProfilerStartVariable) + "='" + v +
           "' is not a profiler start-up: set it to beside_timing (the default) or outside_timing, or unset it";
  }
  return "";
}

std::string trace_in_timing_runner_setting(JudgeLoopConfig* config) {
  const char* value = std::getenv(kTraceInTimingRunnerVariable);
  const std::string v = value == nullptr ? "" : value;
  if (v.empty() || v == "0" || v == "1") {
    config->trace_in_timing_runner = v == "1";
    return "";
  }
  return std::string(kTraceInTimingRunnerVariable) + "='" + v +
         "' is not a switch: set it to 1 (trace a profile in the candidate's timing runner) or 0 (in a profiler "
         "runner, the default), or unset it";
}

std::string profiler_spares_setting(JudgeLoopConfig* config) {
  using env::kMaxProfilerSpares;
  if (config->profiler_spares != 0) {
    if (config->profiler_spares >= 1 && config->profiler_spares <= kMaxProfilerSpares) return "";
    return "executor.profiler_spares is " + std::to_string(config->profiler_spares) + ": give 1 to " +
           std::to_string(kMaxProfilerSpares) + " spare profiler runners, or 0 for the default";
  }
  const char* value = std::getenv(kProfilerSparesVariable);
  const std::string v = value == nullptr ? "" : value;
  if (v.empty()) {
    config->profiler_spares = env::kDefaultProfilerSpares;
    return "";
  }
  if (v.size() == 1 && v[0] >= '1' && v[0] <= '0' + kMaxProfilerSpares) {
    config->profiler_spares = v[0] - '0';
    return "";
  }
  return std::string(kProfilerSparesVariable) + "='" + v +
         "' is not a number of spare profiler runners: set it to 1 to " + std::to_string(kMaxProfilerSpares) + " (" +
         std::to_string(env::kDefaultProfilerSpares) + " is the default), or unset it";
}

int serve_executor(const JudgeLoopConfig& given, int control_fd) {
  JudgeLoopConfig config = given;
  std::string setting_error = profiler_start_setting(&config);
  if (setting_error.empty()) setting_error = profiler_spares_setting(&config);
  if (setting_error.empty()) setting_error = trace_in_timing_runner_setting(&config);
  GpuGate gate;
  OpenedDevice opened;
  try {
    if (setting_error.empty()) {
      opened = open_device(config, control_fd, &gate);
    } else {
      opened.error = setting_error;
    }
    send(control_fd, hello_message(config, opened, gate));
  } catch (const ipc::WireError&) {
    return 1;
  }
  if (!opened.device) return 2;
  RequestServer server(config, control_fd, opened.device.get(), &gate);
  return server.serve();
}

}  // namespace kforge::judge
