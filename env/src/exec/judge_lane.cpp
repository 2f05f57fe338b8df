#include "exec/judge_lane.h"

#include <algorithm>
#include <optional>

#include "kforge/core/remove_tree.h"

namespace kforge::exec {
namespace {

// The judge enforces eval_timeout_ms itself; this margin only catches a judge
// that is stuck (or slow to turn a timeout into a report).
constexpr double kJudgeGraceMs = 30000;
constexpr double kHealthDeadlineMs = 10000;

// What differs between the two requests a lane serves; JudgeLane::exchange
// does the rest the same way for both.
struct EvalExchange {
  using Request = env::EvalRequest;
  using Report = env::EvalReport;
  static constexpr const char* kRequestType = "eval";
  static constexpr const char* kReplyType = "report";
  static constexpr const char* kReportName = "report";
  // The judge's count of runner faults so far rides on eval replies only.
  static constexpr bool kCarriesRunnerFaults = true;

  static Report parse(const json& report) { return env::eval_report_from_json(report); }
  static Report system_report(const std::string& message) {
    Report r;
    r.outcome = Outcome::kNotRun;
    r.summary = "system error: " + message;
    return r;
  }
  // A judge that outlives an eval's deadline is lost like any other.
  static std::optional<Report> timeout_report(const Request&, const std::string&) { return std::nullopt; }
};

struct ReferenceExchange {
  using Request = env::ReferenceRequest;
  using Report = env::ReferenceReport;
  static constexpr const char* kRequestType = "reference";
  static constexpr const char* kReplyType = "reference_report";
  static constexpr const char* kReportName = "reference report";
  static constexpr bool kCarriesRunnerFaults = false;

  static Report parse(const json& report) { return env::reference_report_from_json(report); }
  static Report system_report(const std::string& message) {
    Report r;
    r.status = env::ReferenceStatus::kError;
    r.problem = "system error: " + message;
    return r;
  }
  // A reference request runs no candidate: the task is all there is to
  // blame when its reference outlives the request (the judge's own guards,
  // task_fit.h, stop most such tasks first, with figures).
  static std::optional<Report> timeout_report(const Request& request, const std::string& backend) {
    Report r;
    r.status = env::ReferenceStatus::kInvalid;
    r.problem = "the task's reference is too slow for a judge on the " + backend +
                " backend: it did not finish within the " +
                std::to_string(static_cast<long long>(request.options.eval_timeout_ms / 1000)) +
                " s a request may take (eval_timeout_ms) and the judge's grace: shrink its shapes" +
                (backend == "cpu" ? " or check it with --backend cuda" : "");
    return r;
  }
};

// "retire_kind" is "device" or "memory"; a judge that does not say is
// taken at its word that something broke.
LaneFault retire_fault(const json& reply) {
  return reply.value("retire_kind", std::string("device")) == "memory" ? LaneFault::kNone : LaneFault::kRetired;
}

}  // namespace

const char* lane_fault_name(LaneFault fault) {
  switch (fault) {
    case LaneFault::kNone:
      return "none";
    case LaneFault::kJudgeLost:
      return "judge lost";
    case LaneFault::kCannotStart:
      return "judge cannot start";
    case LaneFault::kUnusable:
      return "device unusable";
    case LaneFault::kRetired:
      return "device context broken";
  }
  return "?";
}

JudgeLane::JudgeLane(JudgeLaunch launch, int gate_sharers)
    : launch_(std::move(launch)), gate_sharers_(std::max(gate_sharers, 1)) {}

ipc::Deadline JudgeLane::report_deadline(double eval_timeout_ms) const {
  return ipc::Deadline::after_ms(eval_timeout_ms * gate_sharers_ + kJudgeGraceMs);
}

JudgeLane::~JudgeLane() { stop(); }

std::string JudgeLane::device_name() const {
  std::lock_guard<std::mutex> lock(hello_mutex_);
  return device_name_;
}

json JudgeLane::versions() const {
  std::lock_guard<std::mutex> lock(hello_mutex_);
  return versions_;
}

int JudgeLane::device_count() const {
  std::lock_guard<std::mutex> lock(hello_mutex_);
  return device_count_;
}

std::string JudgeLane::start_error() const {
  std::lock_guard<std::mutex> lock(hello_mutex_);
  return start_error_;
}

bool JudgeLane::ensure_judge(std::string* error, LaneFault* fault) {
  if (judge_.running()) return true;
  if (judge_.fatal()) {
    *error = judge_.fatal_reason().empty() ? "judge cannot run on this device" : judge_.fatal_reason();
    *fault = LaneFault::kUnusable;
    return false;
  }
  retire_judge_scratch();
  if (judge_started_once_) ++judge_restarts_;
  judge_started_once_ = true;
  JudgeLaunch launch = launch_;
  launch.scratch = launch_.scratch / ("judge-" + std::to_string(++judges_started_));
  try {
    std::filesystem::create_directories(launch.scratch);
    judge_scratch_ = launch.scratch;
    judge_.start(launch);
  } catch (const std::exception& e) {
    judge_pid_ = 0;
    *error = e.what();
    *fault = judge_.fatal() ? LaneFault::kUnusable : LaneFault::kCannotStart;
    std::lock_guard<std::mutex> lock(hello_mutex_);
    start_error_ = e.what();
    if (judge_.device_count() >= 0) device_count_ = judge_.device_count();
    return false;
  }
  judge_pid_ = judge_.pid();
  runner_faults_base_ = runner_faults_.load();
  {
    std::lock_guard<std::mutex> lock(hello_mutex_);
    device_name_ = judge_.device_name();
    versions_ = judge_.versions();
    device_count_ = judge_.device_count();
    start_error_.clear();
  }
  return true;
}

void JudgeLane::stop() {
  judge_.stop();
  judge_pid_ = 0;
  retire_judge_scratch();
  // The lane's own directory, created with its first judge's: removed only
  // when empty (a judge started again creates it again).
  std::error_code ec;
  std::filesystem::remove(launch_.scratch, ec);
}

void JudgeLane::retire_judge_scratch() {
  if (judge_scratch_.empty()) return;
  remove_tree(judge_scratch_);
  judge_scratch_.clear();
}

LaneFault JudgeLane::eval(const env::EvalRequest& request, env::EvalReport* report) {
  return exchange<EvalExchange>(request, report);
}

LaneFault JudgeLane::reference(const env::ReferenceRequest& request, env::ReferenceReport* report) {
  return exchange<ReferenceExchange>(request, report);
}

template <typename Exchange>
LaneFault JudgeLane::exchange(const typename Exchange::Request& request, typename Exchange::Report* report) {
  std::string error;
  LaneFault fault = LaneFault::kNone;
  if (!ensure_judge(&error, &fault)) {
    *report = Exchange::system_report(error);
    return fault;
  }
  const uint64_t id = next_id_++;
  try {
    json reply = judge_.exchange({{"type", Exchange::kRequestType}, {"id", id}, {"request", env::to_json(request)}},
                                 report_deadline(request.options.eval_timeout_ms));
    if (reply.value("type", "") != Exchange::kReplyType || reply.value("id", uint64_t{0}) != id) {
      throw JudgeFailure("judge answered '" + reply.value("type", "") + "' instead of " + Exchange::kReplyType + " #" +
                         std::to_string(id));
    }
    *report = Exchange::parse(reply.at("report"));
    if constexpr (Exchange::kCarriesRunnerFaults)
      runner_faults_ = runner_faults_base_ + reply.value("runner_faults", 0);
    if (reply.contains("retire")) {
      // The judge exits after this report, which is still the request's
      // answer (judge_loop.cpp). Reaping it now makes the next request
      // start a new one instead of finding a dead channel. Only a broken
      // device context is the lane's fault; a judge that grew past its
      // memory bound is routine.
      stop();
      return retire_fault(reply);
    }
    return LaneFault::kNone;
  } catch (const JudgeFailure& e) {
    judge_pid_ = 0;
    if (e.timed_out()) {
      if (auto blamed = Exchange::timeout_report(request, launch_.backend)) {
        *report = std::move(*blamed);
        return LaneFault::kNone;
      }
    }
    *report = Exchange::system_report(std::string(e.what()) + "; the judge will be restarted for the next request");
    return LaneFault::kJudgeLost;
  } catch (const std::exception& e) {
    *report = Exchange::system_report(std::string("bad ") + Exchange::kReportName + " from the judge: " + e.what());
    return LaneFault::kNone;
  }
}

json JudgeLane::health() {
  std::string error;
  LaneFault fault = LaneFault::kNone;
  if (!ensure_judge(&error, &fault)) return {{"error", error}};
  try {
    return judge_.exchange({{"type", "health"}}, ipc::Deadline::after_ms(kHealthDeadlineMs));
  } catch (const std::exception& e) {
    judge_pid_ = 0;
    return {{"error", e.what()}};
  }
}

}  // namespace kforge::exec
