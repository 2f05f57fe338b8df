// Fresh runners for every candidate, with spares started in advance so that
// process start-up (exec, dynamic linking, network namespace, and on GPUs the
// CUDA context) is off the critical path of the next request.
//
// A starting runner is not idle: on a GPU it creates a context, runs warm-up
// kernels and (profiler runners) sets up CUPTI, all on the device being
// measured. So spares are started only where nothing is measured (the caller
// says when, with refill()), and settle() waits for every spare to finish
// starting before a measurement (evaluation.cpp: before timing and before
// the energy window).
#pragma once

#include <deque>
#include <memory>

#include "common/deadline.h"
#include "common/runner_process.h"

namespace kforge::judge {

class RunnerPool {
 public:
  // `spares`: how many runners wait ready. One suffices on the CPU, where a
  // runner starts in milliseconds; a CUDA runner takes hundreds of
  // milliseconds to create its context, longer than a small evaluation.
  explicit RunnerPool(exec::RunnerProcess::Config config, int spares = 1)
      : config_(std::move(config)), target_(spares) {}

  // A waiting spare if one is still alive, else a new runner. Starts no
  // replacement (see refill()). Throws SystemError if no runner can be started.
  std::unique_ptr<exec::RunnerProcess> take();
  // Starts spares up to the target; failures are left for take() to report.
  // Call it where a starting runner disturbs no measurement.
  void refill();
  // Waits until every spare has finished starting (or kills one that takes
  // longer than kStartLimitMs or the deadline) and returns the milliseconds waited.
  double settle(exec::Deadline deadline);
  static constexpr double kStartLimitMs = 30000;
  int spares() const { return static_cast<int>(spares_.size()); }

 private:
  exec::RunnerProcess::Config config_;
  int target_;
  std::deque<std::unique_ptr<exec::RunnerProcess>> spares_;
};

}  // namespace kforge::judge
