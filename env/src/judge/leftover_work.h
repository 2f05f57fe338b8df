// Work a call leaves running after kf_forward returned (docs/architecture.md#reward-hacking: "work
// on another stream"), seen without CUPTI: after the runner has synchronized
// the candidate's stream it times cudaDeviceSynchronize (`drain_ns`), which
// waits for everything else the process still has in flight. An honest call
// leaves nothing, so its drain time matches that of null calls; kernels put on
// another stream (the legacy default stream, a stream of its own) make it
// longer. The CUPTI pass of `profile` requests attributes kernels to streams
// exactly (kernel_attribution.h); this check covers every timed call.
//
// Work on another stream is also seen directly, on every verified and timed
// call: the CUDA runner queries the two other streams a candidate can reach
// (the legacy default stream and its per-thread stream) right after
// kf_forward returns, and says `foreign_pending` when work is still queued
// or running there. That is deterministic where the drain's timing is not
// (a kernel a few microseconds long drains within the drain's slack).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kforge::judge {

// A call counts as draining when its drain time exceeds the null calls' 90th
// percentile by max(kDrainSlackMs, the null median). The check fires when at
// least kMinDrainingCalls calls, and kMinDrainingShare of all, drained: one
// preempted runner thread does not make a violation.
inline constexpr double kDrainSlackMs = 0.02;
inline constexpr int kMinDrainingCalls = 3;
inline constexpr double kMinDrainingShare = 0.2;

// "" or the evidence for a work_after_return violation. Times in ms.
std::string check_work_after_return(const std::vector<double>& null_drain_ms, const std::vector<double>& call_drain_ms);

// "" or the evidence for a foreign_stream violation: the `done` reply of a
// call (types checked on arrival, reply_problem) says work was pending
// on another stream when kf_forward returned.
std::string check_foreign_stream(const nlohmann::json& done_body);

}  // namespace kforge::judge
