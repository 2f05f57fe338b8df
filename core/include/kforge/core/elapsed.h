// Milliseconds of steady-clock time, as a double: how every phase time,
// latency and wall time in reports, trajectories and logs is measured. One
// spelling, so no caller truncates to whole milliseconds by accident (a
// duration_cast to milliseconds would) or mixes up the clock.
#pragma once

#include <chrono>

namespace kforge {

// Milliseconds from `from` to `to` (negative when `to` is earlier).
inline double elapsed_ms(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Milliseconds from `since` to now.
inline double ms_since(std::chrono::steady_clock::time_point since) {
  return elapsed_ms(since, std::chrono::steady_clock::now());
}

}  // namespace kforge
