#include "judge/runner_pool.h"

#include <poll.h>

#include "kforge/core/error.h"

namespace kforge::judge {

std::unique_ptr<exec::RunnerProcess> RunnerPool::take() {
  std::unique_ptr<exec::RunnerProcess> r;
  while (!spares_.empty() && !r) {
    r = std::move(spares_.front().runner);
    spares_.pop_front();
    if (!r->check_alive()) r.reset();  // a spare that died while waiting is reaped here
  }
  if (!r) r = exec::RunnerProcess::spawn(config_);
  return r;
}

void RunnerPool::refill() {
  for (auto it = spares_.begin(); it != spares_.end();) {
    it = it->runner->check_alive() ? it + 1 : spares_.erase(it);
  }
  while (static_cast<int>(spares_.size()) < target_) {
    try {
      spares_.push_back({exec::RunnerProcess::spawn(config_), std::chrono::steady_clock::now()});
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
  for (auto& spare : spares_) spare.runner->await_started(limit);
  return exec::ms_since(start);
}

int RunnerPool::starting() const {
  int n = 0;
  for (const auto& spare : spares_) n += spare.runner->alive() && !spare.runner->started();
  return n;
}

std::vector<int> RunnerPool::collect_started() {
  std::vector<int> waiting;
  for (auto& spare : spares_) {
    exec::RunnerProcess& r = *spare.runner;
    if (!r.alive() || r.started()) continue;
    pollfd p{r.control_fd(), POLLIN, 0};
    const bool readable = ::poll(&p, 1, 0) > 0;
    const double age_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - spare.spawned).count();
    if (readable || age_ms >= kStartLimitMs) {
      // Readable: the frame is there (or the runner died), so this returns
      // promptly. Too old: the expired deadline kills it.
      r.await_started(exec::Deadline::after_ms(readable ? 1000.0 : 0.0));
    }
    if (r.alive() && !r.started()) waiting.push_back(r.control_fd());
  }
  return waiting;
}

}  // namespace kforge::judge
