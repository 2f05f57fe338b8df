// Typed reading of JSON that a candidate could have written: replies on a
// runner's control socket and what they carry (the profile, the sandbox
// state). The candidate can write any frame there, so no field of such a
// reply is trusted to have the type the honest runner gives it. nlohmann's
// .at()/.get<>()/.value() throw on a wrong type, and an exception escaping
// the evaluation becomes a system error that the candidate would have
// caused (docs/threat-model.md, "Who is to blame"). Reading goes through
// these checks instead: a problem is a sentence naming the field, which the
// judge turns into the violation `harness_tamper`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::judge {

using json = nlohmann::json;

enum class FieldKind {
  kString,
  kInteger,   // any integer that fits in int64
  kUnsigned,  // a non-negative integer
  kNumber,    // integer or floating point
  kBoolean,
  kObject,
  kArray,
  kAny,
};

struct FieldRule {
  const char* key;
  FieldKind kind;
  bool required = false;
};

// "an integer", "a string", ... for messages.
const char* field_kind_name(FieldKind kind);
// What a JSON value is, in the same words ("a string", "null", ...).
const char* describe_json_type(const json& value);
bool has_kind(const json& value, FieldKind kind);

// "" when `object` is a JSON object and every rule holds, otherwise the
// first problem, e.g. "field 'rc' is a string, expected an integer" (with
// `where` prefixed: "profile.activity: field ...").
std::string check_fields(const json& object, const std::vector<FieldRule>& rules, std::string_view where = "");

// Typed reads that never throw: the value if present with the right type,
// else the fallback. For code after check_fields, and for optional fields.
int64_t integer_or(const json& object, const char* key, int64_t fallback);
uint64_t unsigned_or(const json& object, const char* key, uint64_t fallback);
double number_or(const json& object, const char* key, double fallback);
std::string string_or(const json& object, const char* key, const std::string& fallback);
bool boolean_or(const json& object, const char* key, bool fallback);

// Replaces every byte sequence that is not well-formed UTF-8 with U+FFFD.
// Candidate text (its output, exception messages, kernel names) travels in
// reports that are later written as JSON, and json::dump throws on bad UTF-8.
std::string to_valid_utf8(std::string_view text);
// The same for every string and object key inside `value`.
void make_valid_utf8(json* value);

}  // namespace kforge::judge
