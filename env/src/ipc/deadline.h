// A point in time after which a wait gives up. Every blocking operation of the
// execution stack takes one, so no peer can stall us forever.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "kforge/core/elapsed.h"

namespace kforge::ipc {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline never() { return Deadline(Clock::time_point::max()); }
  // Saturating: a limit too far away to represent (configs bound their
  // durations, but a deadline must never wrap into the past) is never().
  static Deadline after_ms(double ms) {
    if (!std::isfinite(ms)) return never();
    const auto now = Clock::now();
    const double ticks =
        std::max(ms, 0.0) / 1000.0 * static_cast<double>(Clock::period::den) / static_cast<double>(Clock::period::num);
    const double room = static_cast<double>((Clock::time_point::max() - now).count());
    if (ticks >= room) return never();
    return Deadline(now + Clock::duration(static_cast<Clock::rep>(ticks)));
  }
  // The earlier of two deadlines: a call's limit inside a request's limit.
  static Deadline earliest(const Deadline& a, const Deadline& b) { return a.at_ < b.at_ ? a : b; }

  bool is_never() const { return at_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= at_; }
  double remaining_ms() const {
    if (is_never()) return std::numeric_limits<double>::infinity();
    return std::max(0.0, std::chrono::duration<double, std::milli>(at_ - Clock::now()).count());
  }
  // For poll(2): -1 waits forever; rounds up so that we never spin at 0.
  int poll_timeout_ms() const {
    if (is_never()) return -1;
    double ms = std::ceil(remaining_ms());
    return static_cast<int>(std::min(ms, static_cast<double>(std::numeric_limits<int>::max())));
  }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace kforge::ipc
