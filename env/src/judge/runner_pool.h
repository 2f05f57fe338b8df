// Fresh runners for every candidate, with spares started in advance so that
// process start-up (exec, dynamic linking, network namespace, and on GPUs the
// CUDA context) is off the critical path of the next request.
#pragma once

#include <deque>
#include <memory>

#include "common/runner_process.h"

namespace kforge::judge {

class RunnerPool {
 public:
  // `spares`: how many runners wait ready. One suffices on the CPU, where a
  // runner starts in milliseconds; a CUDA runner takes hundreds of
  // milliseconds to create its context, longer than a small evaluation.
  explicit RunnerPool(exec::RunnerProcess::Config config, int spares = 1)
      : config_(std::move(config)), target_(spares) {}

  // A waiting spare if one is still alive, else a new runner. GPU pools start
  // the replacement spare at once, so that it is ready for the next request
  // even when requests arrive back to back. Throws SystemError if no runner
  // can be started.
  std::unique_ptr<exec::RunnerProcess> take();
  // Starts spares up to the target; failures are left for take() to report.
  void refill();
  int spares() const { return static_cast<int>(spares_.size()); }

 private:
  exec::RunnerProcess::Config config_;
  int target_;
  std::deque<std::unique_ptr<exec::RunnerProcess>> spares_;
};

}  // namespace kforge::judge
