// The Executor of executor.h for any backend: a queue served by one worker
// thread that owns the device's judge process (kforge-judge --backend X).
//
// The worker starts the judge (children die with it: PR_SET_PDEATHSIG is tied
// to the spawning thread, which lives as long as the Executor), sends one
// request at a time and waits for the report under a deadline of
// eval_timeout_ms plus a grace period. A judge that dies or stops answering
// is killed, the request in flight gets a report saying so, and the next
// request starts a new judge. The destructor fails queued requests, interrupts
// the one in flight and stops the judge, so no process outlives the Executor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "exec/judge_connection.h"
#include "kforge/env/executor.h"

namespace kforge::exec {

class ProcessExecutor final : public env::Executor {
 public:
  explicit ProcessExecutor(const env::ExecutorConfig& config);
  ~ProcessExecutor() override;

  std::future<env::EvalReport> submit(env::EvalRequest request) override;
  std::future<env::ReferenceReport> submit_reference(env::ReferenceRequest request) override;
  std::shared_future<env::ReferenceReport> check_task(const TaskSpec& task, const env::EvalOptions& options) override;
  int reference_checks() const override { return reference_checks_.load(); }
  env::BackendKind backend() const override { return config_.backend; }
  std::string device_name() override;
  int restarts() const override { return judge_restarts_.load() + runner_faults_.load(); }
  int judge_pid() const override { return judge_pid_.load(); }
  json health() override;

 private:
  // A queued unit of work: `run` talks to the judge, `abandon` fulfils the
  // promise when the Executor shuts down before running it.
  struct Job {
    std::function<void(JudgeConnection&)> run;
    std::function<void(const std::string&)> abandon;
  };

  void enqueue(Job job);
  void worker_loop();
  // Starts the judge if needed; false (with `error`) if it cannot be started.
  bool ensure_judge(std::string* error);
  void retire_judge_scratch();
  void run_eval(JudgeConnection& judge, const env::EvalRequest& request, std::promise<env::EvalReport>* promise);
  env::ReferenceReport run_reference(JudgeConnection& judge, const env::ReferenceRequest& request);

  env::ExecutorConfig config_;
  JudgeLaunch launch_;
  bool own_scratch_ = false;
  std::string setup_error_;  // tools not found, ...: every request reports it

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;

  std::mutex device_mutex_;
  std::condition_variable device_cv_;
  bool device_known_ = false;
  std::string device_name_;

  JudgeConnection judge_;
  // Each judge gets its own scratch sub-directory, removed when it is gone:
  // a judge that was killed cannot clean up its runners' directories itself.
  std::filesystem::path judge_scratch_;
  int judges_started_ = 0;
  bool judge_started_once_ = false;
  std::atomic<int> judge_pid_{0};
  std::atomic<int> judge_restarts_{0};
  std::atomic<int> runner_faults_{0};
  int runner_faults_base_ = 0;  // faults counted by previous judge processes
  uint64_t next_id_ = 1;

  // check_task's results by task hash, oldest first in check_order_ (bounded).
  std::mutex checks_mutex_;
  std::map<std::string, std::shared_future<env::ReferenceReport>> checks_;
  std::deque<std::string> check_order_;
  std::atomic<int> reference_checks_{0};
  std::thread worker_;
};

}  // namespace kforge::exec
