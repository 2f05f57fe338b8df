#include "exec/process_executor.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <system_error>

#include "common/remove_tree.h"
#include "exec/tool_paths.h"
#include "kforge/core/error.h"
#include "kforge/core/sha256.h"

namespace kforge::exec {
namespace {

// The judge enforces eval_timeout_ms itself; this margin only catches a judge
// that is stuck (or slow to turn a timeout into a report).
constexpr double kJudgeGraceMs = 30000;
constexpr double kHealthDeadlineMs = 10000;
// check_task results kept; a report is small next to the reference run it saves.
constexpr size_t kMaxCachedChecks = 65536;

env::EvalReport system_report(const std::string& message) {
  env::EvalReport r;
  r.outcome = Outcome::kNotRun;
  r.summary = "system error: " + message;
  return r;
}

env::ReferenceReport reference_system_report(const std::string& message) {
  env::ReferenceReport r;
  r.status = env::ReferenceStatus::kError;
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

}  // namespace

ProcessExecutor::ProcessExecutor(const env::ExecutorConfig& config) : config_(config) {
  launch_.backend = env::backend_name(config.backend);
  launch_.device = config.device;
  launch_.startup_timeout_ms = config.judge_startup_timeout_ms;
  try {
    ToolPaths tools = resolve_tool_paths(config.tools_dir);
    launch_.judge = tools.judge;
    launch_.runner = tools.runner;
    if (config.scratch_dir.empty()) {
      launch_.scratch = make_private_scratch();
      own_scratch_ = true;
    } else {
      launch_.scratch = config.scratch_dir;
      std::filesystem::create_directories(launch_.scratch);
    }
  } catch (const std::exception& e) {
    setup_error_ = e.what();
  }
  worker_ = std::thread([this] { worker_loop(); });
}

ProcessExecutor::~ProcessExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  judge_.interrupt();
  worker_.join();
  if (own_scratch_) {
    remove_tree(launch_.scratch);
  }
}

void ProcessExecutor::enqueue(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
  }
  job.abandon("executor is shutting down");
}

std::future<env::EvalReport> ProcessExecutor::submit(env::EvalRequest request) {
  auto promise = std::make_shared<std::promise<env::EvalReport>>();
  std::future<env::EvalReport> future = promise->get_future();
  auto req = std::make_shared<env::EvalRequest>(std::move(request));
  enqueue({[this, promise, req](JudgeConnection& judge) { run_eval(judge, *req, promise.get()); },
           [promise](const std::string& why) { promise->set_value(system_report(why)); }});
  return future;
}

std::future<env::ReferenceReport> ProcessExecutor::submit_reference(env::ReferenceRequest request) {
  auto promise = std::make_shared<std::promise<env::ReferenceReport>>();
  std::future<env::ReferenceReport> future = promise->get_future();
  auto req = std::make_shared<env::ReferenceRequest>(std::move(request));
  enqueue({[this, promise, req](JudgeConnection& judge) { promise->set_value(run_reference(judge, *req)); },
           [promise](const std::string& why) { promise->set_value(reference_system_report(why)); }});
  return future;
}

std::shared_future<env::ReferenceReport> ProcessExecutor::check_task(const TaskSpec& task,
                                                                     const env::EvalOptions& options) {
  const std::string key = sha256_hex(to_json(task).dump());
  auto promise = std::make_shared<std::promise<env::ReferenceReport>>();
  std::shared_future<env::ReferenceReport> future = promise->get_future().share();
  {
    std::lock_guard<std::mutex> lock(checks_mutex_);
    if (auto it = checks_.find(key); it != checks_.end()) return it->second;
    checks_.emplace(key, future);
    check_order_.push_back(key);
    while (check_order_.size() > kMaxCachedChecks) {
      checks_.erase(check_order_.front());
      check_order_.pop_front();
    }
  }
  // A system error says nothing about the task: forget it before anyone can
  // see it, so that the next call asks the judge again.
  auto deliver = [this, promise, key](env::ReferenceReport report) {
    if (report.status == env::ReferenceStatus::kError) {
      std::lock_guard<std::mutex> lock(checks_mutex_);
      checks_.erase(key);
    }
    promise->set_value(std::move(report));
  };
  auto req = std::make_shared<env::ReferenceRequest>();
  req->task = task;
  req->check = true;
  req->time = false;
  req->options = options;
  enqueue({[this, deliver, req](JudgeConnection& judge) {
             ++reference_checks_;
             deliver(run_reference(judge, *req));
           },
           [deliver](const std::string& why) { deliver(reference_system_report(why)); }});
  return future;
}

json ProcessExecutor::health() {
  auto promise = std::make_shared<std::promise<json>>();
  std::future<json> future = promise->get_future();
  enqueue({[promise](JudgeConnection& judge) {
             try {
               promise->set_value(judge.exchange({{"type", "health"}}, Deadline::after_ms(kHealthDeadlineMs)));
             } catch (const std::exception& e) {
               promise->set_value({{"error", e.what()}});
             }
           },
           [promise](const std::string& why) {
             promise->set_value({{"error", why}});
           }});
  return future.get();
}

std::string ProcessExecutor::device_name() {
  std::unique_lock<std::mutex> lock(device_mutex_);
  device_cv_.wait(lock, [this] { return device_known_; });
  return device_name_;
}

bool ProcessExecutor::ensure_judge(std::string* error) {
  if (!setup_error_.empty()) {
    *error = setup_error_;
    return false;
  }
  if (judge_.running()) return true;
  if (judge_.fatal()) {
    *error = "judge cannot run on this machine";
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
    return false;
  }
  judge_pid_ = judge_.pid();
  runner_faults_base_ = runner_faults_.load();
  return true;
}

void ProcessExecutor::retire_judge_scratch() {
  if (judge_scratch_.empty()) return;
  remove_tree(judge_scratch_);
  judge_scratch_.clear();
}

void ProcessExecutor::run_eval(JudgeConnection& judge, const env::EvalRequest& request,
                               std::promise<env::EvalReport>* promise) {
  uint64_t id = next_id_++;
  env::EvalReport report;
  try {
    json reply = judge.exchange({{"type", "eval"}, {"id", id}, {"request", env::to_json(request)}},
                                Deadline::after_ms(request.options.eval_timeout_ms + kJudgeGraceMs));
    if (reply.value("type", "") != "report" || reply.value("id", uint64_t{0}) != id) {
      throw JudgeFailure("judge answered '" + reply.value("type", "") + "' instead of report #" + std::to_string(id));
    }
    report = env::eval_report_from_json(reply.at("report"));
    runner_faults_ = runner_faults_base_ + reply.value("runner_faults", 0);
    if (reply.contains("retire")) {
      // The judge's device context broke (judge_server.cpp); it exits after
      // this report. Reaping it now makes the next request start a new one
      // instead of finding a dead channel.
      judge.stop();
      judge_pid_ = 0;
    }
  } catch (const JudgeFailure& e) {
    judge_pid_ = 0;
    report = system_report(std::string(e.what()) + "; the judge will be restarted for the next request");
  } catch (const std::exception& e) {
    report = system_report(std::string("bad report from the judge: ") + e.what());
  }
  promise->set_value(std::move(report));
}

env::ReferenceReport ProcessExecutor::run_reference(JudgeConnection& judge, const env::ReferenceRequest& request) {
  uint64_t id = next_id_++;
  try {
    json reply = judge.exchange({{"type", "reference"}, {"id", id}, {"request", env::to_json(request)}},
                                Deadline::after_ms(request.options.eval_timeout_ms + kJudgeGraceMs));
    if (reply.value("type", "") != "reference_report" || reply.value("id", uint64_t{0}) != id) {
      throw JudgeFailure("judge answered '" + reply.value("type", "") + "' instead of reference_report #" +
                         std::to_string(id));
    }
    env::ReferenceReport report = env::reference_report_from_json(reply.at("report"));
    if (reply.contains("retire")) {
      judge.stop();  // as in run_eval: the judge's device context broke and it exits
      judge_pid_ = 0;
    }
    return report;
  } catch (const JudgeFailure& e) {
    judge_pid_ = 0;
    return reference_system_report(std::string(e.what()) + "; the judge will be restarted for the next request");
  } catch (const std::exception& e) {
    return reference_system_report(std::string("bad reference report from the judge: ") + e.what());
  }
}

void ProcessExecutor::worker_loop() {
  // Start the judge eagerly so device_name() and the first request do not wait for libtorch.
  std::string error;
  bool started = ensure_judge(&error);
  {
    std::lock_guard<std::mutex> lock(device_mutex_);
    device_known_ = true;
    device_name_ = started ? judge_.device_name() : "";
  }
  device_cv_.notify_all();

  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!ensure_judge(&error)) {
      job.abandon(error);
      continue;
    }
    job.run(judge_);
  }

  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(queue_);
  }
  for (auto& job : left) job.abandon("executor is shutting down");
  judge_.stop();
  judge_pid_ = 0;
  retire_judge_scratch();
}

}  // namespace kforge::exec
