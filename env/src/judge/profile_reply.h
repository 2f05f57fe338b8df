// The shape of a profiler runner's `profiled` reply (profile.h). The reply
// comes from a process running candidate code, which can write any frame to
// its control socket, so every field the judge reads is checked for type and
// range before it is read (judge/json_fields.h); a reply that fails is the
// violation `harness_tamper`, never an exception that would end the
// evaluation as a system error.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kforge::judge {

// "" when `profile` (the reply's "profile" map) has only what
// cuda_runner_device's profile() produces, with the types and ranges the
// judge relies on (launch dimensions within CUDA's limits, counts
// non-negative); else the first problem, naming its path
// ("activity.records[3]: field 'grid' ...").
std::string profile_reply_problem(const nlohmann::json& profile);

}  // namespace kforge::judge
