#include "judge/runner_pool.h"

#include <chrono>

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

double RunnerPool::settle(exec::Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  const exec::Deadline limit = exec::Deadline::earliest(deadline, exec::Deadline::after_ms(kStartLimitMs));
  // A spare that has not started by then is killed by await_started: either
  // way it no longer runs start-up work; take() and refill() drop it.
  for (auto& spare : spares_) spare->await_started(limit);
  return exec::ms_since(start);
}

}  // namespace kforge::judge
