// Cross-checks between the three clocks a timed call has: the judge's
// round trip (authoritative), the runner's own wall-clock interval around
// kf_forward (which the candidate could overwrite, since it shares the
// runner's memory) and the CPU time the kernel accounted to the runner
// (which it cannot). Each returns the evidence for a timing_tamper violation,
// or "" when the figures are consistent.
#pragma once

#include <string>

#include "common/sample_stats.h"

namespace kforge::judge {

// Clock-read jitter allowed between the clocks, in ms.
inline constexpr double kClockSlackMs = 0.05;

// The runner's interval lies inside the judge's round trip, always.
std::string check_self_within_round_trip(double self_ms, double round_trip_ms);

// The runner's wall-clock interval around kf_forward can never be much shorter
// than the CPU time kf_forward used (medians over the timed calls; the CPU
// figure has the null-call overhead removed). Flags a runner interval below a
// third of the CPU time.
std::string check_self_covers_cpu_time(const exec::SampleSummary& self, const exec::SampleSummary& cpu);

}  // namespace kforge::judge
