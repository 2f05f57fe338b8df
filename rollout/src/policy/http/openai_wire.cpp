#include "kforge/rollout/policy/openai_wire.h"

#include <cmath>
#include <limits>

#include "kforge/core/document.h"

namespace kforge::rollout {
namespace {

// Thrown inside the parser for a reply that does not follow the schema;
// parse_chat_response turns it into ChatResponse::error.
class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_float:
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "a number";
    default:
      return "an unsupported value";
  }
}

[[noreturn]] void fail(const std::string& where, const std::string& expected, const json& got) {
  throw SchemaError("field " + where + ": expected " + expected + ", got " + type_name(got));
}

const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// A string field that may be absent or null.
std::string optional_string(const json& obj, const char* key, const std::string& where) {
  const json* v = member(obj, key);
  if (v == nullptr || v->is_null()) return "";
  if (!v->is_string()) fail(where + "/" + key, "a string", *v);
  return v->get<std::string>();
}

json normalize_tool_call(const json& call, size_t index, const std::string& where) {
  if (!call.is_object()) fail(where, "an object", call);
  const json* fn = member(call, "function");
  if (fn == nullptr || !fn->is_object()) {
    fail(where + "/function", "an object with \"name\" and \"arguments\"", fn == nullptr ? json() : *fn);
  }
  const json* name = member(*fn, "name");
  if (name == nullptr || !name->is_string())
    fail(where + "/function/name", "a string", name == nullptr ? json() : *name);
  std::string arguments;
  const json* args = member(*fn, "arguments");
  if (args == nullptr || args->is_null()) {
    arguments = "{}";
  } else if (args->is_string()) {
    // Kept as text: the environment decodes it, and a malformed one is the
    // policy's mistake, shown to it as an observation.
    arguments = args->get<std::string>();
  } else if (args->is_object()) {
    arguments = args->dump();  // some servers send the object itself
  } else {
    fail(where + "/function/arguments", "a string of JSON or an object", *args);
  }
  std::string id = optional_string(call, "id", where);
  if (id.empty()) id = "call_" + std::to_string(index);
  return {{"id", id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", arguments}}}};
}

// vLLM's return_tokens_as_token_ids renders each token as "token_id:<n>".
std::optional<int64_t> token_id_from_text(const std::string& token) {
  static const std::string kPrefix = "token_id:";
  if (token.compare(0, kPrefix.size(), kPrefix) != 0 || token.size() == kPrefix.size() ||
      token.size() > kPrefix.size() + 18) {
    return std::nullopt;
  }
  int64_t v = 0;
  for (size_t i = kPrefix.size(); i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return std::nullopt;
    v = v * 10 + (token[i] - '0');
  }
  return v;
}

std::vector<int64_t> read_token_ids(const json& v, const std::string& where) {
  if (!v.is_array()) fail(where, "an array of integers", v);
  std::vector<int64_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& t = v[i];
    if (!t.is_number_integer()) fail(where + "/" + std::to_string(i), "an integer", t);
    ids.push_back(t.get<int64_t>());
  }
  return ids;
}

// choices[0].logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
void read_logprobs(const json& lp, const std::string& where, PolicyReply* reply) {
  if (lp.is_null()) return;
  if (!lp.is_object()) fail(where, "an object or null", lp);
  const json* content = member(lp, "content");
  if (content == nullptr || content->is_null()) return;
  if (!content->is_array()) fail(where + "/content", "an array", *content);
  std::vector<double> logprobs;
  std::vector<int64_t> ids;
  bool all_ids = true;
  logprobs.reserve(content->size());
  for (size_t i = 0; i < content->size(); ++i) {
    const json& entry = (*content)[i];
    const std::string at = where + "/content/" + std::to_string(i);
    if (!entry.is_object()) fail(at, "an object", entry);
    const json* value = member(entry, "logprob");
    if (value == nullptr || !value->is_number()) fail(at + "/logprob", "a number", value == nullptr ? json() : *value);
    const double x = value->get<double>();
    // -inf is a legal logprob; NaN or +inf is not, and JSON cannot carry them
    // anyway, so this only rejects absurd finite values.
    if (!(x <= 0.0 + 1e-6)) fail(at + "/logprob", "a number <= 0", *value);
    logprobs.push_back(x);
    const std::string token = optional_string(entry, "token", at);
    const auto id = token_id_from_text(token);
    if (id) {
      ids.push_back(*id);
    } else {
      all_ids = false;
    }
  }
  reply->logprobs = std::move(logprobs);
  if (all_ids && !ids.empty() && !reply->token_ids) reply->token_ids = std::move(ids);
}

json read_usage(const json& u) {
  if (u.is_null()) return nullptr;
  if (!u.is_object()) fail("/usage", "an object or null", u);
  json out = json::object();
  for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
    const json* v = member(u, key);
    if (v == nullptr || v->is_null()) continue;
    if (!v->is_number_integer() || v->get<int64_t>() < 0) fail(std::string("/usage/") + key, "an integer >= 0", *v);
    out[key] = v->get<int64_t>();
  }
  return out;
}

// nlohmann's parse errors quote the bytes they stopped at, which may be any
// bytes of the reply: kept to printable ASCII, as error strings end up in
// JSON (trajectories, logs) whose serialization rejects broken UTF-8.
std::string ascii_only(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) c = '?';
  }
  return out;
}

json parse_bounded(std::string_view body, const ResponseLimits& limits) {
  if (body.size() > limits.max_bytes) {
    throw SchemaError("reply of " + std::to_string(body.size()) + " bytes is larger than the limit of " +
                      std::to_string(limits.max_bytes) + " bytes (max_response_bytes)");
  }
  const std::string depth = check_json_depth(body, limits.max_depth);
  if (!depth.empty()) throw SchemaError("reply is not usable JSON: " + depth);
  try {
    return json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const auto pos = what.find("syntax error");
    throw SchemaError("reply is not valid JSON (byte " + std::to_string(e.byte) +
                      "): " + ascii_only(pos == std::string::npos ? what : what.substr(pos)));
  }
}

}  // namespace

json build_chat_request(const PolicyRequest& request, const ChatRequestOptions& options) {
  json body = {{"model", options.model},
               {"messages", request.messages},
               {"temperature", request.sampling.temperature},
               {"top_p", request.sampling.top_p},
               {"max_tokens", request.sampling.max_tokens},
               {"n", 1}};
  if (request.tools.is_array() && !request.tools.empty()) {
    body["tools"] = request.tools;
    body["tool_choice"] = options.tool_choice;
  }
  if (request.sampling.seed) body["seed"] = *request.sampling.seed;
  if (!request.sampling.stop.empty()) body["stop"] = request.sampling.stop;
  if (options.logprobs) {
    body["logprobs"] = true;
    if (options.top_logprobs > 0) body["top_logprobs"] = options.top_logprobs;
  }
  if (options.return_token_ids) body["return_token_ids"] = true;
  if (options.extra_body.is_object()) {
    for (const auto& [key, value] : options.extra_body.items()) body[key] = value;
  }
  return body;
}

std::string check_json_depth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return "nested deeper than " + std::to_string(max_depth) + " levels at byte " + std::to_string(i);
      }
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced input is the parser's to report
    }
  }
  return "";
}

ChatResponse parse_chat_response(std::string_view body, const ResponseLimits& limits) {
  ChatResponse out;
  try {
    const json root = parse_bounded(body, limits);
    if (!root.is_object()) fail("/", "an object", root);
    if (const json* err = member(root, "error"); err != nullptr && !err->is_null()) {
      throw SchemaError("the server answered with an error: " + error_body_message(body));
    }
    out.model = optional_string(root, "model", "");
    const json* choices = member(root, "choices");
    if (choices == nullptr || !choices->is_array()) {
      fail("/choices", "an array", choices == nullptr ? json() : *choices);
    }
    if (choices->empty()) throw SchemaError("field /choices: the reply has no choices");
    const json& choice = (*choices)[0];
    if (!choice.is_object()) fail("/choices/0", "an object", choice);
    const json* message = member(choice, "message");
    if (message == nullptr || !message->is_object()) {
      fail("/choices/0/message", "an object", message == nullptr ? json() : *message);
    }
    PolicyReply& reply = out.reply;
    reply.content = optional_string(*message, "content", "/choices/0/message");
    reply.finish_reason = optional_string(choice, "finish_reason", "/choices/0");
    if (const json* calls = member(*message, "tool_calls"); calls != nullptr && !calls->is_null()) {
      if (!calls->is_array()) fail("/choices/0/message/tool_calls", "an array", *calls);
      if (calls->size() > limits.max_tool_calls) {
        throw SchemaError("field /choices/0/message/tool_calls: " + std::to_string(calls->size()) +
                          " tool calls, more than the limit of " + std::to_string(limits.max_tool_calls));
      }
      for (size_t i = 0; i < calls->size(); ++i) {
        reply.tool_calls.push_back(
            normalize_tool_call((*calls)[i], i, "/choices/0/message/tool_calls/" + std::to_string(i)));
      }
    }
    if (const json* ids = member(choice, "token_ids"); ids != nullptr && !ids->is_null()) {
      reply.token_ids = read_token_ids(*ids, "/choices/0/token_ids");
    } else if (const json* rids = member(root, "response_token_ids"); rids != nullptr && !rids->is_null()) {
      reply.token_ids = read_token_ids(*rids, "/response_token_ids");
    }
    if (const json* lp = member(choice, "logprobs"); lp != nullptr) read_logprobs(*lp, "/choices/0/logprobs", &reply);
    if (const json* usage = member(root, "usage"); usage != nullptr) out.usage = read_usage(*usage);
  } catch (const SchemaError& e) {
    out = ChatResponse{};
    out.error = e.what();
  } catch (const json::exception& e) {
    // A value of an unexpected type slipped past the checks above; still the
    // server's fault, still only an error.
    out = ChatResponse{};
    out.error = "reply does not follow the chat-completions schema: " + ascii_only(e.what());
  }
  return out;
}

std::string error_body_message(std::string_view body, size_t max_chars) {
  std::string message;
  if (body.size() <= (1u << 20) && check_json_depth(body, 16).empty()) {
    try {
      const json root = json::parse(body.begin(), body.end());
      if (root.is_object()) {
        const json* err = member(root, "error");
        if (err != nullptr && err->is_object()) {
          const json* m = member(*err, "message");
          if (m != nullptr && m->is_string()) message = m->get<std::string>();
        } else if (err != nullptr && err->is_string()) {
          message = err->get<std::string>();
        } else if (const json* m = member(root, "message"); m != nullptr && m->is_string()) {
          message = m->get<std::string>();  // vLLM: {"object": "error", "message": ...}
        } else if (const json* d = member(root, "detail"); d != nullptr && d->is_string()) {
          message = d->get<std::string>();  // FastAPI
        }
      }
    } catch (const json::exception&) {
      // Not JSON: the raw text below.
    }
  }
  const bool from_json = !message.empty();
  if (!from_json) message.assign(body.substr(0, std::min(body.size(), max_chars)));
  // One line, printable, bounded, valid UTF-8: it ends up in logs and in
  // trajectories, whose serialization rejects broken UTF-8.
  // The JSON parser validated UTF-8; do not cut a sequence in half.
  const size_t cut = from_json ? utf8_prefix_bytes(message, max_chars) : std::min(message.size(), max_chars);
  std::string out;
  out.reserve(cut + 3);
  for (size_t i = 0; i < cut; ++i) {
    const auto u = static_cast<unsigned char>(message[i]);
    if (u == '\n' || u == '\r' || u == '\t') {
      out.push_back(' ');
    } else if (u < 0x20 || u == 0x7f || (!from_json && u >= 0x80)) {
      out.push_back('?');
    } else {
      out.push_back(message[i]);
    }
  }
  if (cut < message.size() || (!from_json && body.size() > cut)) out += "...";
  return out;
}

}  // namespace kforge::rollout
