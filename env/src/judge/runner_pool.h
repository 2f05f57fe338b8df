// One fresh runner per candidate, with a spare started in advance so that
// process start-up (exec, dynamic linking, network namespace) is off the
// critical path of the next request.
#pragma once

#include <memory>

#include "common/runner_process.h"

namespace kforge::judge {

class RunnerPool {
 public:
  explicit RunnerPool(exec::RunnerProcess::Config config) : config_(std::move(config)) {}

  // The spare if it is still alive, else a new runner. Throws SystemError if
  // no runner can be started.
  std::unique_ptr<exec::RunnerProcess> take();
  // Starts the spare if there is none; failures are left for take() to report.
  void refill();
  int spares() const { return spare_ ? 1 : 0; }

 private:
  exec::RunnerProcess::Config config_;
  std::unique_ptr<exec::RunnerProcess> spare_;
};

}  // namespace kforge::judge
