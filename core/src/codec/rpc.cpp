#include "kforge/core/rpc.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace kforge::rpc {
namespace {

const std::array<std::pair<ErrorCode, const char*>, 14> kCodes = {{
    {ErrorCode::kBadRequest, "bad_request"},
    {ErrorCode::kUnsupportedVersion, "unsupported_version"},
    {ErrorCode::kUnknownMethod, "unknown_method"},
    {ErrorCode::kInvalidTask, "invalid_task"},
    {ErrorCode::kUnknownTask, "unknown_task"},
    {ErrorCode::kInvalidAction, "invalid_action"},
    {ErrorCode::kUnknownEnv, "unknown_env"},
    {ErrorCode::kEnvBusy, "env_busy"},
    {ErrorCode::kNoEpisode, "no_episode"},
    {ErrorCode::kEpisodeFinished, "episode_finished"},
    {ErrorCode::kPoolFull, "pool_full"},
    {ErrorCode::kTooManyRequests, "too_many_requests"},
    {ErrorCode::kShuttingDown, "shutting_down"},
    {ErrorCode::kInternal, "internal"},
}};

const std::vector<std::string> kRequestKeys = {"v", "id", "method", "params"};

// Where check_utf8 is: keys and indices from the root. The JSON pointer is
// only spelled out for an error; building one per value cost a 20,000-variant
// reset more than its decode (bench/server, --flood 0).
struct Path {
  std::vector<std::pair<const std::string*, size_t>> steps;  // key, or nullptr and an index
  std::string pointer() const {
    std::string p;
    for (const auto& [key, index] : steps) p = key ? json_pointer_append(p, *key) : json_pointer_append(p, index);
    return p;
  }
};

// The protocol's strings are UTF-8; checking them once here means every
// later message that quotes a value (json::dump) is safe. Depth is bounded by
// the decoder (msgpack::kMaxDepth).
void check_utf8(const json& value, Path& path) {
  if (value.is_string()) {
    if (!msgpack::valid_utf8(value.get_ref<const std::string&>())) {
      const std::string pointer = path.pointer();
      throw ProtocolError(ErrorCode::kBadRequest, "field " + pointer + ": the string is not valid UTF-8", pointer);
    }
  } else if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!msgpack::valid_utf8(it.key())) {
        const std::string pointer = path.pointer();
        throw ProtocolError(ErrorCode::kBadRequest,
                            "field " + (pointer.empty() ? std::string("/") : pointer) + ": a key is not valid UTF-8",
                            pointer);
      }
      path.steps.emplace_back(&it.key(), 0);
      check_utf8(it.value(), path);
      path.steps.pop_back();
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      path.steps.emplace_back(nullptr, i);
      check_utf8(value[i], path);
      path.steps.pop_back();
    }
  }
}

// A name from the message, quoted for an error message: cut, so that a
// megabyte key costs the reply nothing.
std::string quoted_name(const std::string& name) {
  return "\"" + (name.size() > 60 ? name.substr(0, 57) + "..." : name) + "\"";
}

bool is_uint(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

}  // namespace

const std::string& error_code_name(ErrorCode code) {
  static const std::vector<std::string> kNames = error_code_names();
  return kNames.at(static_cast<size_t>(code));
}

std::vector<std::string> error_code_names() {
  std::vector<std::string> names;
  for (const auto& c : kCodes) names.emplace_back(c.second);
  return names;
}

std::optional<uint64_t> peek_request_id(std::string_view payload) {
  size_t at = 0;
  auto byte = [&](uint8_t* out) {
    if (at >= payload.size()) return false;
    *out = static_cast<uint8_t>(payload[at++]);
    return true;
  };
  // A big-endian unsigned integer of `n` bytes.
  auto be = [&](size_t n, uint64_t* out) {
    if (payload.size() - at < n) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(payload[at + i]);
    at += n;
    *out = v;
    return true;
  };
  uint8_t b = 0;
  uint64_t entries = 0;
  if (!byte(&b)) return std::nullopt;
  if ((b & 0xf0) == 0x80) {
    entries = b & 0x0f;
  } else if (b == 0xde || b == 0xdf) {
    if (!be(b == 0xde ? 2 : 4, &entries)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  for (uint64_t e = 0; e < std::min<uint64_t>(entries, 4); ++e) {
    // The key: a string of at most 255 bytes.
    uint64_t key_size = 0;
    if (!byte(&b)) return std::nullopt;
    if ((b & 0xe0) == 0xa0) {
      key_size = b & 0x1f;
    } else if (b != 0xd9 || !be(1, &key_size)) {
      return std::nullopt;
    }
    if (payload.size() - at < key_size) return std::nullopt;
    const bool is_id = payload.substr(at, key_size) == "id";
    at += key_size;
    // The value: an integer for the id; a scalar or a short string to skip.
    if (!byte(&b)) return std::nullopt;
    uint64_t v = 0;
    bool integer = true;
    bool negative = false;
    if (b <= 0x7f) {
      v = b;
    } else if (b >= 0xe0) {
      negative = true;
    } else if (b >= 0xcc && b <= 0xcf) {
      if (!be(size_t{1} << (b - 0xcc), &v)) return std::nullopt;
    } else if (b >= 0xd0 && b <= 0xd3) {
      const size_t n = size_t{1} << (b - 0xd0);
      if (!be(n, &v)) return std::nullopt;
      negative = (v >> (8 * n - 1)) & 1;  // the sign bit of an n-byte two's complement
    } else {
      integer = false;
      uint64_t skip = 0;
      if (b == 0xc0 || b == 0xc2 || b == 0xc3) {
        skip = 0;
      } else if (b == 0xca || b == 0xcb) {
        skip = b == 0xca ? 4 : 8;
      } else if ((b & 0xe0) == 0xa0) {
        skip = b & 0x1f;
      } else if (b != 0xd9 || !be(1, &skip)) {
        return std::nullopt;  // a container or a long value: not worth reading past
      }
      if (payload.size() - at < skip) return std::nullopt;
      at += skip;
    }
    if (is_id) return integer && !negative ? std::optional<uint64_t>(v) : std::nullopt;
  }
  return std::nullopt;
}

Request decode_request(std::string_view payload, json* id_out) {
  *id_out = nullptr;
  if (payload.empty()) throw ProtocolError(ErrorCode::kBadRequest, "empty message; expected a MessagePack map");
  json msg;
  try {
    msg = msgpack::decode(payload);
  } catch (const msgpack::DecodeError& e) {
    throw ProtocolError(ErrorCode::kBadRequest, std::string("not a MessagePack message: ") + e.what());
  }
  // The id first, so that every later error can be routed to its request.
  if (msg.is_object() && msg.contains("id") && is_uint(msg["id"])) *id_out = msg["id"].get<uint64_t>();
  Path root;
  check_utf8(msg, root);
  if (!msg.is_object()) {
    throw ProtocolError(ErrorCode::kBadRequest,
                        "expected a map {\"v\", \"id\", \"method\", \"params\"}, got " + describe_value(msg));
  }
  auto id = msg.find("id");
  if (id == msg.end()) throw ProtocolError(ErrorCode::kBadRequest, "missing required key \"id\"", "/id");
  if (!is_uint(*id)) {
    throw ProtocolError(ErrorCode::kBadRequest,
                        "field /id: expected an unsigned integer request id, got " + describe_value(*id), "/id");
  }
  Request req;
  req.id = id->get<uint64_t>();

  auto v = msg.find("v");
  if (v == msg.end()) {
    throw ProtocolError(ErrorCode::kBadRequest,
                        "missing required key \"v\" (the protocol version, " + std::to_string(kVersion) + ")", "/v");
  }
  if (!v->is_number_integer()) {
    throw ProtocolError(ErrorCode::kBadRequest, "field /v: expected an integer, got " + describe_value(*v), "/v");
  }
  if (v->get<int64_t>() != kVersion) {
    throw ProtocolError(ErrorCode::kUnsupportedVersion,
                        "protocol version " + std::to_string(v->get<int64_t>()) +
                            " is not supported; this server speaks version " + std::to_string(kVersion),
                        "/v");
  }
  auto method = msg.find("method");
  if (method == msg.end()) throw ProtocolError(ErrorCode::kBadRequest, "missing required key \"method\"", "/method");
  if (!method->is_string() || method->get_ref<const std::string&>().empty()) {
    throw ProtocolError(ErrorCode::kBadRequest, "field /method: expected a method name, got " + describe_value(*method),
                        "/method");
  }
  if (method->get_ref<const std::string&>().size() > kMaxMethodChars) {
    throw ProtocolError(ErrorCode::kUnknownMethod,
                        "field /method: a method name has at most " + std::to_string(kMaxMethodChars) +
                            " characters, got " + std::to_string(method->get_ref<const std::string&>().size()),
                        "/method");
  }
  req.method = method->get<std::string>();
  if (auto params = msg.find("params"); params != msg.end() && !params->is_null()) {
    if (!params->is_object()) {
      throw ProtocolError(ErrorCode::kBadRequest, "field /params: expected a map, got " + describe_value(*params),
                          "/params");
    }
    req.params = std::move(*params);
  }
  for (auto it = msg.begin(); it != msg.end(); ++it) {
    if (std::find(kRequestKeys.begin(), kRequestKeys.end(), it.key()) != kRequestKeys.end()) continue;
    const std::string hint = closest_match(it.key(), kRequestKeys);
    throw ProtocolError(ErrorCode::kBadRequest,
                        "unknown key " + quoted_name(it.key()) +
                            (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                            "; a request has keys v, id, method, params",
                        json_pointer_append("", it.key().size() > 60 ? it.key().substr(0, 57) + "..." : it.key()));
  }
  return req;
}

std::string encode_request(uint64_t id, const std::string& method, const json& params) {
  return msgpack::encode({{"v", kVersion}, {"id", id}, {"method", method}, {"params", params}});
}

std::string encode_result(const json& id, const json& result) {
  return msgpack::encode({{"v", kVersion}, {"id", id}, {"ok", true}, {"result", result}});
}

std::string encode_error(const json& id, ErrorCode code, const std::string& message, const std::string& field) {
  json error = {{"code", error_code_name(code)}, {"message", message}};
  if (!field.empty()) error["field"] = field;
  return msgpack::encode({{"v", kVersion}, {"id", id}, {"ok", false}, {"error", std::move(error)}});
}

std::string encode_error(const json& id, const ProtocolError& error) {
  return encode_error(id, error.code(), error.what(), error.field());
}

Reply decode_reply(std::string_view payload) {
  json msg;
  try {
    msg = msgpack::decode(payload);
  } catch (const msgpack::DecodeError& e) {
    throw ProtocolError(ErrorCode::kBadRequest, std::string("reply is not MessagePack: ") + e.what());
  }
  if (!msg.is_object() || !msg.contains("ok") || !msg["ok"].is_boolean() || !msg.contains("id") ||
      msg.value("v", json()) != json(kVersion)) {
    throw ProtocolError(ErrorCode::kBadRequest, "malformed reply: " + describe_value(msg));
  }
  Reply r;
  r.id = msg["id"];
  r.ok = msg["ok"].get<bool>();
  if (r.ok) {
    r.result = msg.value("result", json::object());
    return r;
  }
  const json error = msg.value("error", json::object());
  if (!error.is_object()) throw ProtocolError(ErrorCode::kBadRequest, "malformed error reply: " + describe_value(msg));
  // A peer may send any type here; a number where a string belongs is the
  // peer's fault, named as such, not a json::type_error escaping the decoder.
  const auto text = [&](const char* key) {
    const auto it = error.find(key);
    if (it == error.end()) return std::string();
    if (!it->is_string()) {
      const std::string pointer = std::string("/error/") + key;
      throw ProtocolError(ErrorCode::kBadRequest,
                          "malformed error reply: field " + pointer + " must be a string, got " + describe_value(*it),
                          pointer);
    }
    return it->get<std::string>();
  };
  r.code = text("code");
  r.message = text("message");
  r.field = text("field");
  return r;
}

ProtocolError from_input_error(const InputError& error, ErrorCode code, const std::string& label,
                               const std::string& prefix) {
  const std::string message = error.what();
  const std::string lead = label + ": field ";
  if (message.compare(0, lead.size(), lead) != 0) return ProtocolError(code, message, prefix);
  const size_t start = lead.size();
  const size_t end = message.find(": ", start);
  if (end == std::string::npos) return ProtocolError(code, message, prefix);
  std::string pointer = message.substr(start, end - start);
  if (pointer == "/") pointer.clear();
  std::string rest = message.substr(end + 2);
  const std::string object = prefix + pointer;
  std::string field = object;
  // Unknown keys are reported against their object; the key itself is the
  // more useful place to point at.
  const std::string unknown = "unknown key \"";
  if (rest.compare(0, unknown.size(), unknown) == 0) {
    const size_t close = rest.find('"', unknown.size());
    if (close != std::string::npos)
      field = json_pointer_append(field, rest.substr(unknown.size(), close - unknown.size()));
  }
  return ProtocolError(code, "field " + (object.empty() ? std::string("/") : object) + ": " + rest, field);
}

}  // namespace kforge::rpc
