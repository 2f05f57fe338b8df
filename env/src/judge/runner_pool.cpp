#include "judge/runner_pool.h"

#include "kforge/core/error.h"

namespace kforge::judge {

std::unique_ptr<exec::RunnerProcess> RunnerPool::take() {
  std::unique_ptr<exec::RunnerProcess> r;
  while (!spares_.empty() && !r) {
    r = std::move(spares_.front());
    spares_.pop_front();
    if (!r->check_alive()) r.reset();  // a spare that died while waiting is reaped here
  }
  if (!r) r = exec::RunnerProcess::spawn(config_);
  // (CPU runners start in milliseconds; refilling now would only add noise to
  // the CPU timing of this request.)
  if (config_.backend != "cpu") refill();
  return r;
}

void RunnerPool::refill() {
  for (auto it = spares_.begin(); it != spares_.end();) {
    it = (*it)->check_alive() ? it + 1 : spares_.erase(it);
  }
  while (static_cast<int>(spares_.size()) < target_) {
    try {
      spares_.push_back(exec::RunnerProcess::spawn(config_));
    } catch (const SystemError&) {
      return;
    }
  }
}

}  // namespace kforge::judge
