#include "kforge/core/document.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace kforge {
namespace {

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

// Resolves a plain YAML scalar the way YAML 1.2's core schema does, so that
// `3`, `1e-2`, `true` and `null` become numbers, booleans and null while
// quoted scalars stay strings.
json resolve_plain_scalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  // Integers: optional sign, digits only.
  {
    size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
    if (i < text.size() && std::all_of(text.begin() + static_cast<long>(i), text.end(), ::isdigit)) {
      try {
        size_t used = 0;
        long long v = std::stoll(text, &used);
        if (used == text.size()) return v;
      } catch (const std::exception&) {
        // Out of range: fall through to floating point.
      }
    }
  }
  if (text == ".inf" || text == "+.inf" || text == ".Inf") return std::numeric_limits<double>::infinity();
  if (text == "-.inf" || text == "-.Inf") return -std::numeric_limits<double>::infinity();
  if (text == ".nan" || text == ".NaN") return std::numeric_limits<double>::quiet_NaN();
  {
    bool has_digit = std::any_of(text.begin(), text.end(), ::isdigit);
    bool numeric_chars = std::all_of(text.begin(), text.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+';
    });
    if (has_digit && numeric_chars) {
      try {
        size_t used = 0;
        double v = std::stod(text, &used);
        if (used == text.size()) return v;
      } catch (const std::exception&) {
        // Not a number after all: keep it a string.
      }
    }
  }
  return text;
}

json yaml_to_json(const YAML::Node& node, const std::string& pointer, Document& doc) {
  const YAML::Mark mark = node.Mark();
  if (mark.line >= 0) doc.locations[pointer] = {mark.line + 1, mark.column + 1};
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      if (node.Tag() == "!") return node.Scalar();  // quoted: always a string
      return resolve_plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json out = json::array();
      size_t i = 0;
      for (const auto& item : node) out.push_back(yaml_to_json(item, json_pointer_append(pointer, i++), doc));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          throw InputError(doc.source + ":" + std::to_string(kv.first.Mark().line + 1) +
                           ": mapping keys must be plain strings");
        }
        const std::string key = kv.first.Scalar();
        if (out.contains(key)) {
          throw InputError(doc.source + ":" + std::to_string(kv.first.Mark().line + 1) + ": duplicate key '" + key +
                           "' in " + (pointer.empty() ? "/" : pointer));
        }
        out[key] = yaml_to_json(kv.second, json_pointer_append(pointer, key), doc);
      }
      return out;
    }
  }
  return nullptr;
}

std::string type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string display_pointer(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

}  // namespace

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    throw InputError(path.string() + ": " + (exists ? "cannot be read (check permissions)" : "no such file"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Document Document::from_file(const std::filesystem::path& path) {
  const std::string ext = lower_extension(path);
  const std::string text = read_text_file(path);
  if (ext == ".json") return from_json_text(text, path.string());
  if (ext == ".yaml" || ext == ".yml") return from_yaml_text(text, path.string());
  throw InputError(path.string() + ": unknown file type '" + ext + "'; expected .json, .yaml or .yml");
}

Document Document::from_json_text(const std::string& text, std::string source) {
  Document doc;
  doc.source = std::move(source);
  try {
    doc.root = json::parse(text);
  } catch (const json::parse_error& e) {
    // Convert the byte offset into line:column for the message.
    size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    int line = 1, col = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const auto pos = what.find("syntax error");
    throw InputError(doc.source + ":" + std::to_string(line) + ":" + std::to_string(col) + ": invalid JSON: " +
                     (pos == std::string::npos ? what : what.substr(pos)));
  }
  return doc;
}

Document Document::from_yaml_text(const std::string& text, std::string source) {
  Document doc;
  doc.source = std::move(source);
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(doc.source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": invalid YAML: " + e.msg);
  }
  doc.root = yaml_to_json(node, "", doc);
  return doc;
}

Document Document::from_value(json value, std::string source) {
  Document doc;
  doc.source = std::move(source);
  doc.root = std::move(value);
  return doc;
}

std::string Document::where(const std::string& pointer) const {
  auto it = locations.find(pointer);
  if (it == locations.end()) return source;
  return source + ":" + std::to_string(it->second.first) + ":" + std::to_string(it->second.second);
}

ObjectReader Document::root_object() const { return Field(*this, root, "").as_object(); }

std::string json_pointer_append(const std::string& pointer, const std::string& key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return pointer + "/" + escaped;
}

std::string json_pointer_append(const std::string& pointer, size_t index) {
  return pointer + "/" + std::to_string(index);
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Only suggest when the typo is small relative to the word.
  if (best.empty() || best_d > std::max<size_t>(2, word.size() / 3)) return "";
  return best;
}

std::string describe_value(const json& value) {
  std::string s = value.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return type_name(value) + " " + s;
}

// ---- Field ----

void Field::fail(const std::string& expected) const {
  throw InputError(doc_->where(pointer_) + ": field " + display_pointer(pointer_) + ": expected " + expected +
                   ", got " + describe_value(*value_));
}

void Field::fail_message(const std::string& message) const {
  throw InputError(doc_->where(pointer_) + ": field " + display_pointer(pointer_) + ": " + message);
}

std::string Field::as_string() const {
  if (!value_->is_string()) fail("a string");
  return value_->get<std::string>();
}

bool Field::as_bool() const {
  if (!value_->is_boolean()) fail("true or false");
  return value_->get<bool>();
}

double Field::as_number() const {
  if (!value_->is_number()) fail("a number");
  double v = value_->get<double>();
  if (!std::isfinite(v)) fail("a finite number");
  return v;
}

double Field::as_positive_number() const {
  if (!value_->is_number() || !(value_->get<double>() > 0) || !std::isfinite(value_->get<double>())) {
    fail("a positive number");
  }
  return value_->get<double>();
}

double Field::as_nonnegative_number() const {
  if (!value_->is_number() || !(value_->get<double>() >= 0) || !std::isfinite(value_->get<double>())) {
    fail("a number >= 0");
  }
  return value_->get<double>();
}

int64_t Field::as_int() const {
  if (value_->is_number_integer() || value_->is_number_unsigned()) {
    if (value_->is_number_unsigned() && value_->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail("an integer that fits in 64 bits");
    }
    return value_->get<int64_t>();
  }
  // YAML/JSON writers sometimes emit 3.0 for 3: accept integral floats.
  if (value_->is_number_float()) {
    double d = value_->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  fail("an integer");
}

int64_t Field::as_int_in(int64_t lo, int64_t hi) const {
  int64_t v = as_int();
  if (v < lo || v > hi) fail("an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::vector<int64_t> Field::as_shape() const {
  if (!value_->is_array()) fail("an array of positive integers (a shape such as [4096, 1024])");
  std::vector<int64_t> out;
  size_t i = 0;
  for (const auto& item : *value_) {
    Field f(*doc_, item, json_pointer_append(pointer_, i++));
    int64_t v = 0;
    if (item.is_number_integer() || item.is_number_unsigned()) {
      v = item.get<int64_t>();
    } else {
      f.fail("a positive integer (shape dimension)");
    }
    if (v <= 0) f.fail("a positive integer (shape dimension)");
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> Field::as_string_list() const {
  if (!value_->is_array()) fail("an array of strings");
  std::vector<std::string> out;
  for (const auto& f : as_array()) out.push_back(f.as_string());
  return out;
}

std::string Field::as_enum(const std::vector<std::string>& allowed) const {
  std::string list;
  for (size_t i = 0; i < allowed.size(); ++i) list += (i ? ", " : "") + ("\"" + allowed[i] + "\"");
  if (!value_->is_string()) fail("one of " + list);
  const std::string v = value_->get<std::string>();
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return v;
  std::string hint = closest_match(v, allowed);
  fail_message("\"" + v + "\" is not one of " + list + (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"));
}

ObjectReader Field::as_object() const {
  if (!value_->is_object()) fail("an object");
  return ObjectReader(*doc_, *value_, pointer_);
}

std::vector<Field> Field::as_array() const {
  if (!value_->is_array()) fail("an array");
  std::vector<Field> out;
  size_t i = 0;
  for (const auto& item : *value_) out.emplace_back(*doc_, item, json_pointer_append(pointer_, i++));
  return out;
}

// ---- ObjectReader ----

ObjectReader::ObjectReader(const Document& doc, const json& value, std::string pointer)
    : doc_(&doc), value_(&value), pointer_(std::move(pointer)) {}

Field ObjectReader::required(const std::string& key) {
  known_.push_back(key);
  auto it = value_->find(key);
  if (it == value_->end()) {
    throw InputError(doc_->where(pointer_) + ": field " + display_pointer(pointer_) + ": missing required key \"" +
                     key + "\"");
  }
  return Field(*doc_, *it, json_pointer_append(pointer_, key));
}

std::optional<Field> ObjectReader::optional(const std::string& key) {
  known_.push_back(key);
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return Field(*doc_, *it, json_pointer_append(pointer_, key));
}

bool ObjectReader::has(const std::string& key) const { return value_->contains(key); }

void ObjectReader::allow(const std::string& key) { known_.push_back(key); }

void ObjectReader::finish() const {
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
    std::string list;
    std::vector<std::string> sorted = known_;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) list += (i ? ", " : "") + sorted[i];
    std::string hint = closest_match(it.key(), sorted);
    const std::string child = json_pointer_append(pointer_, it.key());
    throw InputError(doc_->where(child) + ": field " + display_pointer(pointer_) + ": unknown key \"" + it.key() +
                     "\"" + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") + "; allowed keys: " + list);
  }
}

}  // namespace kforge
