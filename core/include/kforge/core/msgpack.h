// Bounded MessagePack decoding for everything that arrives from outside the
// process: env-server requests, runner frames, policy replies, trajectory
// stream messages.
//
// nlohmann's decoder recurses once per nesting level, trusts the counts a
// message announces (a hostile payload of nested one-element arrays overflows
// the stack; a huge announced count reserves memory never filled) and reads
// strings one byte per call. decode() first walks the bytes iteratively
// (check()), then builds the DOM itself from a payload known to be
// well-formed, no deeper than the limit and no larger than it claims.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kforge/core/input_limits.h"

namespace kforge::msgpack {

using json = nlohmann::json;

// Deep enough for every message KernelForge sends (a task nests ~6 levels, a
// trajectory ~10); far below what would threaten a thread's stack.
inline constexpr int kMaxDepth = limits::kMaxMessageDepth;

// Thrown for payloads that are not one well-formed, bounded MessagePack value.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "" when `payload` is exactly one well-formed MessagePack value no deeper than
// `max_depth`, else what is wrong ("nested deeper than 128 levels", "truncated
// value at offset 17", ...). Iterative: it cannot itself be driven into deep
// recursion, and it reads every byte at most once.
std::string check(std::string_view payload, int max_depth = kMaxDepth);

// check(), then the decode. DecodeError carries check()'s reason or the
// decoder's. Strings are not checked for UTF-8 here (see valid_utf8).
json decode(std::string_view payload, int max_depth = kMaxDepth);

std::string encode(const json& value);

// Well-formed UTF-8: no overlong forms, surrogates or code points past
// U+10FFFF. MessagePack strings are bytes; protocols that promise UTF-8 check
// it once at the edge so later json::dump calls cannot throw.
bool valid_utf8(std::string_view s);

}  // namespace kforge::msgpack
