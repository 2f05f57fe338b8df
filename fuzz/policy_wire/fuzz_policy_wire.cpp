// Fuzz target: the policy protocol's readers (trainer_bridge/POLICY.md), on
// bytes from the network: an "act" request as PolicyServer decodes it from a
// worker, and an "act" result as ZmqPolicy decodes it from a server. Both
// must turn anything into a value or an error that names the field, never a
// crash, and what they accept must serialize again (valid UTF-8).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kforge/core/error.h"
#include "kforge/core/rpc.h"
#include "policy/policy_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kforge::json;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    json id;
    const kforge::rpc::Request request = kforge::rpc::decode_request(bytes, &id);
    for (const auto& r : kforge::rollout::wire::decode_act_params(request.params)) {
      (void)kforge::rollout::to_json(r).dump();
    }
  } catch (const kforge::rpc::ProtocolError&) {
  } catch (const kforge::InputError&) {
  }
  try {
    const kforge::rpc::Reply reply = kforge::rpc::decode_reply(bytes);
    if (reply.ok) {
      const json& result = reply.result;
      const size_t expected = result.is_object() && result.contains("replies") && result["replies"].is_array()
                                  ? result["replies"].size()
                                  : 0;
      for (const auto& r : kforge::rollout::wire::decode_act_result(result, expected)) {
        (void)kforge::rollout::to_json(r).dump();
      }
    }
  } catch (const kforge::rpc::ProtocolError&) {
  } catch (const kforge::InputError&) {
  }
  return 0;
}
