// Cross-checks between the three clocks a timed call has: the judge's
// round trip (authoritative), the runner's own wall-clock interval around
// kf_forward (which the candidate could overwrite, since it shares the
// runner's memory) and the CPU time the kernel accounted to the runner
// (which it cannot). Each returns its evidence, or "" when the figures are
// consistent; what the judge does with it is said at each check.
#pragma once

#include <string>

#include "judge/sample_stats.h"

namespace kforge::judge {

// Clock-read jitter allowed between the clocks, in ms.
inline constexpr double kClockSlackMs = 0.05;
// CPU time a call's protocol work may take beyond the null calls' after a
// cache flush (cold code and data), in ms.
inline constexpr double kColdProtocolSlackMs = 0.2;

// The runner's interval lies inside the judge's round trip, always, however
// busy the host: a timing_tamper violation.
std::string check_self_within_round_trip(double self_ms, double round_trip_ms);

// The runner's wall-clock interval around kf_forward should not be much
// shorter than the CPU time kf_forward used (medians over the timed calls;
// the CPU figure has the null-call overhead removed). Returns the evidence
// when the interval is below a third of the CPU time. The judge reports it
// (timing.self_clock_disagrees) and judges nothing by it: no side is timed by
// the runner's clock, so a rewound one gains nothing, and load alone has
// produced it on a shared CI host (a 0.033 ms interval against 1.109 ms of
// accounted CPU time, for an honest kernel timed beside a starting runner).
std::string check_self_covers_cpu_time(const SampleSummary& self, const SampleSummary& cpu);

// Devices that time the call on the device (CUDA events in the runner): the
// device time is the primary clock because it is precise, but it is reported
// by a process whose memory the candidate shares. The judge's round trip
// minus the null-call overhead (`wall`) bounds it from below: events bracket
// the call from its first launch to the completion of its stream, so an honest
// median can fall short of the wall median only by synchronization latency.
// Returns the evidence when the device median is below (1 - kDeviceWallFraction)
// x the wall median minus kDeviceWallSlackMs. time_candidate() then times both
// sides by the round trip instead of reporting a violation: a forged time gains
// nothing, and an honest one that host noise pushed below keeps its reward.
inline constexpr double kDeviceWallFraction = 0.25;
inline constexpr double kDeviceWallSlackMs = 0.05;
std::string check_device_time_covers_wall(const SampleSummary& device, const SampleSummary& wall);

}  // namespace kforge::judge
