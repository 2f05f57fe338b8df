#include "policy/policy_wire.h"

namespace kforge::rollout::wire {

json encode_act_params(const std::vector<PolicyRequest>& requests, size_t begin, size_t end) {
  json list = json::array();
  for (size_t i = begin; i < end; ++i) list.push_back(to_json(requests[i]));
  return {{"requests", std::move(list)}};
}

std::vector<PolicyRequest> decode_act_params(const json& params) {
  const Document doc = Document::from_value(params, "params");
  ObjectReader r = doc.root_object();
  std::vector<PolicyRequest> out;
  for (const Field& f : r.required("requests").as_array()) out.push_back(policy_request_from_field(f));
  r.finish();
  return out;
}

json encode_act_result(const std::vector<PolicyReply>& replies, const std::string& policy_version) {
  json list = json::array();
  for (const auto& r : replies) list.push_back(to_json(r));
  return {{"replies", std::move(list)}, {"policy_version", policy_version}};
}

std::vector<PolicyReply> decode_act_result(const json& result, size_t expected) {
  const Document doc = Document::from_value(result, "result");
  ObjectReader r = doc.root_object();
  std::string version;
  if (auto f = r.optional("policy_version"); f && !f->value().is_null()) {
    version = f->value().is_number_integer() ? std::to_string(f->value().get<int64_t>()) : f->as_string();
  }
  Field list = r.required("replies");
  std::vector<PolicyReply> out;
  for (const Field& f : list.as_array()) out.push_back(policy_reply_from_field(f));
  r.finish();
  if (out.size() != expected) {
    list.fail_message("holds " + std::to_string(out.size()) + " replies for " + std::to_string(expected) +
                      " requests; give one reply per request, in order");
  }
  for (auto& p : out) {
    if (p.policy_version.empty()) p.policy_version = version;
  }
  return out;
}

}  // namespace kforge::rollout::wire
