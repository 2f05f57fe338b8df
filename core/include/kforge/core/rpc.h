// The request/reply envelope of KernelForge's ZeroMQ protocols, version 1
// (trainer_bridge/PROTOCOL.md): one MessagePack map per ZeroMQ message. The env
// server speaks it; the rollout workers' policy clients and the trajectory
// streams reuse the same envelope and the bounded decoding of msgpack.h.
//
//   request  {"v": 1, "id": <uint>, "method": "<name>", "params": {...}}
//   reply    {"v": 1, "id": <uint>, "ok": true,  "result": {...}}
//            {"v": 1, "id": <uint>|nil, "ok": false,
//             "error": {"code": "...", "message": "...", "field": "..."}}
//
// The codec is separate from the server so that malformed input can be tested
// byte by byte without sockets, and so that every C++ peer (the server, the
// rollout workers, the streams, tests) shares the exact encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/core/document.h"
#include "kforge/core/error.h"
#include "kforge/core/msgpack.h"

namespace kforge::rpc {

inline constexpr int kVersion = 1;
// Method names are short words ("step"); a longer one is refused before it is
// compared with the known ones or quoted back.
inline constexpr size_t kMaxMethodChars = 64;

enum class ErrorCode {
  kBadRequest,          // not MessagePack, not a map, wrong types, unknown or missing keys
  kUnsupportedVersion,  // "v" is not a protocol version this server speaks
  kUnknownMethod,       // "method" names no method
  kInvalidTask,         // the task does not parse or type-check
  kUnknownTask,         // task_id is not in the server's task set
  kInvalidAction,       // a typed "action" object does not parse
  kUnknownEnv,          // env_id is not an env this client holds
  kEnvBusy,             // the env has a step in flight
  kNoEpisode,           // step before the env's first reset
  kEpisodeFinished,     // step after the episode terminated or was truncated
  kPoolFull,            // make: every env slot is held
  kTooManyRequests,     // the client's in-flight limit is reached
  kShuttingDown,        // the server is stopping; in-flight steps it gave up on
  kInternal,            // a bug or failure of the server itself
};

const std::string& error_code_name(ErrorCode code);
// Every code's wire name, in enum order (for documentation and tests).
std::vector<std::string> error_code_names();

// An error to be sent back as {"ok": false, "error": ...}. `field` is a JSON
// pointer into the request ("/params/task/inputs/0/shape"), empty when the
// request as a whole is at fault.
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(ErrorCode code, const std::string& message, std::string field = "")
      : std::runtime_error(message), code_(code), field_(std::move(field)) {}
  ErrorCode code() const { return code_; }
  const std::string& field() const { return field_; }

 private:
  ErrorCode code_;
  std::string field_;
};

struct Request {
  uint64_t id = 0;
  std::string method;
  json params = json::object();
};

// Decodes one request. Throws ProtocolError for anything malformed; `id_out`
// receives the request id as soon as it can be read (it stays null when the
// bytes are not a map with a valid id), so the error can still be routed.
Request decode_request(std::string_view payload, json* id_out);

// The request id of `payload` without decoding it: read only when the id is
// among the map's first 4 entries and every entry before it is a scalar or a
// string of at most 255 bytes (as every KernelForge client writes requests);
// nullopt otherwise. Bounded work whatever the payload; for routing a refusal
// of a request that is not read (the server's full client queue).
std::optional<uint64_t> peek_request_id(std::string_view payload);

// Unknown methods are reported by the server, not here: the codec does not
// know which methods exist.
std::string encode_request(uint64_t id, const std::string& method, const json& params);
// `id` is an unsigned integer, or null for errors about unroutable requests.
std::string encode_result(const json& id, const json& result);
std::string encode_error(const json& id, ErrorCode code, const std::string& message, const std::string& field = "");
std::string encode_error(const json& id, const ProtocolError& error);

struct Reply {
  json id;  // null when the server could not read the request's id
  bool ok = false;
  json result;          // when ok
  std::string code;     // when !ok
  std::string message;  // when !ok
  std::string field;    // when !ok; may be empty
};
// For C++ clients. Throws ProtocolError(kBadRequest) on a malformed reply.
Reply decode_reply(std::string_view payload);

// Turns an InputError raised while reading a sub-document (a task, an action,
// a solution) into a ProtocolError whose field is `prefix` plus the pointer
// that the error names. `label` is the Document source the sub-document was
// read with: the message's leading "<label>: field <pointer>" becomes
// "field <prefix><pointer>".
ProtocolError from_input_error(const InputError& error, ErrorCode code, const std::string& label,
                               const std::string& prefix);

}  // namespace kforge::rpc
