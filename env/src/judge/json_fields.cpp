#include "judge/json_fields.h"

#include <limits>

namespace kforge::judge {

const char* field_kind_name(FieldKind kind) {
  switch (kind) {
    case FieldKind::kString:
      return "a string";
    case FieldKind::kInteger:
      return "an integer";
    case FieldKind::kUnsigned:
      return "a non-negative integer";
    case FieldKind::kNumber:
      return "a number";
    case FieldKind::kBoolean:
      return "a boolean";
    case FieldKind::kObject:
      return "a map";
    case FieldKind::kArray:
      return "an array";
    case FieldKind::kAny:
      return "a value";
  }
  return "a value";
}

const char* describe_json_type(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
      return value.get<int64_t>() < 0 ? "a negative integer" : "an integer";
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a floating-point number";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "a map";
    case json::value_t::binary:
      return "binary data";
    case json::value_t::discarded:
      return "nothing";
  }
  return "something else";
}

bool has_kind(const json& value, FieldKind kind) {
  switch (kind) {
    case FieldKind::kString:
      return value.is_string();
    case FieldKind::kInteger:
      // MessagePack uint64 values above INT64_MAX decode as unsigned.
      return value.is_number_integer() &&
             (!value.is_number_unsigned() ||
              value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    case FieldKind::kUnsigned:
      return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
    case FieldKind::kNumber:
      return value.is_number();
    case FieldKind::kBoolean:
      return value.is_boolean();
    case FieldKind::kObject:
      return value.is_object();
    case FieldKind::kArray:
      return value.is_array();
    case FieldKind::kAny:
      return true;
  }
  return false;
}

std::string check_fields(const json& object, const std::vector<FieldRule>& rules, std::string_view where) {
  const std::string prefix = where.empty() ? "" : std::string(where) + ": ";
  if (!object.is_object()) return prefix + "is " + describe_json_type(object) + ", expected a map";
  for (const FieldRule& rule : rules) {
    auto it = object.find(rule.key);
    if (it == object.end()) {
      if (rule.required) return prefix + "field '" + rule.key + "' is missing";
      continue;
    }
    if (!has_kind(*it, rule.kind)) {
      return prefix + "field '" + rule.key + "' is " + describe_json_type(*it) + ", expected " +
             field_kind_name(rule.kind);
    }
  }
  return "";
}

int64_t integer_or(const json& object, const char* key, int64_t fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && has_kind(*it, FieldKind::kInteger) ? it->get<int64_t>() : fallback;
}

uint64_t unsigned_or(const json& object, const char* key, uint64_t fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && has_kind(*it, FieldKind::kUnsigned) ? it->get<uint64_t>() : fallback;
}

double number_or(const json& object, const char* key, double fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string string_or(const json& object, const char* key, const std::string& fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool boolean_or(const json& object, const char* key, bool fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

void make_valid_utf8(json* value) {
  if (value->is_string()) {
    const std::string& s = value->get_ref<const std::string&>();
    std::string fixed = to_valid_utf8(s);
    if (fixed != s) *value = std::move(fixed);
  } else if (value->is_array()) {
    for (auto& item : *value) make_valid_utf8(&item);
  } else if (value->is_object()) {
    bool keys_ok = true;
    for (auto it = value->begin(); it != value->end(); ++it) {
      make_valid_utf8(&it.value());
      keys_ok = keys_ok && to_valid_utf8(it.key()) == it.key();
    }
    if (!keys_ok) {
      json fixed = json::object();
      for (auto it = value->begin(); it != value->end(); ++it) fixed[to_valid_utf8(it.key())] = std::move(it.value());
      *value = std::move(fixed);
    }
  }
}

}  // namespace kforge::judge
