#include "protocol.h"

#include <array>
#include <utility>

namespace kforge::env::protocol {
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

std::string encode(const json& message) {
  std::string out;
  json::to_msgpack(message, out);
  return out;
}

// Big-endian unsigned integer of `n` bytes at `p`.
uint64_t read_be(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// How a value of a type byte 0xc0..0xdf is laid out: `fixed` bytes, then a
// big-endian length of `len_bytes` that counts payload bytes (str, bin, ext)
// or items (array, map).
struct Layout {
  bool valid = true;
  uint8_t fixed = 0;
  uint8_t len_bytes = 0;
  bool container = false;
  bool map = false;
};

constexpr Layout kInvalidLayout = {false, 0, 0, false, false};
constexpr Layout fixed_layout(uint8_t n) { return {true, n, 0, false, false}; }
constexpr Layout sized_layout(uint8_t len, uint8_t extra = 0) { return {true, extra, len, false, false}; }
constexpr Layout array_layout(uint8_t len) { return {true, 0, len, true, false}; }
constexpr Layout map_layout(uint8_t len) { return {true, 0, len, true, true}; }

const Layout kTypedLayouts[32] = {
    fixed_layout(0),    kInvalidLayout,     fixed_layout(0),    fixed_layout(0),  // nil, (never used), false, true
    sized_layout(1),    sized_layout(2),    sized_layout(4),                      // bin 8/16/32
    sized_layout(1, 1), sized_layout(2, 1), sized_layout(4, 1),                   // ext 8/16/32 (+ type byte)
    fixed_layout(4),    fixed_layout(8),                                          // float 32/64
    fixed_layout(1),    fixed_layout(2),    fixed_layout(4),    fixed_layout(8),  // uint 8..64
    fixed_layout(1),    fixed_layout(2),    fixed_layout(4),    fixed_layout(8),  // int 8..64
    fixed_layout(2),    fixed_layout(3),    fixed_layout(5),    fixed_layout(9),  // fixext 1/2/4/8 (+ type byte)
    fixed_layout(17),                                                             // fixext 16
    sized_layout(1),    sized_layout(2),    sized_layout(4),                      // str 8/16/32
    array_layout(2),    array_layout(4),    map_layout(2),      map_layout(4),    // array 16/32, map 16/32
};

// True for well-formed UTF-8 (no overlongs, surrogates or code points past
// U+10FFFF).
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// The protocol's strings are UTF-8; checking them once here means every
// later message that quotes a value (json::dump) is safe.
void check_utf8(const json& value, const std::string& pointer) {
  if (value.is_string()) {
    if (!valid_utf8(value.get_ref<const std::string&>())) {
      throw ProtocolError(ErrorCode::kBadRequest, "field " + pointer + ": the string is not valid UTF-8", pointer);
    }
  } else if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!valid_utf8(it.key())) {
        throw ProtocolError(ErrorCode::kBadRequest,
                            "field " + (pointer.empty() ? std::string("/") : pointer) + ": a key is not valid UTF-8",
                            pointer);
      }
      check_utf8(it.value(), json_pointer_append(pointer, it.key()));
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) check_utf8(value[i], json_pointer_append(pointer, i));
  }
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

std::string check_msgpack(std::string_view payload, int max_depth) {
  const auto* data = reinterpret_cast<const unsigned char*>(payload.data());
  const size_t size = payload.size();
  size_t pos = 0;
  // Items still to read in each open container; the bottom entry is the one
  // top-level value.
  std::vector<uint64_t> open = {1};
  while (!open.empty()) {
    if (pos >= size) return "truncated after " + std::to_string(pos) + " bytes";
    const unsigned char b = data[pos++];
    --open.back();
    Layout h;
    uint64_t children = 0;  // items of a container that starts here
    uint64_t skip = 0;      // payload bytes after the header
    if (b <= 0x7f || b >= 0xe0) {
      // fixint: the byte is the value
    } else if (b <= 0x9f) {
      h.container = true;
      h.map = b <= 0x8f;
      children = b & 0x0f;
    } else if (b <= 0xbf) {
      skip = b & 0x1f;  // fixstr
    } else {
      h = kTypedLayouts[b - 0xc0];
      if (!h.valid)
        return "byte " + std::to_string(b) + " at offset " + std::to_string(pos - 1) + " is not a MessagePack type";
      skip = h.fixed;
      if (h.len_bytes > 0) {
        if (size - pos < h.len_bytes) return "truncated length at offset " + std::to_string(pos);
        const uint64_t n = read_be(data + pos, h.len_bytes);
        pos += h.len_bytes;
        if (h.container) {
          children = n;
        } else {
          skip += n;
        }
      }
    }
    if (skip > size - pos) return "truncated value at offset " + std::to_string(pos);
    pos += static_cast<size_t>(skip);
    if (h.container) {
      const uint64_t items = h.map ? 2 * children : children;
      // Each item takes at least one byte: a count beyond what is left is a
      // lie, and trusting it would make the decoder reserve huge arrays.
      if (items > size - pos) return "container at offset " + std::to_string(pos) + " claims more items than bytes";
      if (items > 0) {
        if (static_cast<int>(open.size()) >= max_depth) {
          return "nested deeper than " + std::to_string(max_depth) + " levels";
        }
        open.push_back(items);
      }
    }
    while (!open.empty() && open.back() == 0) open.pop_back();
  }
  if (pos != size) return std::to_string(size - pos) + " trailing bytes after the message";
  return "";
}

Request decode_request(std::string_view payload, json* id_out) {
  *id_out = nullptr;
  if (payload.empty()) throw ProtocolError(ErrorCode::kBadRequest, "empty message; expected a MessagePack map");
  if (std::string why = check_msgpack(payload); !why.empty()) {
    throw ProtocolError(ErrorCode::kBadRequest, "not a MessagePack message: " + why);
  }
  json msg;
  try {
    msg = json::from_msgpack(payload.begin(), payload.end());
  } catch (const json::exception& e) {
    throw ProtocolError(ErrorCode::kBadRequest, std::string("not a MessagePack message: ") + e.what());
  }
  // The id first, so that every later error can be routed to its request.
  if (msg.is_object() && msg.contains("id") && is_uint(msg["id"])) *id_out = msg["id"].get<uint64_t>();
  check_utf8(msg, "");
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
                        "unknown key \"" + it.key() + "\"" + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                            "; a request has keys v, id, method, params",
                        json_pointer_append("", it.key()));
  }
  return req;
}

std::string encode_request(uint64_t id, const std::string& method, const json& params) {
  return encode({{"v", kVersion}, {"id", id}, {"method", method}, {"params", params}});
}

std::string encode_result(const json& id, const json& result) {
  return encode({{"v", kVersion}, {"id", id}, {"ok", true}, {"result", result}});
}

std::string encode_error(const json& id, ErrorCode code, const std::string& message, const std::string& field) {
  json error = {{"code", error_code_name(code)}, {"message", message}};
  if (!field.empty()) error["field"] = field;
  return encode({{"v", kVersion}, {"id", id}, {"ok", false}, {"error", std::move(error)}});
}

std::string encode_error(const json& id, const ProtocolError& error) {
  return encode_error(id, error.code(), error.what(), error.field());
}

Reply decode_reply(std::string_view payload) {
  if (std::string why = check_msgpack(payload); !why.empty()) {
    throw ProtocolError(ErrorCode::kBadRequest, "reply is not MessagePack: " + why);
  }
  json msg;
  try {
    msg = json::from_msgpack(payload.begin(), payload.end());
  } catch (const json::exception& e) {
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
  r.code = error.value("code", "");
  r.message = error.value("message", "");
  r.field = error.value("field", "");
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

}  // namespace kforge::env::protocol
