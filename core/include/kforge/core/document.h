// A parsed JSON or YAML document that remembers where each value came from,
// and readers that turn it into typed values with precise errors.
//
// All structured input (tasks, solutions, configs, actions, wire messages)
// goes through ObjectReader, which rejects unknown keys and names the field by
// its JSON pointer (plus file line:column for YAML) in every error.
//
// Every document is bounded while it is read (kforge/core/input_limits.h):
// its size before it is read, its nesting and its number of values (YAML
// aliases counted as the copies they make) as it is parsed. A key repeated in
// one object is an error in JSON as in YAML.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kforge/core/error.h"
#include "kforge/core/input_limits.h"

namespace kforge {

using json = nlohmann::json;

class ObjectReader;

struct Document {
  std::string source;  // file path, or a label such as "<action>"
  json root;
  // JSON pointer -> (line, column), both 1-based. Filled for YAML sources; the
  // JSON parser does not report positions of values, so JSON errors name the
  // pointer only.
  std::map<std::string, std::pair<int, int>> locations;

  // Parses by extension: .json, or .yaml/.yml (any other extension is
  // refused before the file is opened). Throws InputError on I/O or syntax
  // errors, with line and column, and for documents beyond the limits.
  static Document from_file(const std::filesystem::path& path);
  static Document from_json_text(const std::string& text, std::string source);
  static Document from_yaml_text(const std::string& text, std::string source);
  // Wraps an already-parsed value (e.g. from msgpack) for typed reading; the
  // same depth and value limits apply.
  static Document from_value(json value, std::string source);

  // "file:line:col" for YAML values, "file" otherwise.
  std::string where(const std::string& pointer) const;
  ObjectReader root_object() const;
};

// A value at a known place in a document.
class Field {
 public:
  Field(const Document& doc, const json& value, std::string pointer)
      : doc_(&doc), value_(&value), pointer_(std::move(pointer)) {}

  const json& value() const { return *value_; }
  const std::string& pointer() const { return pointer_; }
  const Document& document() const { return *doc_; }

  std::string as_string() const;
  bool as_bool() const;
  double as_number() const;
  double as_positive_number() const;  // > 0
  double as_nonnegative_number() const;
  // A finite number in [lo, hi]; the error names both bounds.
  double as_number_in(double lo, double hi) const;
  int64_t as_int() const;
  int64_t as_int_in(int64_t lo, int64_t hi) const;  // inclusive bounds
  std::vector<int64_t> as_shape() const;            // array of positive integers, may be empty
  std::vector<std::string> as_string_list() const;
  // One of `allowed`; the error lists them and suggests the closest.
  std::string as_enum(const std::vector<std::string>& allowed) const;
  ObjectReader as_object() const;
  std::vector<Field> as_array() const;

  // Throws InputError "<where>: field <pointer>: expected <expected>, got <value>".
  [[noreturn]] void fail(const std::string& expected) const;
  // Throws InputError "<where>: field <pointer>: <message>".
  [[noreturn]] void fail_message(const std::string& message) const;

 private:
  const Document* doc_;
  const json* value_;
  std::string pointer_;
};

// Reads the keys of one JSON object. Call finish() once all known keys are
// read: any key that was never asked for is an error naming the allowed keys
// (with a did-you-mean suggestion), so typos never pass silently.
class ObjectReader {
 public:
  ObjectReader(const Document& doc, const json& value, std::string pointer);

  Field required(const std::string& key);
  std::optional<Field> optional(const std::string& key);
  bool has(const std::string& key) const;
  // Marks a key as known without reading it (for keys handled elsewhere).
  void allow(const std::string& key);
  void finish() const;

  Field self() const { return Field(*doc_, *value_, pointer_); }
  const std::string& pointer() const { return pointer_; }

 private:
  const Document* doc_;
  const json* value_;
  std::string pointer_;
  std::vector<std::string> known_;
};

// Appends a key or index to a JSON pointer, escaping per RFC 6901.
std::string json_pointer_append(const std::string& pointer, const std::string& key);
std::string json_pointer_append(const std::string& pointer, size_t index);

// The closest candidate by edit distance, or "" when nothing is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// Short rendering of a value for error messages (long strings cut).
std::string describe_value(const json& value);

// How many bytes of `text`, at most `max_bytes`, make a prefix that does not
// end inside a UTF-8 sequence: where to cut a string that must stay UTF-8.
size_t utf8_prefix_bytes(std::string_view text, size_t max_bytes);

// Reads a whole file of at most `max_bytes`; InputError naming the path if it
// cannot, or if it is larger (checked before reading a regular file; a device
// or pipe is read only up to the limit).
std::string read_text_file(const std::filesystem::path& path, size_t max_bytes = limits::kMaxDocumentBytes);

}  // namespace kforge
