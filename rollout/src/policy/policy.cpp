#include "kforge/rollout/policy/policy.h"

#include <cmath>
#include <limits>

#include "kforge/core/msgpack.h"

namespace kforge::rollout {
namespace {

// Long enough for any completion a model writes; a reply past it is refused
// rather than carried into every later prompt.
constexpr size_t kMaxTextBytes = 16u << 20;
constexpr size_t kMaxTokens = 1u << 22;

std::string text(const Field& f) {
  const std::string s = f.as_string();
  if (s.size() > kMaxTextBytes) f.fail_message("longer than " + std::to_string(kMaxTextBytes) + " bytes");
  if (!msgpack::valid_utf8(s)) f.fail_message("not valid UTF-8");
  return s;
}

// Every string inside (keys too) must be valid UTF-8, or later dumps throw.
void check_utf8(const Field& f) {
  const json& v = f.value();
  if (v.is_string()) {
    if (!msgpack::valid_utf8(v.get_ref<const std::string&>())) f.fail_message("a string is not valid UTF-8");
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!msgpack::valid_utf8(it.key())) f.fail_message("a key is not valid UTF-8");
      check_utf8(Field(f.document(), it.value(), json_pointer_append(f.pointer(), it.key())));
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) check_utf8(Field(f.document(), v[i], json_pointer_append(f.pointer(), i)));
  }
}

json array_of_objects(const Field& f) {
  if (!f.value().is_array()) f.fail("an array");
  for (const Field& item : f.as_array()) {
    if (!item.value().is_object()) item.fail("an object");
  }
  check_utf8(f);
  return f.value();
}

}  // namespace

json usage_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  json out = json::object();
  for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
    if (auto f = r.optional(key); f && !f->value().is_null()) {
      out[key] = f->as_int_in(0, std::numeric_limits<int64_t>::max());
    }
  }
  r.finish();
  return out;
}

json to_json(const SamplingParams& p) {
  json j = {{"temperature", p.temperature}, {"top_p", p.top_p}, {"max_tokens", p.max_tokens}, {"stop", p.stop}};
  if (p.seed) j["seed"] = *p.seed;
  return j;
}

json to_json(const PolicyRequest& r) {
  return {{"episode_id", r.episode_id},
          {"turn", r.turn},
          {"task_id", r.task_id},
          {"messages", r.messages},
          {"tools", r.tools},
          {"sampling", to_json(r.sampling)},
          {"task", r.task}};
}

json to_json(const PolicyReply& r) {
  json j = {{"content", r.content},
            {"tool_calls", r.tool_calls},
            {"policy_version", r.policy_version},
            {"finish_reason", r.finish_reason},
            {"latency_ms", r.latency_ms}};
  if (r.token_ids) j["token_ids"] = *r.token_ids;
  if (r.logprobs) j["logprobs"] = *r.logprobs;
  if (!r.error.empty()) j["error"] = r.error;
  if (!r.usage.is_null()) j["usage"] = r.usage;
  return j;
}

SamplingParams sampling_params_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  SamplingParams p;
  if (auto f = r.optional("temperature")) {
    p.temperature = f->as_nonnegative_number();
    if (p.temperature > 100) f->fail("a temperature in [0, 100]");
  }
  if (auto f = r.optional("top_p")) {
    p.top_p = f->as_nonnegative_number();
    if (p.top_p > 1) f->fail("a probability in [0, 1]");
  }
  if (auto f = r.optional("max_tokens")) p.max_tokens = static_cast<int>(f->as_int_in(1, 1 << 24));
  if (auto f = r.optional("seed"); f && !f->value().is_null()) {
    if (!f->value().is_number_unsigned() && !(f->value().is_number_integer() && f->value().get<int64_t>() >= 0)) {
      f->fail("a non-negative integer");
    }
    p.seed = f->value().get<uint64_t>();
  }
  if (auto f = r.optional("stop")) {
    for (const Field& s : f->as_array()) p.stop.push_back(text(s));
  }
  r.finish();
  return p;
}

PolicyRequest policy_request_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  PolicyRequest q;
  q.episode_id = text(r.required("episode_id"));
  if (auto f = r.optional("turn")) q.turn = static_cast<int>(f->as_int_in(0, 1 << 20));
  if (auto f = r.optional("task_id")) q.task_id = text(*f);
  if (auto f = r.optional("messages")) q.messages = array_of_objects(*f);
  if (auto f = r.optional("tools")) q.tools = array_of_objects(*f);
  if (auto f = r.optional("sampling")) q.sampling = sampling_params_from_field(*f);
  if (auto f = r.optional("task")) {
    if (!f->value().is_null() && !f->value().is_object()) f->fail("a task object or null");
    check_utf8(*f);
    q.task = f->value();
  }
  r.finish();
  return q;
}

PolicyReply policy_reply_from_field(const Field& field) {
  ObjectReader r = field.as_object();
  PolicyReply p;
  if (auto f = r.optional("content"); f && !f->value().is_null()) p.content = text(*f);
  if (auto f = r.optional("tool_calls"); f && !f->value().is_null()) p.tool_calls = array_of_objects(*f);
  if (auto f = r.optional("token_ids"); f && !f->value().is_null()) {
    const std::vector<Field> items = f->as_array();
    if (items.size() > kMaxTokens) f->fail_message("more than " + std::to_string(kMaxTokens) + " tokens");
    std::vector<int64_t> ids;
    ids.reserve(items.size());
    for (const Field& i : items) ids.push_back(i.as_int_in(0, std::numeric_limits<int64_t>::max()));
    p.token_ids = std::move(ids);
  }
  if (auto f = r.optional("logprobs"); f && !f->value().is_null()) {
    const std::vector<Field> items = f->as_array();
    if (items.size() > kMaxTokens) f->fail_message("more than " + std::to_string(kMaxTokens) + " logprobs");
    std::vector<double> lp;
    lp.reserve(items.size());
    for (const Field& i : items) {
      const double v = i.as_number();
      if (std::isnan(v) || v > 0) i.fail("a log-probability (<= 0)");
      lp.push_back(v);
    }
    p.logprobs = std::move(lp);
  }
  if (p.token_ids && p.logprobs && p.token_ids->size() != p.logprobs->size()) {
    field.fail_message("token_ids has " + std::to_string(p.token_ids->size()) + " entries but logprobs has " +
                       std::to_string(p.logprobs->size()) + "; give one logprob per token");
  }
  if (auto f = r.optional("policy_version"); f && !f->value().is_null()) {
    // Trainers count steps; an integer is taken as its decimal text.
    p.policy_version = f->value().is_number_integer() ? std::to_string(f->value().get<int64_t>()) : text(*f);
  }
  if (auto f = r.optional("finish_reason"); f && !f->value().is_null()) p.finish_reason = text(*f);
  if (auto f = r.optional("error"); f && !f->value().is_null()) p.error = text(*f);
  if (auto f = r.optional("latency_ms"); f && !f->value().is_null()) p.latency_ms = f->as_nonnegative_number();
  if (auto f = r.optional("usage"); f && !f->value().is_null()) p.usage = usage_from_field(*f);
  r.finish();
  return p;
}

}  // namespace kforge::rollout
