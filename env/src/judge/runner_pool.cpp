#include "judge/runner_pool.h"

#include <poll.h>

#include "kforge/core/elapsed.h"
#include "kforge/core/error.h"

namespace kforge::judge {

RunnerPool::Taken RunnerPool::take(ipc::Deadline deadline) {
  const auto start_limit = [&](std::chrono::steady_clock::time_point spawned) {
    const double age_ms = ms_since(spawned);
    return ipc::Deadline::earliest(deadline, ipc::Deadline::after_ms(kStartLimitMs - age_ms));
  };
  while (!spares_.empty()) {
    Spare spare = std::move(spares_.front());
    spares_.pop_front();
    // A spare that died while waiting, or cannot start in time, is reaped here.
    if (!spare.runner->check_alive()) continue;
    // Its replacement starts now, while this one finishes starting (if it
    // has not) and the candidate is loaded, verified and timed.
    if (start_up_ == StartUp::kBesideTiming) refill();
    RunnerReply started = spare.runner->await_started(start_limit(spare.spawned));
    if (started.ok()) return {std::move(spare.runner), std::move(started)};
    break;  // one replacement at most: a host too busy to start one will not start the next either
  }
  auto spawned = std::chrono::steady_clock::now();
  Taken taken{RunnerProcess::spawn(config_), {}};
  if (start_up_ == StartUp::kBesideTiming) refill();
  taken.started = taken.runner->await_started(start_limit(spawned));
  return taken;
}

void RunnerPool::refill() {
  for (auto it = spares_.begin(); it != spares_.end();) {
    it = it->runner->check_alive() ? it + 1 : spares_.erase(it);
  }
  while (static_cast<int>(spares_.size()) < target_) {
    try {
      spares_.push_back({RunnerProcess::spawn(config_), std::chrono::steady_clock::now()});
    } catch (const SystemError&) {
      return;
    }
  }
}

double RunnerPool::settle(ipc::Deadline deadline) {
  if (start_up_ == StartUp::kBesideTiming) return 0;
  const auto start = std::chrono::steady_clock::now();
  const ipc::Deadline limit = ipc::Deadline::earliest(deadline, ipc::Deadline::after_ms(kStartLimitMs));
  // A spare that has not started by then is killed by await_started: either
  // way it no longer runs start-up work; take() and refill() drop it.
  for (auto& spare : spares_) spare.runner->await_started(limit);
  return ms_since(start);
}

int RunnerPool::starting() const {
  int n = 0;
  for (const auto& spare : spares_) n += spare.runner->alive() && !spare.runner->started();
  return n;
}

std::vector<int> RunnerPool::collect_started() {
  std::vector<int> waiting;
  for (auto& spare : spares_) {
    RunnerProcess& r = *spare.runner;
    if (!r.alive() || r.started()) continue;
    pollfd p{r.control_fd(), POLLIN, 0};
    const bool readable = ::poll(&p, 1, 0) > 0;
    const double age_ms = ms_since(spare.spawned);
    if (readable || age_ms >= kStartLimitMs) {
      // Readable: the frame is there (or the runner died), so this returns
      // promptly. Too old: the expired deadline kills it.
      r.await_started(ipc::Deadline::after_ms(readable ? 1000.0 : 0.0));
    }
    if (r.alive() && !r.started() && start_up_ == StartUp::kOutsideTiming) waiting.push_back(r.control_fd());
  }
  return waiting;
}

}  // namespace kforge::judge
