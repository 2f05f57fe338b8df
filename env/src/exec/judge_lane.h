// One lane of the device pool: a judge process (started on demand,
// restarted after it dies) and the requests it serves, one at a time, under
// deadlines. Every method except interrupt() and the counters must be called
// from the lane's own worker thread: the judge dies with the thread that
// spawned it (PR_SET_PDEATHSIG), so that thread must live as long as the lane.
//
// Each request's outcome says whether the lane itself failed (LaneFault),
// which is what the pool counts against the device; a candidate's failure is
// a report like any other (LaneFault::kNone).
#pragma once

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>

#include "exec/judge_connection.h"
#include "kforge/env/eval.h"
#include "kforge/env/reference_probe.h"

namespace kforge::exec {

enum class LaneFault {
  kNone,         // the judge answered (whatever the verdict)
  kJudgeLost,    // the judge died or stopped answering mid-request; restarted for the next one
  kCannotStart,  // no judge could be started for the request
  kUnusable,     // the judge started and said its device cannot be used; restarting helps nothing
  kRetired,      // the judge answered, then exited because its device context broke
};
const char* lane_fault_name(LaneFault fault);

class JudgeLane {
 public:
  // `launch.scratch` is this lane's directory; each judge gets a
  // judge-<n>/ inside it, removed once that judge is gone. `gate_sharers`:
  // the judges that share this one's GPU gate (itself included), each of
  // which may hold the GPU alone for up to a request's eval_timeout_ms; the
  // judge does not count that wait against a request, so neither may we.
  explicit JudgeLane(JudgeLaunch launch, int gate_sharers = 1);
  ~JudgeLane();
  JudgeLane(const JudgeLane&) = delete;
  JudgeLane& operator=(const JudgeLane&) = delete;

  // Starts the judge if none runs; false with `error` and `fault` if it cannot.
  bool ensure_judge(std::string* error, LaneFault* fault);
  LaneFault eval(const env::EvalRequest& request, env::EvalReport* report);
  LaneFault reference(const env::ReferenceRequest& request, env::ReferenceReport* report);
  json health();
  void stop();

  // Any thread: makes a blocked exchange fail at once (shutdown).
  void interrupt() { judge_.interrupt(); }
  int judge_pid() const { return judge_pid_.load(); }
  int restarts() const { return judge_restarts_.load() + runner_faults_.load(); }
  // From the last hello ("" / {} before a judge has started).
  std::string device_name() const;
  json versions() const;
  // From the last hello (-1 before any): devices of the backend the judge
  // sees, also when it could not use the one asked for.
  int device_count() const;
  // Why the last start failed ("" after a start that worked).
  std::string start_error() const;
  int cpu() const { return launch_.cpu; }

 private:
  void retire_judge_scratch();
  // One request and its report, eval or reference (judge_lane.cpp's
  // EvalExchange and ReferenceExchange say how they differ): starts the
  // judge if needed, sends, checks the reply, reads the report, and says
  // whose fault a failure was.
  template <typename Exchange>
  LaneFault exchange(const typename Exchange::Request& request, typename Exchange::Report* report);

  // The wait for a report: eval_timeout_ms per gate sharer plus a grace period.
  ipc::Deadline report_deadline(double eval_timeout_ms) const;

  JudgeLaunch launch_;
  int gate_sharers_ = 1;
  JudgeConnection judge_;
  // A judge that was killed cannot clean up its runners' directories itself.
  std::filesystem::path judge_scratch_;
  int judges_started_ = 0;
  bool judge_started_once_ = false;
  uint64_t next_id_ = 1;
  std::atomic<int> judge_pid_{0};
  std::atomic<int> judge_restarts_{0};
  std::atomic<int> runner_faults_{0};
  int runner_faults_base_ = 0;  // faults counted by previous judge processes
  mutable std::mutex hello_mutex_;
  std::string device_name_;
  json versions_ = json::object();
  int device_count_ = -1;
  std::string start_error_;
};

}  // namespace kforge::exec
