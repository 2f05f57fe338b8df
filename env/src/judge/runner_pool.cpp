#include "judge/runner_pool.h"

#include "kforge/core/error.h"

namespace kforge::judge {

std::unique_ptr<exec::RunnerProcess> RunnerPool::take() {
  std::unique_ptr<exec::RunnerProcess> r = std::move(spare_);
  if (r && r->check_alive()) return r;
  r.reset();  // a spare that died while waiting is reaped here
  return exec::RunnerProcess::spawn(config_);
}

void RunnerPool::refill() {
  if (spare_ && spare_->check_alive()) return;
  spare_.reset();
  try {
    spare_ = exec::RunnerProcess::spawn(config_);
  } catch (const SystemError&) {
    spare_.reset();
  }
}

}  // namespace kforge::judge
