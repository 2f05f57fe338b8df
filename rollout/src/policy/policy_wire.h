// The "act" method of the policy protocol (trainer_bridge/POLICY.md) in the
// kforge_rpc envelope, shared by the C++ client (zmq_policy.cpp) and server
// (policy_server.cpp):
//   params {"requests": [PolicyRequest, ...]}
//   result {"replies":  [PolicyReply, ...]}   (same length and order)
#pragma once

#include <string>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/rollout/policy/policy.h"

namespace kforge::rollout::wire {

// The version of the methods and their fields, inside envelope version 1.
inline constexpr int kPolicyProtocol = 1;

json encode_act_params(const std::vector<PolicyRequest>& requests, size_t begin, size_t end);
// InputError naming the field (under /params).
std::vector<PolicyRequest> decode_act_params(const json& params);

json encode_act_result(const std::vector<PolicyReply>& replies, const std::string& policy_version);
// InputError naming the field (under /result) when the result is malformed or
// holds another number of replies than `expected`. A reply without a
// policy_version gets the result's.
std::vector<PolicyReply> decode_act_result(const json& result, size_t expected);

}  // namespace kforge::rollout::wire
