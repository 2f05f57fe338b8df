// Fresh runners for every candidate, with spares started in advance so that
// process start-up (exec, dynamic linking, network namespace, and on GPUs the
// CUDA context) is off the critical path of the next request.
//
// A starting runner is not idle: on a GPU it creates a context, runs warm-up
// kernels and (profiler runners) sets up CUPTI, all on the device being
// measured. So spares are started only where nothing is measured (the caller
// says when, with refill()), and settle() waits for every spare to finish
// starting before a measurement (evaluation.cpp: before timing and before
// the energy window). Between requests the judge reads `started` as it
// arrives (collect_started()) and holds a share of the GPU gate while any
// spare is still starting (judge_loop.cpp), so that other judges on the
// same GPU do not time anything beside it.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "exec_common/deadline.h"
#include "exec_common/runner_process.h"

namespace kforge::judge {

class RunnerPool {
 public:
  // `spares`: how many runners wait ready. One suffices on the CPU, where a
  // runner starts in milliseconds; a CUDA runner takes hundreds of
  // milliseconds to create its context, longer than a small evaluation.
  explicit RunnerPool(exec::RunnerProcess::Config config, int spares = 1)
      : config_(std::move(config)), target_(spares) {}

  // A waiting spare if one is still alive, else a new runner, given until
  // kStartLimitMs after its spawn (and at most until `deadline`) to say
  // `started`. Start-up is the harness's time, not the candidate's, so it is
  // waited for here and never out of the candidate's load limit: on a busy
  // GPU host a spare's context can take longer than a call's timeout. A
  // spare that does not start is replaced once by a new runner; `started`
  // is the last runner's start reply (not ok: it says why, and the runner is
  // gone). Starts no replacement spare (see refill()). Throws SystemError if
  // no runner can be spawned.
  struct Taken {
    std::unique_ptr<exec::RunnerProcess> runner;
    exec::RunnerReply started;
  };
  Taken take(exec::Deadline deadline);
  // Starts spares up to the target; failures are left for take() to report.
  // Call it where a starting runner disturbs no measurement.
  void refill();
  // Waits until every spare has finished starting (or kills one that takes
  // longer than kStartLimitMs or the deadline) and returns the milliseconds waited.
  double settle(exec::Deadline deadline);
  static constexpr double kStartLimitMs = 30000;
  int spares() const { return static_cast<int>(spares_.size()); }

  // Spares whose `started` has not been read yet.
  int starting() const;
  // Reads `started` from every spare that has sent it, without waiting for
  // the others (a spare starting for longer than kStartLimitMs is killed),
  // and returns the control fds of those still starting, for poll(2).
  std::vector<int> collect_started();

 private:
  struct Spare {
    std::unique_ptr<exec::RunnerProcess> runner;
    std::chrono::steady_clock::time_point spawned;
  };
  exec::RunnerProcess::Config config_;
  int target_;
  std::deque<Spare> spares_;
};

}  // namespace kforge::judge
