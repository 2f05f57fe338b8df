// Reading a request's params off the env server's wire (trainer_bridge/PROTOCOL.md): the
// readers the method handlers share.
#pragma once

#include <cstdint>
#include <string>

#include "kforge/core/document.h"
#include "kforge/core/rpc.h"
#include "kforge/core/solution.h"

namespace kforge::env::server {

// Params are read through ObjectReader like every other input, so unknown
// keys and wrong types are reported with their field.
template <class F>
auto reading_params(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError& e) {
    throw rpc::from_input_error(e, rpc::ErrorCode::kBadRequest, "params", "/params");
  }
}

// MessagePack keeps integers and floats apart, so the wire takes integers as
// integers: a float (1.0 for env 1) is a client's bug that the config
// readers' lenience for YAML (3.0 for 3) would otherwise hide.
inline void require_wire_integer(const Field& f, const std::string& example) {
  if (!f.value().is_number_integer() && !f.value().is_number_unsigned()) {
    f.fail("an integer (MessagePack int, e.g. " + example + "; a float such as " + example + ".0 is refused)");
  }
}

// An episode seed: any unsigned 64-bit integer (docs/environment.md, "Episode lifecycle").
inline uint64_t wire_seed(const Field& f) {
  require_wire_integer(f, "7");
  if (!f.value().is_number_unsigned()) f.fail("an unsigned integer in [0, 2^64-1]");
  return f.value().get<uint64_t>();
}

// A solution object from the wire. "source_file" is refused: it would read
// files of the server's host on behalf of a remote client.
inline Solution wire_solution(const json& value, SolutionMode default_mode, const std::string& pointer) {
  if (value.is_object() && value.contains("source_file")) {
    throw rpc::ProtocolError(
        rpc::ErrorCode::kBadRequest,
        "field " + pointer + "/source_file: not accepted over the wire; send the code as \"source\"",
        pointer + "/source_file");
  }
  json v = value;
  if (v.is_object() && !v.contains("mode")) v["mode"] = solution_mode_name(default_mode);
  try {
    return parse_solution(Document::from_value(v, "solution"));
  } catch (const InputError& e) {
    throw rpc::from_input_error(e, rpc::ErrorCode::kBadRequest, "solution", pointer);
  }
}

}  // namespace kforge::env::server
