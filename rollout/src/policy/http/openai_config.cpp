// The `policy: {kind: openai, ...}` section of a rollout config.
#include <cctype>
#include <cmath>

#include "kforge/rollout/policy/openai_policy.h"

namespace kforge::rollout {
namespace {

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// A number in [lo, hi] (or (lo, hi] when `lo_open`), named in the error.
double number_in(const Field& f, double lo, double hi, bool lo_open = false) {
  const json& v = f.value();
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) &&
                  (lo_open ? v.get<double>() > lo : v.get<double>() >= lo) && v.get<double>() <= hi;
  if (!ok)
    f.fail("a number in " + std::string(lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + "]");
  return v.get<double>();
}

bool is_env_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// RFC 7230 token characters: what a header name may hold.
bool is_header_name(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("!#$%&'*+-.^_`|~").find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

std::string check_base_url(const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return "\"" + url + "\" does not start with http:// or https:// (expected e.g. http://127.0.0.1:8000/v1)";
  }
  if (url.size() > 2048) return "longer than 2048 characters";
  for (char c : url) {
    if (std::isspace(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) < 0x20) {
      return "contains whitespace or control characters";
    }
  }
  return "";
}

}  // namespace

OpenAiPolicyConfig parse_openai_policy_config(const Field& section, const std::vector<std::string>& handled_by_caller) {
  ObjectReader r = section.as_object();
  for (const auto& key : handled_by_caller) r.allow(key);
  OpenAiPolicyConfig c;
  if (auto f = r.optional("kind")) {
    if (f->as_string() != "openai") f->fail("\"openai\" for this policy");
  }
  if (auto f = r.optional("base_url")) {
    c.base_url = f->as_string();
    const std::string why = check_base_url(c.base_url);
    if (!why.empty()) f->fail_message(why);
    while (!c.base_url.empty() && c.base_url.back() == '/') c.base_url.pop_back();
  }
  {
    Field f = r.required("model");
    c.model = f.as_string();
    if (c.model.empty()) f.fail("the served model's name (as in GET <base_url>/models)");
  }
  if (auto f = r.optional("api_key_env")) {
    c.api_key_env = f->as_string();
    if (!is_env_name(*c.api_key_env)) f->fail("an environment variable name such as OPENAI_API_KEY");
  }
  if (auto f = r.optional("policy_version")) c.policy_version = f->as_string();
  if (auto f = r.optional("connect_timeout_s")) c.connect_timeout_s = number_in(*f, 0, 3600, true);
  if (auto f = r.optional("timeout_s")) c.timeout_s = number_in(*f, 0, 86400, true);
  if (auto f = r.optional("max_retries")) c.max_retries = static_cast<int>(f->as_int_in(0, 100));
  if (auto f = r.optional("backoff_initial_s")) c.backoff_initial_s = number_in(*f, 0, 3600);
  if (auto f = r.optional("backoff_max_s")) {
    c.backoff_max_s = number_in(*f, 0, 3600);
    if (c.backoff_max_s < c.backoff_initial_s) {
      f->fail_message("must be >= backoff_initial_s (" + format_number(c.backoff_initial_s) + ")");
    }
  }
  if (auto f = r.optional("max_retry_after_s")) c.max_retry_after_s = number_in(*f, 0, 86400);
  if (auto f = r.optional("max_concurrency")) c.max_concurrency = static_cast<int>(f->as_int_in(1, 4096));
  if (auto f = r.optional("tool_choice")) c.request.tool_choice = f->as_enum({"auto", "required", "none"});
  if (auto f = r.optional("logprobs")) c.request.logprobs = f->as_bool();
  if (auto f = r.optional("top_logprobs")) c.request.top_logprobs = static_cast<int>(f->as_int_in(0, 20));
  if (auto f = r.optional("return_token_ids")) c.request.return_token_ids = f->as_bool();
  if (auto f = r.optional("extra_body")) {
    f->as_object();  // type check
    c.request.extra_body = f->value();
  }
  if (auto f = r.optional("headers")) {
    ObjectReader h = f->as_object();
    for (const auto& [name, value] : f->value().items()) {
      Field v = h.required(name);
      if (!is_header_name(name)) v.fail_message("\"" + name + "\" is not a valid HTTP header name");
      const std::string text = v.as_string();
      if (text.find_first_of("\r\n") != std::string::npos) v.fail("a header value on one line");
      c.headers[name] = text;
    }
  }
  if (auto f = r.optional("max_response_bytes")) {
    c.limits.max_bytes = static_cast<size_t>(f->as_int_in(1024, int64_t{1} << 30));
  }
  if (auto f = r.optional("max_response_depth")) c.limits.max_depth = static_cast<int>(f->as_int_in(8, 1024));
  if (auto f = r.optional("max_tool_calls")) c.limits.max_tool_calls = static_cast<size_t>(f->as_int_in(1, 4096));
  r.finish();
  c.request.model = c.model;
  return c;
}

json to_json(const OpenAiPolicyConfig& c) {
  // Names only: a header may carry a credential, and this goes into logs.
  json headers = json::array();
  for (const auto& [k, v] : c.headers) headers.push_back(k);
  return {{"kind", "openai"},
          {"base_url", c.base_url},
          {"model", c.model},
          {"api_key_env", c.api_key_env ? json(*c.api_key_env) : json(nullptr)},
          {"policy_version", c.policy_version},
          {"connect_timeout_s", c.connect_timeout_s},
          {"timeout_s", c.timeout_s},
          {"max_retries", c.max_retries},
          {"backoff_initial_s", c.backoff_initial_s},
          {"backoff_max_s", c.backoff_max_s},
          {"max_retry_after_s", c.max_retry_after_s},
          {"max_concurrency", c.max_concurrency},
          {"tool_choice", c.request.tool_choice},
          {"logprobs", c.request.logprobs},
          {"top_logprobs", c.request.top_logprobs},
          {"return_token_ids", c.request.return_token_ids},
          {"extra_body", c.request.extra_body},
          {"headers", headers},
          {"max_response_bytes", c.limits.max_bytes},
          {"max_response_depth", c.limits.max_depth},
          {"max_tool_calls", c.limits.max_tool_calls}};
}

}  // namespace kforge::rollout
